"""``dispatch.Executor``: a :class:`concurrent.futures.Executor` whose calls are dispatch jobs.

``submit(fn, *args, **kwargs)`` pickles the call (cloudpickle) into the cluster's shared directory and submits a
job that runs it (:mod:`dispatch.executor.run`); ``map`` submits all its calls in one batched submission
(:meth:`~dispatch.cluster.Operator.submit_many`). Each call is a normal job: recorded, supervised by its rules,
visible in ``dispatch status`` and ``show``.

One collector thread per executor waits for the futures: every ``poll`` seconds it runs one cycle of an
in-process :class:`~dispatch.supervise.Supervisor` limited to this executor's unfinished jobs (as
:meth:`Cluster.wait <dispatch.cluster.Cluster.wait>` does for one job, so their rules are applied here: a job a
supervisor service holds is left to it), then settles every future whose job is over
(:func:`dispatch.follow.over`) from its record and its result files. The thread and the caller's submissions
use the backend under one lock.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor as _Executor
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from dispatch.capabilities import Capability
from dispatch.errors import Unsupported
from dispatch.executor.calls import Call, CallError, Session, call_name, value_of
from dispatch.extensions import Extension
from dispatch.follow import DEFAULT_POLL, over
from dispatch.outcome import State
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.spi import SharedStorer

if TYPE_CHECKING:
    from dispatch.cluster import Cluster
    from dispatch.records.model import JobRecord
    from dispatch.supervise import Supervisor

T = TypeVar("T")

DEFAULT_MAX_RESULT_BYTES = 256 * 1024 * 1024
"""The largest pickled result a call may return (256 MiB): a larger one is ResultTooLarge at ``result()``."""


class CallFailed(CallError):
    """The call's job ended without a result: ``record`` is its final record (outcome: state, cause, exit)."""

    def __init__(self, message: str, record: JobRecord) -> None:
        super().__init__(message)
        self.record = record
        self.job_id = record.id


class CallFuture(Future[Any]):
    """A call's future, plus ``job_id``: the dispatch job that runs it. It stays pending until the job is over
    (``running()`` is False throughout: the job's own state is in its record); ``cancel()`` stops the job,
    queued or running, unless the future is done already."""

    def __init__(self, executor: Executor, job_id: str, call: Call) -> None:
        super().__init__()
        self.job_id = job_id
        self._executor = executor
        self._call = call

    def cancel(self) -> bool:
        if self.done():
            return False
        self._executor._cancel(self)
        return super().cancel()


class Executor(_Executor):
    """Runs Python calls as dispatch jobs on ``cluster`` (see the module docstring and docs/executor.md).

    Every call's job has ``nodes`` x ``procs_per_node`` ranks, ``rules``, ``time_limit``, ``env`` and
    ``extensions``; each rank runs ``python`` (default: this interpreter's path, right when the jobs run on
    machines laid out like this one; give the cluster's own otherwise) on the runner. A multi-rank function
    reads its place with ``dispatch.job.context()``; ``result()`` is rank 0's value, or with ``all_ranks`` the
    list of every rank's. A function the cluster cannot import by name (a lambda, a notebook's or a script's
    ``__main__``) travels by value; one from an importable module needs that module on the job's PYTHONPATH.

    Raises Unsupported when the cluster has no shared storage (the ``SharedStorage`` capability, with its Reason)
    and CallError when the shared directory cannot be written.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        nodes: int = 1,
        procs_per_node: int = 1,
        rules: RuleSet | Mapping[str, Any] | None = None,
        time_limit: float | None = None,
        env: Mapping[str, str] | None = None,
        extensions: Sequence[Extension] = (),
        working_dir: str | None = None,
        python: str | None = None,
        all_ranks: bool = False,
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        poll: float = DEFAULT_POLL,
        keep_files: bool = False,
    ) -> None:
        backend = cluster.backend
        cluster.capabilities().require(Capability.SHARED_STORAGE, "dispatch.Executor")
        if not isinstance(backend, SharedStorer):
            raise Unsupported(f"the {backend.name} backend names no shared storage (it is no SharedStorer)")
        if max_result_bytes is not None and max_result_bytes <= 0:
            raise ValueError(f"max_result_bytes must be positive or None, not {max_result_bytes!r}")
        self.cluster = cluster
        self.rules = rules
        self.all_ranks = all_ranks
        self.max_result_bytes = max_result_bytes
        self.poll = poll
        self.keep_files = keep_files
        self._template = JobSpec(
            command=(python or sys.executable,),
            nodes=nodes,
            procs_per_node=procs_per_node,
            env=dict(env or {}),
            time_limit=time_limit,
            working_dir=working_dir,
            extensions=tuple(extensions),
        )
        self._session = Session.create(backend.shared_storage())
        self._lock = threading.RLock()
        """Held around every backend use: the caller's submissions and the collector's cycles."""
        self._pending: dict[str, CallFuture] = {}
        self._wake = threading.Event()
        self._shutdown = False
        self._thread: threading.Thread | None = None
        self._supervisor: Supervisor | None = None

    # ----- submitting -------------------------------------------------------------------------------------

    def _spec(self, fn: Callable[..., Any], call: Call) -> JobSpec:
        t = self._template
        return JobSpec(
            command=(t.command[0], self._session.runner, call.remote),
            nodes=t.nodes,
            procs_per_node=t.procs_per_node,
            env=t.env,
            time_limit=t.time_limit,
            working_dir=t.working_dir,
            name=call_name(fn),
            extensions=t.extensions,
        )

    def _new_call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Call:
        options = {"all_ranks": self.all_ranks, "max_result_bytes": self.max_result_bytes}
        return self._session.new_call(fn, args, kwargs, options)

    def _open(self) -> None:
        if self._shutdown:
            raise RuntimeError("cannot submit calls after shutdown")

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> CallFuture:
        """Submit ``fn(*args, **kwargs)`` as one job; returns its future (``job_id`` set). CallError when the
        call cannot be pickled or written; the submission's own errors (Rejected, OutcomeUnknown, ...) as
        :meth:`Operator.submit <dispatch.cluster.Operator.submit>` raises them."""
        self._open()
        call = self._new_call(fn, args, kwargs)
        try:
            with self._lock:
                job_id = self.cluster.operator.submit(self._spec(fn, call), self.rules)
        except BaseException:
            call.remove()
            raise
        future = CallFuture(self, job_id, call)
        self._watch([future])
        return future

    def map(
        self,
        fn: Callable[..., T],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
        buffersize: int | None = None,
    ) -> Iterator[T]:
        """Submit ``fn`` over the items of ``iterables`` (zipped, as :func:`map`) in ONE batched submission,
        then yield the results in order (each as ``result()`` gives it, so a call's exception is raised when
        its turn comes). ``timeout`` counts from this call. ``chunksize`` and ``buffersize`` are accepted for
        the standard signature and not used: every item is its own job."""
        del chunksize, buffersize
        self._open()
        items = list(zip(*iterables, strict=False))
        calls = [self._new_call(fn, item, {}) for item in items]
        specs = [self._spec(fn, call) for call in calls]
        with self._lock:
            submitted = self.cluster.operator.submit_many(specs, self.rules) if specs else []
        futures: list[CallFuture] = []
        for call, sub in zip(calls, submitted, strict=True):
            future = CallFuture(self, sub.job_id, call)
            if sub.error is not None:
                future.set_exception(sub.error)
            futures.append(future)
        self._watch([f for f in futures if not f.done()])
        deadline = None if timeout is None else self.cluster.clock.now() + timeout

        def results() -> Iterator[T]:
            for future in futures:
                left = None if deadline is None else max(0.0, deadline - self.cluster.clock.now())
                yield future.result(left)

        return results()

    # ----- waiting -----------------------------------------------------------------------------------------

    def _watch(self, futures: Sequence[CallFuture]) -> None:
        with self._lock:
            for f in futures:
                self._pending[f.job_id] = f
            if futures and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._collect, name="dispatch-executor", daemon=True)
                self._thread.start()
        self._wake.set()

    def _collect(self) -> None:
        """The collector thread: a supervision cycle over the pending jobs, then settle the finished ones, until
        none is pending."""
        while True:
            with self._lock:
                if not self._pending:
                    self._thread = None
                    return
                try:
                    self._cycle()
                except Exception as exc:  # a failed cycle is retried at the next poll; the futures stay pending
                    print(
                        f"dispatch.Executor: a supervision cycle failed: {type(exc).__name__}: {exc}", file=sys.stderr
                    )
            self._wake.wait(self.poll)
            self._wake.clear()

    def _cycle(self) -> None:
        from dispatch.supervise import Supervisor

        records = self.cluster.records
        if records is None:
            raise CallError(f"cluster {self.cluster.name} has no record store")
        if self._supervisor is None:
            self._supervisor = Supervisor(
                self.cluster.backend, records, clock=self.cluster.clock, cluster=self.cluster.name, only=()
            )
        self._supervisor.only = frozenset(self._pending)
        self._supervisor.cycle()
        for job_id, future in list(self._pending.items()):
            job = records.get(job_id)
            if over(job):
                del self._pending[job_id]
                self._settle(future, job)

    def _settle(self, future: CallFuture, job: JobRecord) -> None:
        """Give ``future`` its result or exception from the job's result files and record."""
        if future.done():
            return
        ranks = range(job.spec.world_size if self.all_ranks else 1)
        try:
            results = future._call.results(ranks, self.max_result_bytes)
            out = job.outcome
            state = out.state if out is not None else None
            if state is State.CANCELLED and not results:
                Future.cancel(future)  # stopped (by cancel() or a user): its job is over, nothing to stop
                return
            if not results or (self.all_ranks and len(results) < len(ranks) and state is State.SUCCEEDED):
                cause = out.cause.value if out is not None and out.cause is not None else "none"
                what = f"{state.value}, cause {cause}, exit code {out.exit_code}" if out and state else "over"
                raise CallFailed(
                    f"job {job.id} ended ({what}) without a result from rank(s)"
                    f" {', '.join(str(r) for r in ranks if r not in results)}; see `dispatch show {job.id}` and"
                    f" `dispatch logs {job.id}`",
                    job,
                )
            values = [value_of(results[r]) for r in sorted(results)]
            future.set_result(values if self.all_ranks else values[0])
        except BaseException as exc:
            future.set_exception(exc)
        finally:
            if not self.keep_files:
                future._call.remove()

    def _cancel(self, future: CallFuture) -> None:
        """Stop ``future``'s job and forget it (its files go too)."""
        with self._lock:
            self.cluster.operator.stop(future.job_id)
            self._pending.pop(future.job_id, None)
        if not self.keep_files:
            future._call.remove()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more calls. ``cancel_futures`` stops every call not yet done; ``wait`` returns only when every
        future is done (their jobs go on being watched here until then otherwise, in a daemon thread)."""
        self._shutdown = True
        if cancel_futures:
            with self._lock:
                pending = list(self._pending.values())
            for future in pending:
                future.cancel()
        if wait:
            thread = self._thread
            while thread is not None and thread.is_alive():
                thread.join(self.poll * 4 + 1.0)
                thread = self._thread
            if not self.keep_files:
                self._session.remove()
