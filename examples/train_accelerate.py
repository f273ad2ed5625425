"""A small, deterministic Hugging Face Accelerate run (``Accelerator``, DDP over gloo on CPU) that survives being
stopped and resumes to the same model, bit for bit: examples/train_ddp.py's run, written the Accelerate way.

Run it under dispatch (any adapter) the way ``torchrun`` or ``accelerate launch`` would have started it, with
``python`` (docs/lightning.md says why not through ``accelerate launch``)::

    dispatch run --nodes 2 -x 'dispatch.SharedCheckpoint={"path": "/shared/ckpt/run1"}' \\
        -x 'dispatch.CessationWarning={"seconds": 30}' -- python examples/train_accelerate.py --out /shared/run1.params

dispatch sets the variables ``accelerate launch`` (through torchrun) would have set on every rank (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``): ``Accelerator(cpu=True)``
reads them and joins the ranks over gloo. The script checks that Accelerate's view is dispatch's
(:func:`dispatch.job.context`) before it trains.

A checkpoint is ``accelerator.save_state`` (model, optimizer, each rank's random states and the step) into
``step-<N>.tmp``, renamed by rank 0 to ``step-<N>`` once every rank has written its part and rank 0 has fsynced
the files: a directory named ``step-<N>`` is whole. The run resumes with ``accelerator.load_state`` from the newest.
As in examples/train_ddp.py, the ranks all-reduce the cessation flags (:mod:`dispatch.job`) each step, so they
checkpoint together on the warning signal (and go on) or on SIGTERM (and exit 143), and the batch of a global step
is a function of (seed, step, rank) only.

Same command line and JSON lines on stdout as examples/train_ddp.py (``event``: start, resumed, first-step, step,
warned, checkpoint, stopped, done), and the final parameters as raw float32 bytes (``--out``, rank 0), so the
tests compare two runs bit for bit.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import shutil
import sys
import time

from dispatch import job

job.ceasing()  # the warning handlers before the heavy imports: an unhandled SIGUSR1 ends a process

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import InitProcessGroupKwargs  # noqa: E402
from torch import nn  # noqa: E402

SEED = 1234
FEATURES = 16
BATCH = 8


def log(**fields: object) -> None:
    print(json.dumps({"t": round(time.time(), 3), **fields}), flush=True)


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of one global step on one rank: a function of (seed, step, rank) alone."""
    g = torch.Generator().manual_seed(SEED * 1_000_003 + step * 1_009 + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    return x, torch.sin(x.sum(dim=1, keepdim=True))


class Step:
    """The global step, saved and restored with the rest of the state (``register_for_checkpointing``)."""

    def __init__(self) -> None:
        self.value = 0

    def state_dict(self) -> dict[str, int]:
        return {"step": self.value}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.value = int(state["step"])


def checkpoints(directory: str) -> list[str]:
    """Complete checkpoints, oldest first (``step-<N>``; a ``.tmp`` directory is one being written)."""
    return sorted(p for p in glob.glob(os.path.join(directory, "step-*")) if not p.endswith(".tmp"))


def save(accelerator: Accelerator, directory: str, step: int) -> str:
    """Collective: every rank writes its part into ``step-<N>.tmp``, rank 0 fsyncs and renames it."""
    path = os.path.join(directory, f"step-{step:08d}")
    tmp = f"{path}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)  # left by a save cut short
    accelerator.wait_for_everyone()
    accelerator.save_state(tmp)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    accelerator.wait_for_everyone()
    return path


def write_params(path: str, model: nn.Module) -> None:
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
    args = p.parse_args(argv)

    ctx = job.context()
    ckpt_dir = args.checkpoint_dir or ctx.checkpoint_dir
    if not ckpt_dir:
        p.error("no checkpoint directory: give --checkpoint-dir or run with dispatch.SharedCheckpoint")
    os.makedirs(ckpt_dir, exist_ok=True)
    log(event="start", rank=ctx.rank, world=ctx.world_size, node=ctx.node, execution=ctx.execution)

    accelerator = Accelerator(
        cpu=True, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=datetime.timedelta(seconds=60))]
    )
    # Accelerate reads MPI's variables too (PMI_RANK, OMPI_COMM_WORLD_RANK): refuse a view that is not dispatch's
    seen = (accelerator.process_index, accelerator.num_processes, accelerator.local_process_index)
    if seen != (ctx.rank, ctx.world_size, ctx.local_rank):
        raise SystemExit(f"Accelerate sees rank, world, local rank {seen}; dispatch gave {ctx.rank, ctx.world_size}")
    torch.set_num_threads(1)  # after the Accelerator, which sets its own count from the cores
    torch.use_deterministic_algorithms(True)

    torch.manual_seed(SEED)
    model = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model, opt = accelerator.prepare(model, opt)
    step = Step()
    accelerator.register_for_checkpointing(step)
    found = checkpoints(ckpt_dir)
    if found:
        accelerator.load_state(found[-1])
        log(event="resumed", rank=ctx.rank, step=step.value, checkpoint=os.path.basename(found[-1]))
    last_saved = first = step.value
    warned_at: int | None = None
    loss: torch.Tensor | None = None

    while step.value < args.steps:
        # agree on the cessation flags: every rank checkpoints (or stops) at the same step
        notice = job.cessation()
        flags = torch.tensor([notice is not None, notice is not None and notice.terminating], dtype=torch.int32)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        warned, terminating = bool(flags[0]), bool(flags[1])
        if (warned and warned_at is None) or terminating:
            if warned_at is None:
                warned_at = step.value
                log(event="warned", rank=ctx.rank, step=step.value, signal=notice.name if notice else None)
            if step.value != last_saved:
                save(accelerator, ckpt_dir, step.value)
                if accelerator.is_main_process:
                    log(event="checkpoint", step=step.value, why="sigterm" if terminating else "warning")
            last_saved = step.value
            if terminating:
                log(event="stopped", rank=ctx.rank, step=step.value)
                return 128 + 15
        x, y = batch(step.value, ctx.rank)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        opt.step()
        step.value += 1
        job.progress(step.value, total=args.steps, loss=loss.item())
        if step.value == first + 1:
            log(event="first-step", rank=ctx.rank, step=step.value, cpu=round(time.process_time(), 3))
        elif accelerator.is_main_process:
            log(event="step", step=step.value)
        if step.value % args.checkpoint_every == 0 and step.value < args.steps:
            save(accelerator, ckpt_dir, step.value)
            if accelerator.is_main_process:
                log(event="checkpoint", step=step.value, why="interval")
            last_saved = step.value
        if args.step_delay:
            time.sleep(args.step_delay)

    if accelerator.is_main_process:
        write_params(args.out, accelerator.unwrap_model(model))
        log(
            event="done", step=step.value, loss=None if loss is None else loss.item(), cpu=round(time.process_time(), 3)
        )
    accelerator.wait_for_everyone()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no destroy_process_group, no interpreter teardown: with gloo either can hang once a peer exited
