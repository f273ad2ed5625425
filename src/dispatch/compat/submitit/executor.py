"""submitit's ``AutoExecutor`` over :class:`dispatch.Executor`: submitit's calls and parameter names, dispatch's
jobs (recorded, supervised by rules, batched into job arrays).

Which cluster: ``cluster`` names a cluster of the dispatch configuration (``$XDG_CONFIG_HOME/dispatch/
config.toml``, as every ``dispatch`` command reads it; without a file the one cluster is ``local``), None its
default, and the jobs are recorded in the record store that configuration names, so ``dispatch status`` lists
them. A :class:`dispatch.Cluster` is taken as it is. The cluster's adapter name is the submitit executor name
its prefixed parameters are read for (``slurm_partition`` on a ``slurm`` cluster).

Rules each job gets (submitit's requeue behaviour, carried by dispatch's fenced resubmission): a preempted job
is resubmitted, every time; a job that reached its time limit is resubmitted up to ``max_num_timeout`` times
(default 3) when its callable has a ``checkpoint`` method (:class:`~dispatch.compat.submitit.helpers.
Checkpointable`), and not otherwise; any other ending closes the job as it ended.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dispatch.compat.submitit.helpers import DelayedSubmission
from dispatch.compat.submitit.job import Job
from dispatch.compat.submitit.parameters import EXECUTORS, Request, later_wins, request_of
from dispatch.errors import ConfigError, Unsupported

if TYPE_CHECKING:
    from dispatch.cluster import Cluster
    from dispatch.executor import Executor

R = TypeVar("R")

DEFAULT_MAX_NUM_TIMEOUT = 3
"""submitit's resubmissions after a time limit, for a Checkpointable."""

_CONSTRUCTOR = ("max_num_timeout", "python", "max_pickle_size_gb")
"""What submitit's executors take when made (``slurm_python`` to AutoExecutor): the executor's, by name."""


def rules_for(checkpointable: bool, max_num_timeout: int) -> dict[str, Any]:
    """The rules of one call's job (see the module docstring)."""
    rules: list[dict[str, Any]] = [{"name": "submitit-preempted", "cause": ["preempted"], "action": "resubmit"}]
    if checkpointable and max_num_timeout > 0:
        rules.append({"name": "submitit-timeout", "cause": ["timeout"], "action": "resubmit", "limit": max_num_timeout})
    return {"unmatched": "close", "rules": rules}


def open_cluster(cluster: str | Cluster | None) -> Cluster:
    """The cluster ``cluster`` names in the dispatch configuration (None: its default), with the record store
    that configuration names; ConfigError naming the known clusters for an unknown name."""
    import dispatch
    from dispatch.cli.config import load, open_records

    if isinstance(cluster, dispatch.Cluster):
        return cluster
    config = load(None)
    if cluster == "debug" and "debug" not in config.clusters:
        raise ConfigError(
            "cluster", "submitit's debug executor runs jobs in this process: dispatch has none; use 'local'"
        )
    chosen = config.cluster(cluster)
    options = dispatch.Config(adapter=chosen.settings, records=open_records(config.records), name=chosen.name)
    return dispatch.open(chosen.adapter, options)


class AutoExecutor:
    """submitit's executor: ``update_parameters`` with submitit's names, then ``submit``, ``map_array``,
    ``submit_array`` and ``batch()``, each call a :class:`~dispatch.compat.submitit.job.Job`.

    ``folder`` is kept (``executor.folder``) and nothing is written there: calls travel through the cluster's
    shared storage and the output stays where the adapter keeps it (``job.stdout()``, ``dispatch logs``).
    Keyword arguments are what submitit's executors take when made, prefixed by the executor
    (``slurm_max_num_timeout``, ``slurm_python``: an interpreter path, not a shell command); ConfigError names
    any other, and ``*_max_pickle_size_gb``, which dispatch does not carry. ``executor.executor`` is the
    :class:`dispatch.Executor` underneath.
    """

    def __init__(self, folder: str | os.PathLike[str], cluster: str | Cluster | None = None, **kwargs: Any) -> None:
        from dispatch.executor import Executor

        self.folder = Path(folder).expanduser().absolute()
        self._cluster = open_cluster(cluster)
        self.cluster = self._cluster.name
        self._kind = self._cluster.backend.name
        """The submitit executor whose prefixed parameters apply here: the cluster's adapter name."""
        max_num_timeout = DEFAULT_MAX_NUM_TIMEOUT
        python: str | None = None
        for key, value in kwargs.items():
            prefix, _, rest = key.partition("_")
            if key in _CONSTRUCTOR:  # submitit's old unprefixed spelling (deprecated there)
                prefix, rest = self._kind, key
            elif prefix not in EXECUTORS or rest not in _CONSTRUCTOR:
                raise ConfigError(
                    key, f"is no argument of submitit's executors (they take {', '.join(_CONSTRUCTOR)}, prefixed)"
                )
            if rest == "max_pickle_size_gb":
                raise ConfigError(key, "is not carried by dispatch: no call is capped (a result is: max_result_bytes)")
            if prefix != self._kind or value is None:
                continue  # another executor's, as in submitit
            if rest == "max_num_timeout":
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise ConfigError(key, f"must be a whole number of at least 0, not {value!r}")
                max_num_timeout = value
            elif not isinstance(value, str) or not value or any(c.isspace() for c in value):
                raise ConfigError(key, f"must be an interpreter's path (dispatch runs no shell command): {value!r}")
            else:
                python = value
        self._max_num_timeout = max_num_timeout
        self._parameters: dict[str, Any] = {}
        self._request = request_of({}, self._kind)
        self._executor: Executor = Executor(self._cluster, python=python)
        self._batch: list[Job[Any]] | None = None

    @staticmethod
    def which() -> str:
        """The cluster ``AutoExecutor(folder)`` uses: the dispatch configuration's default."""
        from dispatch.cli.config import load

        return load(None).default

    @property
    def executor(self) -> Executor:
        """The :class:`dispatch.Executor` the calls go through."""
        return self._executor

    @property
    def parameters(self) -> dict[str, Any]:
        """The parameters given so far, by the names they were given with."""
        return dict(self._parameters)

    def update_parameters(self, **kwargs: Any) -> None:
        """Set parameters by submitit's names (:mod:`dispatch.compat.submitit.parameters`). All are checked
        before any is kept: ConfigError naming the first that is unknown, of the wrong type or not carried.
        Parameters for another executor than this cluster's are checked, kept, and warned about once (they do
        not apply here, as in submitit). RuntimeError inside ``batch()``, as in submitit."""
        if self._batch is not None:
            raise RuntimeError('Changing parameters within batch context "with executor.batch():" is not allowed')
        merged = later_wins(self._parameters, kwargs)
        request = request_of(merged, self._kind)
        request.extensions()  # ConfigError now for a placement slurm.Placement refuses
        new_elsewhere = sorted(set(request.elsewhere) - set(self._request.elsewhere))
        self._parameters, self._request = merged, request
        if new_elsewhere:
            warnings.warn(
                f"{', '.join(new_elsewhere)}: for another submitit executor than this cluster's ({self._kind}),"
                " so not used here",
                UserWarning,
                stacklevel=2,
            )

    # ----- submitting ---------------------------------------------------------------------------------------

    def _view(self, fn: Callable[..., Any]) -> Executor:
        """The executor with this request's shape, and the rules for ``fn``."""
        r: Request = self._request
        return self._executor.with_options(
            nodes=r.nodes,
            procs_per_node=r.tasks_per_node,
            resources=r.resources,
            time_limit=r.time_limit,
            setup=r.setup,
            name=r.name,
            extensions=r.extensions(),
            rules=rules_for(callable(getattr(fn, "checkpoint", None)), self._max_num_timeout),
            all_ranks=r.world_size > 1,
        )

    def submit(self, fn: Callable[..., R], *args: Any, **kwargs: Any) -> Job[R]:
        """Submit ``fn(*args, **kwargs)`` as one job (inside ``batch()``: with the batch, when it ends)."""
        future = self._view(fn).submit(fn, *args, **kwargs)
        job: Job[R] = Job(future, DelayedSubmission(fn, *args, **kwargs), self._request.world_size)
        if self._batch is not None:
            self._batch.append(job)
        return job

    def map_array(self, fn: Callable[..., R], *iterable: Iterable[Any]) -> list[Job[R]]:
        """``fn`` over the zipped items, as ONE batched submission (one job array on Slurm); one job each."""
        items = list(zip(*iterable, strict=False))
        return self._submit_all([(fn, item) for item in items])

    def submit_array(self, fns: Sequence[Callable[[], R]]) -> list[Job[R]]:
        """Each callable (no arguments) as a job, in ONE batched submission."""
        return self._submit_all([(fn, ()) for fn in fns])

    def _submit_all(self, calls: Sequence[tuple[Callable[..., R], tuple[Any, ...]]]) -> list[Job[R]]:
        if not calls:
            warnings.warn("Received an empty job array", UserWarning, stacklevel=3)
            return []
        if self._batch is not None:
            return [self.submit(fn, *args) for fn, args in calls]
        with self.batch():
            jobs = [self.submit(fn, *args) for fn, args in calls]
        return jobs

    @contextlib.contextmanager
    def batch(self, allow_implicit_submissions: bool = False) -> Iterator[None]:
        """The submissions inside go out together when the block ends, as ONE batched submission
        (:meth:`dispatch.Executor.batch`: one job array on Slurm). An exception leaving the block submits
        nothing. ``slurm_array_parallelism`` is carried as the batch's ``max_running``: on Slurm the array's
        throttle ``%K``; a ConfigError naming it when the cluster cannot cap a batch (the BatchThrottle
        capability) and the batch is larger, nothing submitted. ``allow_implicit_submissions`` (submitting part
        of the block early) is not carried: ConfigError when true."""
        if allow_implicit_submissions:
            raise ConfigError("allow_implicit_submissions", "is not carried by dispatch: a batch is submitted whole")
        if self._batch is not None:
            raise RuntimeError('Nesting "with executor.batch()" contexts is not allowed.')
        self._batch = []
        limit = self._request.array_parallelism
        body_done = False
        try:
            with self._executor.batch(max_running=limit):
                yield
                body_done = True
        except Unsupported as exc:
            if not body_done or limit is None:
                raise
            raise ConfigError(
                "slurm_array_parallelism",
                f"is carried as the batch's throttle (at most {limit} of its jobs running at once), which this"
                f" cluster cannot keep ({exc}): submit in batches of {limit}; nothing was submitted",
            ) from None
        finally:
            self._batch = None
