"""PyTorch Lightning under dispatch: the ranks dispatch gives, signals owned by :mod:`dispatch.job`, and checkpoints
a resubmitted run resumes from (docs/lightning.md).

Left alone inside a Slurm allocation, Lightning picks its ``SLURMEnvironment`` (it reads ``SLURM_PROCID`` and
friends, not the ranks dispatch sets on every adapter) and, with its default ``auto_requeue``, answers SIGUSR1 by
checkpointing and running ``scontrol requeue`` itself: a second owner of resubmission beside the supervisor's
rules, which would requeue a job the rules meant to end, and on another adapter finds no ``scontrol`` at all.
Lightning also installs a SIGTERM handler that runs a collective (a broadcast) inside the signal handler.

* :func:`environment` is a Lightning ``ClusterEnvironment`` that reads rank, world size, local rank, node rank
  and the rendezvous address from :func:`dispatch.job.context`. Given in ``Trainer(plugins=[...])`` it replaces
  the detected environment, and with it the auto-requeue (Lightning installs its requeue handler only for a
  ``SLURMEnvironment``). It never starts processes (dispatch started every rank) and refuses a Trainer whose
  ``num_nodes * devices`` is not the job's world size.
* :func:`checkpoints` is a Lightning ``Callback`` that checkpoints every ``every`` steps into the job's
  checkpoint directory (``dispatch.SharedCheckpoint``), each one written under a temporary name, fsynced and
  renamed (``step-<N>.ckpt``: a reader sees a whole checkpoint or none). After each step the ranks all-reduce
  :func:`dispatch.job.cessation`, so they act at the same step: on the warning signal they checkpoint and go on; on
  SIGTERM they checkpoint and the process ends with 143 (128 + SIGTERM), leaving the cause to the scheduler and
  the resubmission to the supervisor's rules. It takes SIGTERM and the warning signal back from Lightning when
  training starts (at its teardown Lightning restores the handlers it found), and reports progress
  (:func:`dispatch.job.progress`).
* :func:`latest_checkpoint` is the newest complete checkpoint, for ``trainer.fit(..., ckpt_path=...)``.

Only the ``lightning`` package (``lightning.pytorch``) is supported, not the older standalone
``pytorch_lightning``, whose classes are other classes.
"""

from __future__ import annotations

import functools
import glob
import importlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from dispatch import job

__all__ = ["checkpoints", "environment", "latest_checkpoint"]

EXIT_TERMINATED = 128 + int(signal.SIGTERM)
"""The code a rank ends with after checkpointing on SIGTERM, as a process killed by it would report."""
Report = Callable[..., None]
"""``report(event, **fields)``: called by the callback on ``resumed``, ``warned``, ``checkpoint`` and ``stopped``."""


def latest_checkpoint(directory: str) -> str | None:
    """The newest complete checkpoint in ``directory`` (``step-<N>.ckpt``, the highest N), or ``None``. Temporary
    files never match: a checkpoint gets its name only when it is whole."""
    found = sorted(glob.glob(os.path.join(directory, "step-*.ckpt")))
    return found[-1] if found else None


def environment() -> Any:
    """A ``lightning.fabric.plugins.environments.ClusterEnvironment`` whose ranks are dispatch's
    (:func:`dispatch.job.context`). Pass it in ``Trainer(plugins=[environment()])``."""
    return _classes()[0]()


def checkpoints(directory: str | None = None, *, every: int = 100, report: Report | None = None) -> Any:
    """A ``lightning.pytorch.Callback``: a checkpoint every ``every`` optimizer steps (and on the cessation
    warning, and on SIGTERM before the process ends with 143) in ``directory`` (default: the job's
    ``DISPATCH_CHECKPOINT_DIR``), and progress reports. ValueError without a directory."""
    directory = directory or job.context().checkpoint_dir
    if not directory:
        raise ValueError("no checkpoint directory: pass one or run the job with dispatch.SharedCheckpoint")
    if every < 1:
        raise ValueError(f"every must be at least 1, not {every}")
    return _classes()[1](directory, every, report)


def _save(trainer: Any, directory: str, step: int) -> str:
    """Every rank calls this (Lightning's save is collective: rank 0 writes, all wait); rank 0 then fsyncs and
    renames the file, and the ranks wait for the name."""
    path = os.path.join(directory, f"step-{step:08d}.ckpt")
    tmp = f"{path}.tmp"  # one name for every rank: Lightning writes from rank 0 only
    trainer.save_checkpoint(tmp)
    if trainer.is_global_zero:
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    trainer.strategy.barrier("dispatch checkpoint")
    return path


@functools.cache
def _classes() -> tuple[type, type]:
    """The environment and callback classes, defined on first use (importing Lightning then, not before)."""
    base_environment: Any = importlib.import_module("lightning.fabric.plugins.environments").LightningEnvironment
    base_callback: Any = importlib.import_module("lightning.pytorch").Callback
    torch = importlib.import_module("torch")
    dist = importlib.import_module("torch.distributed")

    class DispatchEnvironment(base_environment):  # type: ignore[misc]
        """Lightning's view of the job, read from dispatch's context; never detected, always given."""

        def __init__(self) -> None:
            super().__init__()
            self.ctx = job.context()

        @property
        def creates_processes_externally(self) -> bool:
            return True

        @property
        def main_address(self) -> str:
            return self.ctx.master_addr

        @property
        def main_port(self) -> int:
            return self.ctx.master_port

        @staticmethod
        def detect() -> bool:
            return False

        def world_size(self) -> int:
            return self.ctx.world_size

        def set_world_size(self, size: int) -> None:
            if size != self.ctx.world_size:
                raise ValueError(
                    f"the Trainer's num_nodes * devices is {size}, the job's world size {self.ctx.world_size}: "
                    "give Trainer(num_nodes=<the job's nodes>, devices=<its processes per node>)"
                )

        def global_rank(self) -> int:
            return self.ctx.rank

        def set_global_rank(self, rank: int) -> None:
            if rank != self.ctx.rank:
                raise ValueError(f"Lightning computed rank {rank}, dispatch gave this process rank {self.ctx.rank}")
            super().set_global_rank(rank)  # Lightning's rank_zero_only follows it

        def local_rank(self) -> int:
            return self.ctx.local_rank

        def node_rank(self) -> int:
            return self.ctx.node_rank

        def validate_settings(self, num_devices: int, num_nodes: int) -> None:
            self.set_world_size(num_devices * num_nodes)

        def teardown(self) -> None:
            pass  # LightningEnvironment's removes WORLD_SIZE, which dispatch set and a later phase may read

    class DispatchCheckpoints(base_callback):  # type: ignore[misc]
        """See :func:`checkpoints`."""

        def __init__(self, directory: str, every: int, report: Report | None) -> None:
            self.directory = directory
            self.every = every
            self.report = report or (lambda event, **fields: None)
            self.handlers: dict[int, Any] = {}
            self.last_saved = -1
            self.warned = False

        def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
            os.makedirs(self.directory, exist_ok=True)
            job.ceasing()  # dispatch's handlers, before Lightning registers its own over them
            ctx = job.context()
            signals = [signal.SIGTERM]
            if ctx.warning_signal:
                signals.append(signal.Signals["SIG" + ctx.warning_signal.removeprefix("SIG")])
            self.handlers = {int(s): signal.getsignal(s) for s in signals}

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            for sig, handler in self.handlers.items():  # take them back: the warning and SIGTERM are dispatch's
                signal.signal(sig, handler)
            self.last_saved = trainer.global_step
            if trainer.ckpt_path:
                self.report("resumed", step=trainer.global_step, checkpoint=os.path.basename(trainer.ckpt_path))

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            step = trainer.global_step
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            metrics = {"loss": float(loss.item())} if loss is not None and hasattr(loss, "item") else {}
            job.progress(step, total=trainer.max_steps if trainer.max_steps > 0 else None, **metrics)
            last = trainer.max_steps > 0 and step >= trainer.max_steps
            if step % self.every == 0 and not last and step != self.last_saved:
                _save(trainer, self.directory, step)
                self.last_saved = step
                self.report("checkpoint", step=step, why="interval")
            # every rank acts on the cessation at the same step
            notice = job.cessation()
            flags = torch.tensor([notice is not None, notice is not None and notice.terminating], dtype=torch.int32)
            if dist.is_available() and dist.is_initialized():
                dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            warned, terminating = bool(flags[0]), bool(flags[1])
            if not ((warned and not self.warned) or terminating) or last:
                return
            if not self.warned:
                self.warned = True
                self.report("warned", step=step, signal=notice.name if notice else None)
            if step != self.last_saved:
                _save(trainer, self.directory, step)
                self.last_saved = step
                self.report("checkpoint", step=step, why="sigterm" if terminating else "warning")
            if terminating:
                self.report("stopped", step=step)
                sys.stdout.flush()
                sys.stderr.flush()
                # no teardown: with gloo it can hang once a peer has gone, and the checkpoint is on disk
                os._exit(EXIT_TERMINATED)

    return DispatchEnvironment, DispatchCheckpoints
