"""A small, deterministic PyTorch Lightning ``Trainer`` run (DDP over gloo on CPU) that survives being stopped and
resumes to the same model, bit for bit: examples/train_ddp.py's run, written the Lightning way.

Run it under dispatch (any adapter) with a shared checkpoint directory and a cessation warning::

    dispatch run --nodes 2 -x 'dispatch.SharedCheckpoint={"path": "/shared/ckpt/run1"}' \\
        -x 'dispatch.CessationWarning={"seconds": 30}' -- python examples/train_lightning.py --out /shared/run1.params

What dispatch changes in a Lightning script (docs/lightning.md): two objects given to the ``Trainer`` from
:mod:`dispatch.integrations.lightning`. ``environment()`` makes Lightning use the ranks dispatch gives and no
Slurm auto-requeue (the supervisor's rules own resubmission); ``checkpoints()`` writes atomic checkpoints every
``--checkpoint-every`` steps into the job's checkpoint directory, and on the warning signal or SIGTERM at a step all
ranks agree on. ``trainer.fit(ckpt_path=latest_checkpoint(...))`` resumes from the newest.

What makes the result identical whatever interrupts it: the model, its initialisation and the optimizer are
seeded; torch runs deterministic kernels on one thread; the batch of a global step is a function of (seed, step,
rank) only, and the data stream starts at the step the run resumes from (a stream that restarted at its beginning
would feed a resumed run the batches of the steps it had already done).

Same command line and JSON lines on stdout as examples/train_ddp.py (``event``: start, resumed, first-step, step,
warned, checkpoint, stopped, done), and the final parameters as raw float32 bytes (``--out``, rank 0), so the
tests compare two runs bit for bit.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Iterator

from dispatch import job

job.ceasing()  # the warning handlers before the heavy imports: an unhandled SIGUSR1 ends a process

import lightning as L  # noqa: E402
import torch  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, IterableDataset  # noqa: E402

from dispatch.integrations import lightning as dispatch_lightning  # noqa: E402

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


class Steps(IterableDataset):  # type: ignore[type-arg]
    """The batches of steps ``start``, ``start + 1``, ... for one rank."""

    def __init__(self, start: int, rank: int) -> None:
        self.start, self.rank = start, rank

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        step = self.start
        while True:
            yield batch(step, self.rank)
            step += 1


class Regression(L.LightningModule):
    def __init__(self, step_delay: float) -> None:
        super().__init__()
        torch.manual_seed(SEED)
        self.net = nn.Sequential(nn.Linear(FEATURES, 32), nn.Tanh(), nn.Linear(32, 1))
        self.step_delay = step_delay
        self.first: int | None = None

    def train_dataloader(self) -> DataLoader:  # type: ignore[type-arg]
        # called after a checkpoint is restored: global_step is the step this run starts at
        return DataLoader(Steps(self.trainer.global_step, self.global_rank), batch_size=None)

    def training_step(self, data: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = data
        return nn.functional.mse_loss(self.net(x), y)

    def on_train_batch_end(self, outputs: object, data: object, batch_idx: int) -> None:
        step = self.trainer.global_step
        if self.first is None:
            self.first = step
            log(event="first-step", rank=self.global_rank, step=step, cpu=round(time.process_time(), 3))
        elif self.global_rank == 0:
            log(event="step", step=step)
        if self.step_delay:
            time.sleep(self.step_delay)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


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
    torch.set_num_threads(1)
    log(event="start", rank=ctx.rank, world=ctx.world_size, node=ctx.node, execution=ctx.execution)

    def report(event: str, **fields: object) -> None:
        if event in ("resumed", "warned", "stopped") or ctx.rank == 0:
            log(event=event, rank=ctx.rank, **fields)

    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=per_node,
        num_nodes=ctx.world_size // per_node,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=datetime.timedelta(seconds=60)),
        plugins=[dispatch_lightning.environment()],
        callbacks=[dispatch_lightning.checkpoints(ckpt_dir, every=args.checkpoint_every, report=report)],
        max_steps=args.steps,
        deterministic=True,
        use_distributed_sampler=False,
        enable_checkpointing=False,  # dispatch_lightning.checkpoints() does it
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    model = Regression(args.step_delay)
    trainer.fit(model, ckpt_path=dispatch_lightning.latest_checkpoint(ckpt_dir))
    if trainer.is_global_zero:
        write_params(args.out, model.net)
        log(event="done", step=trainer.global_step, cpu=round(time.process_time(), 3))
    trainer.strategy.barrier("done")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: with gloo it can hang once a peer has exited
