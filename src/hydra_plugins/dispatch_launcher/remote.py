"""What each job of the sweep runs on the cluster: :class:`SweepJob`, called by dispatch's executor runner.

The launcher pickles one :class:`SweepJob` (the task function, Hydra's context and config, and the state of
Hydra's singletons, as the launcher saw them) with each job's overrides and number. On the cluster it composes the
job's config from them and runs Hydra's ``run_job``, so the task sees exactly what the basic launcher would show
it (``hydra.job.num``, ``hydra.sweep.dir``/``subdir``, the job's logging) and ``hydra.job.id`` is the dispatch
job id (:func:`dispatch.job.run_id`, the same in every execution of the job).

A task that returns gives the launcher its ``JobReturn``. A task that raises ends the job failed (exit 1: the
job's rules and ``dispatch status`` see it) and sends the ``JobReturn`` back inside :class:`TaskFailed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict


class TaskFailed(Exception):
    """The task function raised. ``job_return`` is the job's ``JobReturn`` (status FAILED, the exception as its
    return value); the exception is this one's ``__cause__`` on the cluster, so the job's log shows its traceback."""

    def __init__(self, job_return: JobReturn) -> None:
        super().__init__(job_return)
        self.job_return = job_return

    def __str__(self) -> str:
        exc = self.job_return._return_value
        return f"the task raised {type(exc).__name__}: {exc}"


class SweepJob:
    """A callable run once per job of the sweep (every rank calls it; rank 0's answer is the job's)."""

    def __init__(
        self, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig, singletons: Any
    ) -> None:
        self.hydra_context = hydra_context
        self.task_function = task_function
        self.config = config
        self.singletons = singletons

    def __call__(self, overrides: Sequence[str], job_num: int) -> JobReturn:
        """Compose the config of the job numbered ``job_num`` from ``overrides`` and run the task on it. Returns
        the ``JobReturn``; raises :class:`TaskFailed` when the task raised."""
        Singleton.set_state(self.singletons)
        setup_globals()
        sweep_config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(sweep_config.hydra.job):
            sweep_config.hydra.job.id = _job_id(job_num)
            sweep_config.hydra.job.num = job_num
        ret = run_job(
            hydra_context=self.hydra_context,
            task_function=self.task_function,
            config=sweep_config,
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
        if ret.status is JobStatus.FAILED:
            raise TaskFailed(ret) from ret._return_value
        return ret


def _job_id(job_num: int) -> str:
    """The dispatch job id inside a dispatch job; the job number elsewhere (a SweepJob called by hand)."""
    from dispatch.job import NotInJob, run_id

    try:
        return run_id()
    except NotInJob:
        return str(job_num)
