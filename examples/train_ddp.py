"""A real, small, deterministic PyTorch DDP training run that survives being stopped and resumes to the same model.

Run it under dispatch (any adapter) with a shared checkpoint directory and a cessation warning::

    dispatch run --nodes 2 -x 'dispatch.SharedCheckpoint={"path": "/shared/ckpt/run1"}' \\
        -x 'dispatch.CessationWarning={"seconds": 30}' -- python examples/train_ddp.py --out /shared/run1.params

What makes the result identical whatever interrupts it:

* the model, its initialisation and the optimizer are seeded; torch runs deterministic kernels on one thread;
* the data of a global step is a function of (seed, step, rank) only, so a resumed run sees exactly the batches
  the uninterrupted run saw;
* a checkpoint holds the model, the optimizer state and the step; it is written by rank 0 to a temporary file,
  fsynced and renamed (``step-<N>.pt``), so a reader sees a complete checkpoint or none; the run resumes from the
  newest one;
* every rank learns of a cessation (``dispatch.job``) at the same step: the flags are all-reduced each step, so all
  ranks checkpoint together. On the warning signal the run checkpoints and goes on (the warning may come early,
  or for nothing); on SIGTERM it checkpoints and exits 143, leaving the cause (preempted, timeout) to the scheduler.

Every rank reports its progress after each step (``dispatch.job.progress``: step, total, loss), so ``dispatch
status`` shows it and a rule with ``stalledAfter`` ends a run that hangs. ``--hang-at STEP --hang-rank R`` is a
test flag: in the job's first execution, rank R stops at STEP without a word (as a rank stuck in a collective
does) and the others wait for it inside the next all-reduce. ``--progress-ab BLOCK`` is a bench flag: the progress
calls are made in only one block of BLOCK steps of each pair of blocks, and rank 0 logs each block's seconds, so
``bench/train.py`` can measure what the calls cost within one run (:func:`progress_in_block`).

The final parameters are written by rank 0 as raw little-endian float32 bytes in ``state_dict`` order (``--out``),
so a test can compare two runs bit for bit. Each rank prints JSON lines (``event``: start, resumed, first-step,
step, warned, checkpoint, stopped, done, and block under ``--progress-ab``) on stdout, which the tests and
``bench/train.py`` read (first-step and done carry the process's CPU seconds, ``cpu``).
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import random
import sys
import time

from dispatch import job

# Install the warning handlers before torch's import (seconds): Slurm may send --signal up to 60 s early, and
# an unhandled SIGUSR1 ends a process.
job.ceasing()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

SEED = 1234
FEATURES = 16
BATCH = 8


def log(**fields: object) -> None:
    print(json.dumps({"t": round(time.time(), 3), **fields}), flush=True)


def make_model() -> nn.Module:
    torch.manual_seed(SEED)
    return nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of one global step on one rank: a function of (seed, step, rank) alone."""
    g = torch.Generator().manual_seed(SEED * 1_000_003 + step * 1_009 + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    y = torch.sin(x.sum(dim=1, keepdim=True))
    return x, y


def progress_in_block(block: int) -> bool:
    """Bench flag ``--progress-ab``: whether the steps of ``block`` call ``dispatch.job.progress``. Blocks go in
    pairs (0 and 1, 2 and 3, ...), one with the calls and one without, the order drawn from a generator seeded by
    the pair's index: every rank agrees, and no period of the run lines up with the calls."""
    return block % 2 == random.Random(SEED + block // 2).getrandbits(1)


def checkpoints(directory: str) -> list[str]:
    """Complete checkpoints, oldest first (temporary files never match: they are renamed only when whole)."""
    return sorted(glob.glob(os.path.join(directory, "step-*.pt")))


def save(directory: str, step: int, model: nn.Module, opt: torch.optim.Optimizer) -> str:
    path = os.path.join(directory, f"step-{step:08d}.pt")
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save({"step": step, "model": model.state_dict(), "optimizer": opt.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return path


def write_params(path: str, model: nn.Module) -> None:
    # raw float32 bytes without numpy (torch's wheels do not bring it): a uint8 view of each tensor
    data = b"".join(
        bytes(t.detach().to(torch.float32).contiguous().flatten().view(torch.uint8).tolist())
        for t in model.state_dict().values()
    )
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--steps", type=int, default=200, help="global steps to train (default 200)")
    p.add_argument("--checkpoint-every", type=int, default=20, help="checkpoint every K steps (default 20)")
    p.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep per step (to make room for faults)")
    p.add_argument("--checkpoint-dir", help="default: DISPATCH_CHECKPOINT_DIR (dispatch.SharedCheckpoint)")
    p.add_argument("--out", required=True, help="file for the final parameters (raw float32, rank 0 writes it)")
    p.add_argument("--hang-at", type=int, help="test flag: in the first execution, --hang-rank stops at this step")
    p.add_argument("--hang-rank", type=int, default=1, help="the rank that hangs (default 1)")
    p.add_argument(
        "--progress-ab",
        type=int,
        metavar="BLOCK",
        help="bench flag: progress calls in one block of BLOCK steps of each pair; rank 0 logs each block's seconds",
    )
    args = p.parse_args(argv)

    ctx = job.context()
    ckpt_dir = args.checkpoint_dir or ctx.checkpoint_dir
    if not ckpt_dir:
        p.error("no checkpoint directory: give --checkpoint-dir or run with dispatch.SharedCheckpoint")
    os.makedirs(ckpt_dir, exist_ok=True)

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    log(event="start", rank=ctx.rank, world=ctx.world_size, node=ctx.node, execution=ctx.execution)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{ctx.master_addr}:{ctx.master_port}",
        rank=ctx.rank,
        world_size=ctx.world_size,
        timeout=datetime.timedelta(seconds=60),
    )
    model = make_model()
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    found = checkpoints(ckpt_dir)
    if found:
        state = torch.load(found[-1], map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = int(state["step"])
        log(event="resumed", rank=ctx.rank, step=step, checkpoint=os.path.basename(found[-1]))
    last_saved = first = step
    warned_at: int | None = None
    loss: torch.Tensor | None = None

    first_execution = ctx.submission in (None, 1) and ctx.restart == 0
    block_start = (time.process_time(), time.thread_time(), time.perf_counter())  # bench flag --progress-ab
    while step < args.steps:
        if first_execution and step == args.hang_at and ctx.rank == args.hang_rank:
            log(event="hang", rank=ctx.rank, step=step)
            while True:  # silent: no progress, no collective; the other ranks wait in the next all-reduce
                time.sleep(3600)
        # agree on the cessation flags: every rank checkpoints (or stops) at the same step
        notice = job.cessation()
        flags = torch.tensor([notice is not None, notice is not None and notice.terminating], dtype=torch.int32)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        warned, terminating = bool(flags[0]), bool(flags[1])
        if (warned and warned_at is None) or terminating:
            if warned_at is None:
                warned_at = step
                log(event="warned", rank=ctx.rank, step=step, signal=notice.name if notice else None)
            why = "sigterm" if terminating else "warning"
            if step != last_saved and ctx.rank == 0:
                save(ckpt_dir, step, model, opt)
                log(event="checkpoint", step=step, why=why)
            last_saved = step
            dist.barrier()
            if terminating:
                log(event="stopped", rank=ctx.rank, step=step)
                return 128 + 15
        x, y = batch(step, ctx.rank)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        opt.step()
        step += 1
        if args.progress_ab is None or progress_in_block((step - 1) // args.progress_ab):
            job.progress(step, total=args.steps, loss=loss.item())
        if step == first + 1:
            log(event="first-step", rank=ctx.rank, step=step, cpu=round(time.process_time(), 3))
        elif ctx.rank == 0:
            log(event="step", step=step)
        if step % args.checkpoint_every == 0 and step < args.steps:
            if ctx.rank == 0:
                save(ckpt_dir, step, model, opt)
                log(event="checkpoint", step=step, why="interval")
            last_saved = step
            dist.barrier()
        if args.step_delay:
            time.sleep(args.step_delay)
        if args.progress_ab and step % args.progress_ab == 0 and ctx.rank == 0:  # bench flag: this block's seconds
            now = (time.process_time(), time.thread_time(), time.perf_counter())
            cpu, thread_cpu, wall = (round(b - a, 6) for a, b in zip(block_start, now, strict=True))
            block = step // args.progress_ab - 1
            log(
                event="block", block=block, progress=progress_in_block(block), cpu=cpu, thread_cpu=thread_cpu, wall=wall
            )
            block_start = now

    if ctx.rank == 0:
        write_params(args.out, model)
        log(
            event="done",
            step=step,
            loss=None if loss is None else loss.item(),
            cpu=round(time.process_time(), 3),
        )
    dist.barrier()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # no destroy_process_group and no interpreter teardown: with gloo either can hang once a peer has exited,
    # and the work is already on disk
    os._exit(code)
