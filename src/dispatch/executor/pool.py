"""``dispatch.Executor``: a :class:`concurrent.futures.Executor` whose calls are dispatch jobs.

``submit(fn, *args, **kwargs)`` pickles the call (cloudpickle) into the cluster's shared directory and submits a
job that runs it (:mod:`dispatch.executor.run`); ``submit_many`` and ``map`` submit all their calls in one batched
submission (:meth:`~dispatch.cluster.Operator.submit_many`). Each call is a normal job: recorded, supervised by its
rules, visible in ``dispatch status`` and ``show``.

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
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor as _Executor
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, TypeVar

from dispatch.capabilities import Capability
from dispatch.cluster import BatchIncomplete
from dispatch.errors import Unsupported
from dispatch.executor.calls import Call, CallError, FileRefused, Session, call_name, value_of
from dispatch.executor.seal import Trust
from dispatch.extensions import Extension
from dispatch.follow import DEFAULT_POLL, over
from dispatch.outcome import State
from dispatch.resources import Resources
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

DEFAULT_RESULT_WAIT = 5.0
"""Seconds a result the record says should be there may take to show on the shared file system."""


class CallFailed(CallError):
    """The call's job ended without a result: ``record`` is its final record (outcome: state, cause, exit)."""

    def __init__(self, message: str, record: JobRecord) -> None:
        super().__init__(message)
        self.record = record
        self.job_id = record.id


class CallFuture(Future[Any]):
    """A call's future, plus ``job_id``: the dispatch job that runs it. It stays pending until the job is over
    (``running()`` is False throughout: the job's own state is in its record); ``cancel()`` stops the job,
    queued or running, unless the future is done already: True when the future is cancelled (again: True,
    nothing stopped twice), False when it finished otherwise or the stop failed (it then stays pending)."""

    def __init__(self, executor: Executor, job_id: str, call: Call) -> None:
        super().__init__()
        self.job_id = job_id
        self._executor = executor
        self._call = call

    def cancel(self) -> bool:
        if self.cancelled():
            return True  # as concurrent.futures answers: cancelled already, nothing stopped again
        if self.done():
            return False
        try:
            self._executor._cancel(self)
        except Exception as exc:
            print(f"dispatch.Executor: cannot stop job {self.job_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return False
        return super().cancel()


class Executor(_Executor):
    """Runs Python calls as dispatch jobs on ``cluster`` (see the module docstring and docs/executor.md).

    Every call's job has ``nodes`` x ``procs_per_node`` ranks, ``resources``, ``rules``, ``time_limit``, ``env``
    and ``extensions``; each rank runs ``python`` (default: this interpreter's path, right when the jobs run on
    machines laid out like this one; give the cluster's own otherwise) on the runner. A multi-rank function
    reads its place with ``dispatch.job.context()``; ``result()`` is rank 0's value, or with ``all_ranks`` the
    list of every rank's. A function the cluster cannot import by name (a lambda, a notebook's or a script's
    ``__main__``) travels by value; one from an importable module needs that module on the job's PYTHONPATH.

    What the executor writes in the shared directory is this user's alone (directories 0700, files 0600), or,
    with ``group`` (a name or a number: for jobs that run as another user of that group), readable by that
    group and its call directories writable by it (:mod:`dispatch.executor.seal`). A result is read only when
    it is trusted and its seal holds; one missing when the job is over is waited for up to ``result_wait``
    seconds (a shared file system may show it late) before the call fails.

    Raises Unsupported when the cluster has no shared storage (the ``SharedStorage`` capability, with its Reason),
    ValueError for an unknown group, and CallError when the shared directory cannot be written.
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
        resources: Resources | None = None,
        working_dir: str | None = None,
        python: str | None = None,
        all_ranks: bool = False,
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        poll: float = DEFAULT_POLL,
        keep_files: bool = False,
        group: str | int | None = None,
        result_wait: float = DEFAULT_RESULT_WAIT,
    ) -> None:
        backend = cluster.backend
        cluster.capabilities().require(Capability.SHARED_STORAGE, "dispatch.Executor")
        if not isinstance(backend, SharedStorer):
            raise Unsupported(f"the {backend.name} backend names no shared storage (it is no SharedStorer)")
        if max_result_bytes is not None and max_result_bytes <= 0:
            raise ValueError(f"max_result_bytes must be positive or None, not {max_result_bytes!r}")
        if result_wait < 0:
            raise ValueError(f"result_wait must be 0 or more seconds, not {result_wait!r}")
        trust = Trust.of(group)
        self.cluster = cluster
        self.rules = rules
        self.all_ranks = all_ranks
        self.max_result_bytes = max_result_bytes
        self.poll = poll
        self.keep_files = keep_files
        self.result_wait = result_wait
        self._template = JobSpec(
            command=(python or sys.executable,),
            nodes=nodes,
            procs_per_node=procs_per_node,
            env=dict(env or {}),
            time_limit=time_limit,
            working_dir=working_dir,
            extensions=tuple(extensions),
            resources=resources if resources is not None else Resources(),
        )
        self._session = Session.create(backend.shared_storage(), trust)
        self._lock = threading.RLock()
        """Held around every backend use: the caller's submissions and the collector's cycles."""
        self._pending: dict[str, CallFuture] = {}
        self._over_since: dict[str, float] = {}
        """When each pending job was first seen over with a result missing (time.monotonic)."""
        self._wake = threading.Event()
        self._shutdown = False
        self._thread: threading.Thread | None = None
        self._supervisor: Supervisor | None = None

    # ----- submitting -------------------------------------------------------------------------------------

    def _spec(self, fn: Callable[..., Any], call: Call, name: str | None = None) -> JobSpec:
        t = self._template
        return JobSpec(
            command=self._session.command(t.command[0], call),
            nodes=t.nodes,
            procs_per_node=t.procs_per_node,
            env=t.env,
            time_limit=t.time_limit,
            working_dir=t.working_dir,
            name=name or call_name(fn),
            extensions=t.extensions,
            resources=t.resources,
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
        its turn comes). ``timeout`` counts from this call. Leaving the iterator before its end (a call's
        exception, ``break``, ``close()``, dropping it) cancels the calls not yet yielded, as
        :meth:`concurrent.futures.Executor.map` does. When the batch cannot be written or submitted whole,
        what it started is stopped and its files removed before the error is raised. ``chunksize`` and
        ``buffersize`` are accepted for the standard signature and not used: every item is its own job."""
        del chunksize, buffersize
        futures = self.submit_many(fn, *iterables)
        deadline = None if timeout is None else self.cluster.clock.now() + timeout
        return _Results(futures, deadline, self.cluster.clock.now)

    def submit_many(
        self, fn: Callable[..., T], /, *iterables: Iterable[Any], names: Sequence[str] | None = None
    ) -> list[CallFuture]:
        """Submit ``fn`` over the items of ``iterables`` (zipped, as :func:`map`) in ONE batched submission
        (:meth:`Operator.submit_many <dispatch.cluster.Operator.submit_many>`: a job array where the scheduler
        has them); returns one future per item, in order. Job ``i`` is named ``names[i]`` (default ``call
        <function>``; ValueError when there are not as many names as items, before anything is written). A job
        the batch recorded but could not start has its future failed with that job's error. When the batch
        cannot be written or submitted whole, what it started is stopped and its files removed before the error
        is raised."""
        self._open()
        items = list(zip(*iterables, strict=False))
        if names is not None and len(names) != len(items):
            raise ValueError(f"submit_many: {len(names)} names for {len(items)} calls")
        calls: list[Call] = []
        try:
            for item in items:
                calls.append(self._new_call(fn, item, {}))
            specs = [self._spec(fn, call, names[i] if names else None) for i, call in enumerate(calls)]
            with self._lock:
                submitted = self.cluster.operator.submit_many(specs, self.rules) if specs else []
        except BaseException as exc:
            self._undo(calls, exc)
            raise
        futures: list[CallFuture] = []
        for call, sub in zip(calls, submitted, strict=True):
            future = CallFuture(self, sub.job_id, call)
            if sub.error is not None:
                future.set_exception(sub.error)
                call.remove()
            futures.append(future)
        self._watch([f for f in futures if not f.done()])
        return futures

    def _undo(self, calls: Sequence[Call], exc: BaseException) -> None:
        """After a batch that failed part-way: stop the jobs it started (those :class:`BatchIncomplete` names),
        and remove every call's files."""
        started = [sub.job_id for sub in exc.submitted if sub.ok] if isinstance(exc, BatchIncomplete) else []
        for job_id in started:
            try:
                with self._lock:
                    self.cluster.operator.stop(job_id)
            except Exception as stop_exc:
                print(
                    f"dispatch.Executor: cannot stop job {job_id} of a failed batch:"
                    f" {type(stop_exc).__name__}: {stop_exc}",
                    file=sys.stderr,
                )
        for call in calls:
            call.remove()

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
            if over(job) and self._settle(future, job):
                del self._pending[job_id]
                self._over_since.pop(job_id, None)

    def _settle(self, future: CallFuture, job: JobRecord) -> bool:
        """Give ``future`` its result or exception from the job's result files and record; False (the future
        stays pending) while a missing result is still waited for (``result_wait``)."""
        if future.done():
            return True
        ranks = range(job.spec.world_size if self.all_ranks else 1)
        out = job.outcome
        state = out.state if out is not None else None
        try:
            results = future._call.results(ranks, self.max_result_bytes)
            missing = [r for r in ranks if r not in results]
            failed = any(not r.get("ok") for r in results.values())
            if missing and not failed and not (state is State.CANCELLED and not results):
                first = self._over_since.setdefault(job.id, time.monotonic())
                if time.monotonic() - first < self.result_wait:
                    return False  # the shared file system may show it late: the next cycle looks again
            if state is State.CANCELLED and not results:
                Future.cancel(future)  # stopped (by cancel() or a user): its job is over, nothing to stop
                return True
            if missing and not failed:
                raise CallFailed(
                    f"job {job.id} ended ({_ending(job)}) without a result from rank(s) {', '.join(map(str, missing))}"
                    f" (waited {self.result_wait:g} s for it); see `dispatch show {job.id}` and"
                    f" `dispatch logs {job.id}`",
                    job,
                )
            values = [value_of(results[r]) for r in sorted(results)]
            future.set_result(values if self.all_ranks else values[0])
        except FileRefused as exc:
            failure = CallFailed(f"job {job.id} ended ({_ending(job)}) and {exc}", job)
            failure.__cause__ = exc
            future.set_exception(failure)
        except BaseException as exc:
            future.set_exception(exc)
        if not self.keep_files:
            future._call.remove()
        return True

    def _cancel(self, future: CallFuture) -> None:
        """Stop ``future``'s job and forget it (its files go too)."""
        with self._lock:
            self.cluster.operator.stop(future.job_id)
            self._pending.pop(future.job_id, None)
            self._over_since.pop(future.job_id, None)
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


def _ending(job: JobRecord) -> str:
    """How ``job`` ended, for a message: its state, cause and exit code."""
    out = job.outcome
    if out is None or out.state is None:
        return "over"
    cause = out.cause.value if out.cause is not None else "none"
    return f"{out.state.value}, cause {cause}, exit code {out.exit_code}"


class _Results(Iterator[T]):
    """:meth:`Executor.map`'s iterator: each future's result in turn; leaving it early (an exception, close(),
    being dropped) cancels the futures not yet yielded."""

    def __init__(self, futures: Sequence[CallFuture], deadline: float | None, now: Callable[[], float]) -> None:
        self._left: deque[CallFuture] = deque(futures)
        self._deadline = deadline
        self._now = now

    def __iter__(self) -> _Results[T]:
        return self

    def __next__(self) -> T:
        if not self._left:
            raise StopIteration
        future = self._left.popleft()
        left = None if self._deadline is None else max(0.0, self._deadline - self._now())
        try:
            value: T = future.result(left)
        except BaseException:
            self.close()
            raise
        return value

    def close(self) -> None:
        """Cancel every call not yet yielded."""
        while self._left:
            self._left.pop().cancel()

    def __del__(self) -> None:
        self.close()
