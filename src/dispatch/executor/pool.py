"""``dispatch.Executor``: a :class:`concurrent.futures.Executor` whose calls are dispatch jobs.

``submit(fn, *args, **kwargs)`` pickles the call (cloudpickle) into the cluster's shared directory and submits a
job that runs it (:mod:`dispatch.executor.run`); ``map``, ``submit_many``, and every ``submit`` inside a
``with ex.batch():`` block, go out as one batched submission (:meth:`~dispatch.cluster.Operator.submit_many`: one job
array on Slurm). ``ex.with_options(...)`` is the same executor with another job shape
(:class:`~dispatch.executor.shape.Shape`). Each call is a normal job: recorded, supervised by its rules, visible
in ``dispatch status`` and ``show``.

One collector thread per executor waits for the futures: every ``poll`` seconds it runs one cycle of an
in-process :class:`~dispatch.supervise.Supervisor` limited to this executor's unfinished jobs (as
:meth:`Cluster.wait <dispatch.cluster.Cluster.wait>` does for one job, so their rules are applied here: a job a
supervisor service holds is left to it), then settles every future whose job is over
(:func:`dispatch.follow.over`) from its record and its result files. The thread and the caller's submissions
use the backend under one lock. A future needs no thread of its own: ``concurrent.futures.wait`` and
``as_completed`` over thousands of them wait on the futures' own conditions, which this one thread settles (it
reads the pending jobs' records in one ``get_many`` per cycle).
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor as _Executor
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from dispatch.capabilities import Capability
from dispatch.cluster import BatchIncomplete
from dispatch.errors import ConfigError, Unsupported
from dispatch.executor.calls import Call, CallError, FileRefused, Session, call_name, value_of
from dispatch.executor.output import rank0_output
from dispatch.executor.seal import Trust
from dispatch.executor.shape import DEFAULT_MAX_RESULT_BYTES, Shape
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

DEFAULT_RESULT_WAIT = 5.0
"""Seconds a result the record says should be there may take to show on the shared file system."""

_UNSET: Any = object()
"""An option :meth:`Executor.with_options` was not given (None is a value there: no time limit, no rules)."""


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
    nothing stopped twice), False when it finished otherwise or the stop failed (it then stays pending).
    ``stdout()`` and ``stderr()`` read rank 0's output as the cluster keeps it.

    A call made inside ``with executor.batch():`` has no job until the block ends: its ``job_id`` raises
    RuntimeError until then, and ``cancel()`` takes it out of the batch (nothing was submitted)."""

    def __init__(self, executor: Executor, job_id: str | None, call: Call, shape: Shape | None = None) -> None:
        super().__init__()
        self._job_id = job_id
        self._executor = executor
        self._call = call
        self._shape = executor._shape if shape is None else shape

    @property
    def job_id(self) -> str:
        """The dispatch job that runs the call (``dispatch show``, ``cluster.get``)."""
        if self._job_id is None:
            if self.done():
                raise RuntimeError("this call was never submitted: its batch failed or it was cancelled in its batch")
            raise RuntimeError("this call is submitted when its `with executor.batch():` block ends: no job_id yet")
        return self._job_id

    def stdout(self) -> str | None:
        """Rank 0's standard output so far, of the job's current execution, decoded as UTF-8 (errors replaced),
        read as ``dispatch logs`` reads it: where the scheduler keeps one file per execution (Slurm) that file,
        every rank's output in it. None while there is none to read (not submitted, created or started yet).
        Unsupported where the adapter reads no output; Unavailable when the cluster does not answer."""
        return self._executor._output(self, "stdout")

    def stderr(self) -> str | None:
        """Rank 0's standard error so far, as :meth:`stdout` reads it (Unsupported on Kubeflow, which keeps no
        stderr apart)."""
        return self._executor._output(self, "stderr")

    def cancel(self) -> bool:
        if self.cancelled():
            return True  # as concurrent.futures answers: cancelled already, nothing stopped again
        if self.done():
            return False
        if self._job_id is None:
            return self._executor._unqueue(self)
        try:
            self._executor._cancel(self)
        except Exception as exc:
            print(f"dispatch.Executor: cannot stop job {self.job_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return False
        return super().cancel()


@dataclass
class _Queued:
    """A call made inside a ``batch()`` block, waiting for the block's end: its future, spec and rules."""

    future: CallFuture
    spec: JobSpec
    rules: RuleSet | Mapping[str, Any] | None


class Executor(_Executor):
    """Runs Python calls as dispatch jobs on ``cluster`` (see the module docstring and docs/executor.md).

    Every call's job has ``nodes`` x ``procs_per_node`` ranks, asks ``resources`` of each node, and has
    ``rules``, ``time_limit``, ``env`` and ``extensions``; each rank runs ``python`` (default: this interpreter's
    path, right when the jobs run on machines laid out like this one; give the cluster's own otherwise) on the
    runner, after the shell lines of ``setup`` (bash, on every rank; :class:`~dispatch.executor.shape.Shape`).
    :meth:`with_options` gives the same executor with another shape for some calls. A multi-rank
    function reads its place with ``dispatch.job.context()``; ``result()`` is rank 0's value, or with
    ``all_ranks`` the list of every rank's. A function the cluster cannot import by name (a lambda, a
    notebook's or a script's ``__main__``) travels by value; one from an importable module needs that module on
    the job's PYTHONPATH.

    What the executor writes in the shared directory is this user's alone (directories 0700, files 0600), or,
    with ``group`` (a name or a number: for jobs that run as another user of that group), readable by that
    group and its call directories writable by it (:mod:`dispatch.executor.seal`). A result is read only when
    it is trusted and its seal holds; one missing when the job is over is waited for up to ``result_wait``
    seconds (a shared file system may show it late) before the call fails. ``progress``: whether :meth:`map`
    shows how many of its calls are done and failed, live on stderr (a tqdm bar in a notebook where tqdm
    imports): None (the default) on a terminal or in a notebook, True everywhere, False never.

    Raises Unsupported when the cluster has no shared storage (the ``SharedStorage`` capability, with its Reason),
    SpecError for a shape no job spec could have (naming the field), ValueError for an unknown group, and
    CallError when the shared directory cannot be written.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        nodes: int = 1,
        procs_per_node: int = 1,
        resources: Resources | None = None,
        rules: RuleSet | Mapping[str, Any] | None = None,
        time_limit: float | None = None,
        env: Mapping[str, str] | None = None,
        extensions: Sequence[Extension] = (),
        working_dir: str | None = None,
        python: str | None = None,
        setup: Sequence[str] = (),
        all_ranks: bool = False,
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        poll: float = DEFAULT_POLL,
        keep_files: bool = False,
        group: str | int | None = None,
        result_wait: float = DEFAULT_RESULT_WAIT,
        progress: bool | None = None,
    ) -> None:
        backend = cluster.backend
        cluster.capabilities().require(Capability.SHARED_STORAGE, "dispatch.Executor")
        if not isinstance(backend, SharedStorer):
            raise Unsupported(f"the {backend.name} backend names no shared storage (it is no SharedStorer)")
        if max_result_bytes is not None and max_result_bytes <= 0:
            raise ValueError(f"max_result_bytes must be positive or None, not {max_result_bytes!r}")
        if result_wait < 0:
            raise ValueError(f"result_wait must be 0 or more seconds, not {result_wait!r}")
        if isinstance(poll, bool) or not isinstance(poll, int | float) or not 0 < poll < math.inf:
            raise ValueError(f"poll must be a positive number of seconds, not {poll!r}")  # 0 or nan: a busy loop
        trust = Trust.of(group)
        self._shape = Shape(
            nodes=nodes,
            procs_per_node=procs_per_node,
            resources=resources or Resources(),
            time_limit=time_limit,
            rules=rules,
            env=dict(env or {}),
            extensions=tuple(extensions),
            working_dir=working_dir,
            python=python or sys.executable,
            setup=tuple(setup),
            all_ranks=all_ranks,
            max_result_bytes=max_result_bytes,
        )
        self.cluster = cluster
        self.poll = poll
        self.keep_files = keep_files
        self.result_wait = result_wait
        self.progress = progress
        """Whether :meth:`map` shows its calls' progress on stderr (:mod:`dispatch.progressbar`): None on a
        terminal or in a notebook (``DISPATCH_PROGRESS_BAR=never`` turns it off), True everywhere, False never."""
        self._root = self
        """The executor whose collector, session and batches this one uses: itself, or the one a view came from."""
        self._session = Session.create(backend.shared_storage(), trust)
        self._lock = threading.RLock()
        """Held around every backend use: the caller's submissions and the collector's cycles."""
        self._pending: dict[str, CallFuture] = {}
        self._over_since: dict[str, float] = {}
        """When each pending job was first seen over with a result missing (time.monotonic)."""
        self._batches: dict[int, list[_Queued]] = {}
        """The calls of each thread's open ``batch()`` block, by thread id, in order."""
        self._batch_lock = threading.Lock()
        """Held around ``_batches`` (not ``_lock``, which a long supervision cycle may hold)."""
        self._wake = threading.Event()
        self._shutdown = False
        self._thread: threading.Thread | None = None
        self._supervisor: Supervisor | None = None

    @property
    def shape(self) -> Shape:
        """What each call's job asks for (this executor's, or this view's)."""
        return self._shape

    @property
    def rules(self) -> RuleSet | Mapping[str, Any] | None:
        return self._shape.rules

    @property
    def all_ranks(self) -> bool:
        return self._shape.all_ranks

    @property
    def max_result_bytes(self) -> int | None:
        return self._shape.max_result_bytes

    def with_options(
        self,
        *,
        nodes: int = _UNSET,
        procs_per_node: int = _UNSET,
        resources: Resources = _UNSET,
        time_limit: float | None = _UNSET,
        rules: RuleSet | Mapping[str, Any] | None = _UNSET,
        env: Mapping[str, str] = _UNSET,
        extensions: Sequence[Extension] = _UNSET,
        working_dir: str | None = _UNSET,
        python: str = _UNSET,
        setup: Sequence[str] = _UNSET,
        name: str | None = _UNSET,
        all_ranks: bool = _UNSET,
        max_result_bytes: int | None = _UNSET,
    ) -> Executor:
        """This executor with another job shape: the options given replace this one's (:class:`Shape`; ``name``
        is the job's name, default ``call <function>``), the others stay. Checked now: SpecError naming a field
        no job spec could have, ValueError for a cap that is not positive.

        The view costs nothing: no thread, no directory, no session of its own. It shares this executor's
        collector, files, ``batch()`` blocks and shutdown (``shutdown``, or leaving ``with``, on a view shuts the
        executor down), so ``ex.with_options(nodes=4).submit(fn, x)`` inside ``with ex.batch():`` joins the batch.

        Why a view and not keyword options of ``submit``: ``submit(fn, /, *args, **kwargs)`` hands every keyword
        to ``fn`` (the ``concurrent.futures`` contract), so a name reserved there (``nodes=``, ``time_limit=``)
        would be taken, silently, from the first function that has a parameter of that name.
        """
        given = {
            "nodes": nodes,
            "procs_per_node": procs_per_node,
            "resources": resources,
            "time_limit": time_limit,
            "rules": rules,
            "env": env,
            "extensions": extensions,
            "working_dir": working_dir,
            "python": python,
            "setup": setup,
            "name": name,
            "all_ranks": all_ranks,
            "max_result_bytes": max_result_bytes,
        }
        shape = self._shape.replace(**{k: v for k, v in given.items() if v is not _UNSET})
        view = copy.copy(self)  # the same lock, session, pending futures and batches: only the shape differs
        view._shape = shape
        return view

    # ----- submitting -------------------------------------------------------------------------------------

    def _spec(self, fn: Callable[..., Any], call: Call, name: str | None = None) -> JobSpec:
        spec = self._shape.spec(self._session.command(self._shape.python, call), call_name(fn))
        return spec if name is None else replace(spec, name=name)

    def _new_call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Call:
        options = {"all_ranks": self._shape.all_ranks, "max_result_bytes": self._shape.max_result_bytes}
        return self._session.new_call(fn, args, kwargs, options)

    def _open(self) -> None:
        if self._root._shutdown:
            raise RuntimeError("cannot submit calls after shutdown")

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> CallFuture:
        """Submit ``fn(*args, **kwargs)`` as one job; returns its future (``job_id`` set). CallError when the
        call cannot be pickled or written; the submission's own errors (Rejected, OutcomeUnknown, ...) as
        :meth:`Operator.submit <dispatch.cluster.Operator.submit>` raises them. Inside ``with ex.batch():`` the
        call is written now (CallError now) and submitted with the batch when the block ends (:meth:`batch`)."""
        self._open()
        call = self._new_call(fn, args, kwargs)
        try:
            spec = self._spec(fn, call)
            with self._batch_lock:
                queued = self._batches.get(threading.get_ident())
                if queued is not None:
                    future = CallFuture(self._root, None, call, self._shape)
                    queued.append(_Queued(future, spec, self._shape.rules))
                    return future
            with self._lock:
                job_id = self.cluster.operator.submit(spec, self._shape.rules)
        except BaseException:
            call.remove()
            raise
        future = CallFuture(self._root, job_id, call, self._shape)
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
        ``buffersize`` are accepted for the standard signature and not used: every item is its own job. Inside
        a ``batch()`` block it is still its own batched submission, made at once."""
        del chunksize, buffersize
        futures = self.submit_many(fn, *iterables)
        if futures:
            from dispatch import progressbar

            progressbar.watch(futures, f"map {call_name(fn)[5:]}", self._root.progress)
        deadline = None if timeout is None else self.cluster.clock.now() + timeout
        return _Results(futures, deadline, self.cluster.clock.now)

    def submit_many(
        self,
        fn: Callable[..., T],
        /,
        *iterables: Iterable[Any],
        names: Sequence[str] | None = None,
        max_running: int | None = None,
    ) -> list[CallFuture]:
        """Submit ``fn`` over the items of ``iterables`` (zipped, as :func:`map`) in ONE batched submission
        (:meth:`Operator.submit_many <dispatch.cluster.Operator.submit_many>`: a job array where the scheduler
        has them); returns one future per item, in order. Job ``i`` is named ``names[i]`` (default: the shape's
        name, else ``call <function>``; ValueError when there are not as many names as items, before anything is
        written). A job the batch recorded but could not start has its future failed with that job's error. When
        the batch cannot be written or submitted whole, what it started is stopped and its files removed before
        the error is raised. Inside a ``batch()`` block it is still its own batched submission, made at once.
        ``max_running``: at most that many of the calls run at once (:meth:`Operator.submit_many
        <dispatch.cluster.Operator.submit_many>`: the BatchThrottle capability; on Slurm the array's ``%K``)."""
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
                submitted = (
                    self.cluster.operator.submit_many(specs, self._shape.rules, max_running=max_running)
                    if specs
                    else []
                )
        except BaseException as exc:
            self._undo(calls, exc)
            raise
        futures: list[CallFuture] = []
        for call, sub in zip(calls, submitted, strict=True):
            future = CallFuture(self._root, sub.job_id, call, self._shape)
            if sub.error is not None:
                future.set_exception(sub.error)
                call.remove()
            futures.append(future)
        self._watch([f for f in futures if not f.done()])
        return futures

    @contextlib.contextmanager
    def batch(self, *, max_running: int | None = None) -> Iterator[None]:
        """A block whose ``submit`` calls (by this thread, on this executor or any view of it) go out together
        when it ends, as ONE batched submission (:meth:`Operator.submit_many
        <dispatch.cluster.Operator.submit_many>`; one per distinct ``rules`` among the calls): on Slurm one job
        array per set of sbatch options. Each ``submit`` returns its future at once; its ``job_id`` is set when
        the block has ended, and from then on the futures are like any other.

        An exception leaving the block submits nothing: every call's files are removed and its future
        cancelled (a shutdown inside the block does the same, then raises RuntimeError). When the submission
        fails, what it started is stopped and every call's files removed (as for ``map``), each future not
        submitted gets the error, and the error is raised. Blocks do not nest (RuntimeError). ``max_running``:
        at most that many of the block's calls run at once (as :meth:`submit_many`'s); the calls must then share
        their rules (one batched submission), else ConfigError and nothing is submitted."""
        self._open()
        me = threading.get_ident()
        with self._batch_lock:
            if me in self._batches:
                raise RuntimeError("`with executor.batch():` blocks do not nest")
            queued: list[_Queued] = []
            self._batches[me] = queued
        left = True
        try:
            yield
            left = False
        finally:
            with self._batch_lock:
                self._batches.pop(me, None)
                items = list(queued)
                queued.clear()
            if left or self._root._shutdown:
                for q in items:  # nothing of the block is submitted
                    q.future._call.remove()
                    Future.cancel(q.future)
        self._open()  # shut down inside the block: RuntimeError, nothing submitted
        self._submit_queued(items, max_running)

    def _submit_queued(self, items: Sequence[_Queued], max_running: int | None = None) -> None:
        """Submit a batch's calls: one ``submit_many`` per distinct rules, in the order first seen (one alone
        with ``max_running``, which caps one batched submission)."""
        groups: list[tuple[RuleSet | Mapping[str, Any] | None, list[_Queued]]] = []
        for q in items:
            for rules, members in groups:
                if rules == q.rules:
                    members.append(q)
                    break
            else:
                groups.append((q.rules, [q]))
        if max_running is not None and len(groups) > 1 and max_running < len(items):
            refused = ConfigError(
                "max_running",
                f"caps one batched submission, and this batch's calls have {len(groups)} different rule sets"
                " (submit them in batches of their own): nothing was submitted",
            )
            for q in items:
                q.future._call.remove()
                q.future.set_exception(refused)
            raise refused
        for n, (rules, members) in enumerate(groups):
            try:
                with self._lock:
                    submitted = self.cluster.operator.submit_many(
                        [q.spec for q in members], rules, max_running=max_running
                    )
            except BaseException as exc:
                self._undo([q.future._call for q in members], exc)
                for _, left in groups[n:]:
                    for q in left:
                        q.future._call.remove()
                        q.future.set_exception(exc)
                raise
            for q, sub in zip(members, submitted, strict=True):
                q.future._job_id = sub.job_id
                if sub.error is not None:
                    q.future.set_exception(sub.error)
                    q.future._call.remove()
            self._watch([q.future for q in members if not q.future.done()])

    def _unqueue(self, future: CallFuture) -> bool:
        """Take ``future`` out of the ``batch()`` block it waits in and cancel it; False when it is in none."""
        with self._batch_lock:
            for queued in self._batches.values():
                found = next((i for i, q in enumerate(queued) if q.future is future), None)
                if found is not None:
                    del queued[found]
                    break
            else:
                return False
        future._call.remove()
        return Future.cancel(future)

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

    # ----- output ------------------------------------------------------------------------------------------

    def _output(self, future: CallFuture, stream: str) -> str | None:
        if future._job_id is None:
            return None
        with self._lock:
            return rank0_output(self.cluster.backend, self.cluster.get(future._job_id), stream)

    # ----- waiting -----------------------------------------------------------------------------------------

    def _watch(self, futures: Sequence[CallFuture]) -> None:
        root = self._root
        with root._lock:
            for f in futures:
                root._pending[f.job_id] = f
            if futures and (root._thread is None or not root._thread.is_alive()):
                root._thread = threading.Thread(target=root._collect, name="dispatch-executor", daemon=True)
                root._thread.start()
        root._wake.set()

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
        for job in records.get_many(list(self._pending)):
            future = self._pending.get(job.id)
            if future is not None and over(job) and self._settle(future, job):
                del self._pending[job.id]
                self._over_since.pop(job.id, None)

    def _settle(self, future: CallFuture, job: JobRecord) -> bool:
        """Give ``future`` its result or exception from the job's result files and record; False (the future
        stays pending) while a missing result is still waited for (``result_wait``)."""
        if future.done():
            return True
        shape = future._shape
        ranks = range(job.spec.world_size if shape.all_ranks else 1)
        out = job.outcome
        state = out.state if out is not None else None
        try:
            results = future._call.results(ranks, shape.max_result_bytes)
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
            future.set_result(values if shape.all_ranks else values[0])
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
        future is done (their jobs go on being watched here until then otherwise, in a daemon thread). On a
        view (:meth:`with_options`), the executor it came from is shut down."""
        root = self._root
        root._shutdown = True
        if cancel_futures:
            with root._lock:
                pending = list(root._pending.values())
            for future in pending:
                future.cancel()
        if wait:
            thread = root._thread
            while thread is not None and thread.is_alive():
                thread.join(root.poll * 4 + 1.0)
                thread = root._thread
            if not root.keep_files:
                root._session.remove()


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
