"""The launcher: a Hydra multirun's batch of jobs as ONE batched submission to a dispatch cluster.

:meth:`DispatchLauncher.launch` opens the cluster the way the ``dispatch`` command does (its config file and
record store, so the jobs are listed by ``dispatch status``), submits one job per set of overrides through
:meth:`dispatch.Executor.submit_many` (a job array on Slurm), each job named ``<name>[<job number>]
<overrides>`` and carrying the launcher's shape, resources, time limit and rules, then waits for them: the
executor's in-process supervisor applies the rules (resubmission, requeue) as ``dispatch run`` would. Each job
runs :class:`~hydra_plugins.dispatch_launcher.remote.SweepJob` on the cluster.

It returns one ``JobReturn`` per job, in order: the task's own (its return value) when the task returned, the
task's exception when it raised (its ``__cause__`` the traceback on the cluster), and for a job that ended
without an answer (killed, out of memory, out of time, cancelled) a FAILED ``JobReturn`` whose return value is
the executor's error (:class:`dispatch.executor.CallFailed`: the job's final record). Hydra's sweeper then raises
the first failure's exception, as it does with its basic launcher.

A value of the launcher's config that cannot be used raises :class:`LauncherError` (one line naming the key)
before anything is submitted; so does a sweep the cluster refuses as a whole. Interrupting the launcher (Ctrl-C)
stops the sweep's jobs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import signal
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

# Through the module, never ``from ... import``: Hydra's plugin scan runs each module of the namespace again in
# its module object, so a class imported by name before the scan is not the one results are unpickled as.
from hydra_plugins.dispatch_launcher import remote

if TYPE_CHECKING:
    from dispatch.cli.app import App
    from dispatch.cluster import Cluster
    from dispatch.executor import CallFuture

log = logging.getLogger(__name__)

MAX_NAME = 128
"""The longest job name a JobSpec takes."""


class LauncherError(CompactHydraException):
    """The launcher's config or the cluster refused the sweep; nothing was submitted. Hydra prints the message
    alone: ``hydra.launcher.KEY: what is wrong``."""


class DispatchLauncher(Launcher):
    """``hydra/launcher=dispatch`` (see the module docstring; the keys are those of
    :class:`~hydra_plugins.dispatch_launcher.config.DispatchLauncherConf`)."""

    def __init__(
        self,
        cluster: str | None = None,
        config: str | None = None,
        nodes: int = 1,
        procs_per_node: int = 1,
        time_limit: str | None = None,
        rules: Any = None,
        resources: Any = None,
        env: Any = None,
        python: str | None = None,
        working_dir: str | None = None,
        name: str = "",
        poll: float = 0.25,
    ) -> None:
        self.cluster = cluster
        self.config_file = config
        self.nodes = nodes
        self.procs_per_node = procs_per_node
        self.time_limit = time_limit
        self.rules = _plain(rules)
        self.resources = _plain(resources) or {}
        self.env = _plain(env) or {}
        self.python = python
        self.working_dir = working_dir
        self.name = name or "hydra"
        self.poll = poll
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Run the batch ``job_overrides`` (job numbers from ``initial_job_idx``) on the cluster; one
        ``JobReturn`` per job, in order (see the module docstring)."""
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        options = self.executor_options()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        numbers = [initial_job_idx + i for i in range(len(job_overrides))]
        names = [job_name(self.name, n, o) for n, o in zip(numbers, job_overrides, strict=True)]
        job = remote.SweepJob(self.hydra_context, self.task_function, self.config, Singleton.get_state())
        app = self.dispatch_app()
        try:
            futures = self.submit(self.open_cluster(app), options, job, job_overrides, numbers, names)
            return [job_return(f, o) for f, o in zip(futures, job_overrides, strict=True)]
        finally:
            app.close()

    def submit(
        self,
        cluster: Cluster,
        options: Mapping[str, Any],
        job: remote.SweepJob,
        job_overrides: Sequence[Sequence[str]],
        numbers: Sequence[int],
        names: Sequence[str],
    ) -> list[CallFuture]:
        """Submit the batch, log one line per job, and wait until every job is over; Ctrl-C stops them."""
        from dispatch import Executor
        from dispatch.errors import DispatchError, SpecError

        try:
            executor = Executor(cluster, **options)
        except SpecError as exc:  # a value the job spec refuses (nodes over the limit, an env name)
            raise LauncherError(f"{launcher_key(exc.path)}: {exc.message}") from None
        except (DispatchError, ValueError) as exc:
            raise LauncherError(f"hydra.launcher.cluster: cannot run the sweep on {cluster.name}: {exc}") from None
        try:
            try:
                futures = executor.submit_many(job, [list(o) for o in job_overrides], numbers, names=names)
            except DispatchError as exc:
                raise LauncherError(f"the sweep was not submitted to {cluster.name}: {exc}") from None
            log.info(f"Launched {len(futures)} jobs on dispatch cluster {cluster.name} in one batched submission")
            for n, future, overrides in zip(numbers, futures, job_overrides, strict=True):
                log.info(f"\t#{n} {future.job_id}: {' '.join(filter_overrides(overrides))}")
            with _interruptible():
                executor.shutdown(wait=True)
        except BaseException:
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        for n, future in zip(numbers, futures, strict=True):
            log.info(f"\t#{n} {future.job_id}: {outcome(future)}")
        return futures

    def dispatch_app(self) -> App:
        """What the ``dispatch`` command would use: its config file (``config``, else ``$DISPATCH_CONFIG``) and
        cluster (``cluster``, else ``$DISPATCH_CLUSTER``), opened on first use; the caller closes it."""
        from dispatch.cli.app import App

        return App(
            config_path=self.config_file or os.environ.get("DISPATCH_CONFIG") or None,
            cluster_name=self.cluster or os.environ.get("DISPATCH_CLUSTER") or None,
        )

    def open_cluster(self, app: App) -> Cluster:
        """The cluster as ``dispatch --cluster`` opens it, with the records ``dispatch status`` reads;
        LauncherError naming the key when it cannot be opened."""
        from dispatch.errors import DispatchError

        try:
            return app.cluster()
        except DispatchError as exc:
            key = "config" if getattr(exc, "path", None) == "config" else "cluster"
            raise LauncherError(f"hydra.launcher.{key}: {getattr(exc, 'message', exc)}") from None

    def executor_options(self) -> dict[str, Any]:
        """The :class:`dispatch.Executor` keywords from the launcher's config; LauncherError naming the key of
        the first value that cannot be used."""
        from dispatch.errors import ConfigError, SpecError
        from dispatch.resources import Resources
        from dispatch.rules import RuleSet
        from dispatch.settings import parse_duration

        options: dict[str, Any] = {"poll": self.poll, "python": self.python, "working_dir": self.working_dir}
        key = ""
        try:
            key = "poll"
            if isinstance(self.poll, bool) or not isinstance(self.poll, int | float) or not 0 < self.poll < math.inf:
                raise ConfigError("", f"must be a positive number of seconds, got {self.poll!r}")
            for key, value in (("nodes", self.nodes), ("procs_per_node", self.procs_per_node)):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ConfigError("", f"must be a whole number from 1, got {value!r}")
                options[key] = value
            key = "time_limit"
            if self.time_limit is not None:
                text = str(self.time_limit).strip()
                seconds = parse_duration(float(text) if _is_number(text) else text)
                if not seconds > 0:
                    raise ConfigError("", f"must be a positive duration, got {self.time_limit!r}")
                options["time_limit"] = seconds
            key = "rules"
            if isinstance(self.rules, str):
                options["rules"] = RuleSet.load(self.rules)
            elif self.rules is not None:
                options["rules"] = RuleSet.from_data(self.rules)
            key = "resources"
            unknown = sorted(set(self.resources) - {f.name for f in fields(Resources)})
            if unknown:
                raise ConfigError("", f"unknown key {unknown[0]!r}")
            options["resources"] = Resources(**self.resources)
            key = "env"
            options["env"] = {str(k): str(v) for k, v in self.env.items()}
            key = "working_dir"
            if self.working_dir is not None and not os.path.isabs(self.working_dir):
                raise ConfigError("", f"must be an absolute path, got {self.working_dir!r}")
        except SpecError as exc:  # its path names the field as a JobSpec does: resources.gpusPerNode
            raise LauncherError(f"{launcher_key(exc.path)}: {exc.message}") from None
        except ConfigError as exc:
            where = f"hydra.launcher.{key}" + (f".{exc.path}" if exc.path else "")
            raise LauncherError(f"{where}: {exc.message}") from None
        return options


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt inside the block, also in a process started with SIGINT ignored (a script's
    background job, where Python installs no handler of its own): the sweep's wait is where a user stops it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def launcher_key(spec_path: str) -> str:
    """The launcher's key for a JobSpec field path: ``procsPerNode`` is ``hydra.launcher.procs_per_node``,
    ``resources.gpusPerNode`` is ``hydra.launcher.resources.gpus_per_node``, ``env.MY_VAR`` stays as it is."""
    parts = spec_path.split(".")
    keep = 2 if parts[0] == "resources" else 1
    snake = [re.sub(r"(?<!^)(?=[A-Z])", "_", p).lower() for p in parts[:keep]]
    return ".".join(["hydra.launcher", *snake, *parts[keep:]])


def job_name(prefix: str, number: int, overrides: Sequence[str]) -> str:
    """``<prefix>[<number>] <overrides>`` (Hydra's own ``hydra.*`` overrides left out), printable, at most
    128 characters: the job's name in ``dispatch status``."""
    text = f"{prefix}[{number}] {' '.join(filter_overrides(overrides))}".strip()
    return "".join(c if c.isprintable() else "?" for c in text)[:MAX_NAME]


def job_return(future: CallFuture, overrides: Sequence[str]) -> JobReturn:
    """The ``JobReturn`` of a job that is over (see the module docstring)."""
    try:
        ret = future.result()
    except remote.TaskFailed as failed:
        ret = failed.job_return
        exc = ret._return_value
        if isinstance(exc, BaseException) and failed.__cause__ is not None:
            exc.__cause__ = failed.__cause__  # the traceback on the cluster
        return ret
    except Exception as exc:  # the job ended without an answer, or the answer could not be read
        return JobReturn(overrides=list(overrides), status=JobStatus.FAILED, _return_value=exc)
    assert isinstance(ret, JobReturn), f"job {future.job_id} answered {type(ret).__name__}, not a JobReturn"
    return ret


def outcome(future: CallFuture) -> str:
    """One line for the log: how the job's task ended, and what it returned or raised (shortened)."""
    if future.cancelled():
        return "cancelled"
    exc = future.exception()
    if isinstance(exc, remote.TaskFailed):
        return f"FAILED: {exc}"[:200]
    if exc is not None:
        return f"FAILED: {type(exc).__name__}: {exc}"[:200]
    return f"COMPLETED: {future.result()._return_value!r}"[:200]


def _plain(value: Any) -> Any:
    """A config node as plain Python (dicts and lists), other values as they are."""
    if isinstance(value, DictConfig) or OmegaConf.is_list(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
