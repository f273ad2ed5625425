"""Running real supervisors one parked call at a time.

Each supervisor runs in its own thread, but only one thread ever runs: every backend call and every record
write a supervisor makes first *parks* its thread on a gate the :class:`Conductor` controls. The simulator's
driver then picks (by seed) which parked thread proceeds; that thread runs until it parks again (or ends), and
only then does the driver continue. Runs are therefore deterministic for a seed.

A crash is delivered at a park: the parked call raises :class:`Crash`, a ``BaseException`` that the
supervisor's ``except Exception`` handlers do not catch, so the thread unwinds without making the call and
without any further write, like a process killed at that point.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dispatch.records.base import Written, batch_writes
from dispatch.records.model import JobRecord
from dispatch.spi import view

ACTION_METHODS = frozenset({"start", "open", "hold", "release", "requeue", "readmit", "stop_job"})


class Crash(BaseException):
    """Delivered at a park point: the supervisor process dies there."""


@dataclass
class Worker:
    """One supervisor incarnation's thread and where it is parked."""

    name: str
    body: Callable[[], None]
    thread: threading.Thread | None = None
    state: str = "new"  # new | parked | running | done
    point: str = ""
    kind: str = ""  # idle | write | observe | act
    parked_at: float = 0.0
    go: bool = False
    crash: bool = False
    error: BaseException | None = None
    info: dict[str, Any] = field(default_factory=dict)


class Conductor:
    """Owns the gate every worker parks on. Only the driver thread calls :meth:`start`, :meth:`resume`,
    :meth:`crash`; workers call :meth:`park` (through the parked backend and records)."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._cv = threading.Condition()
        self._now = now
        self._by_thread: dict[int, Worker] = {}

    def current(self) -> Worker | None:
        return self._by_thread.get(threading.get_ident())

    def park(self, kind: str, point: str) -> None:
        """Called by a worker before a call or write; returns when the driver lets it proceed."""
        w = self.current()
        if w is None:
            return  # the driver itself (the operator, the environment) never parks
        with self._cv:
            w.state, w.kind, w.point, w.parked_at, w.go = "parked", kind, point, self._now(), False
            self._cv.notify_all()
            while not w.go:
                self._cv.wait()
            w.state = "running"
            if w.crash:
                raise Crash(w.name)

    def start(self, w: Worker) -> None:
        """Start the worker's thread and wait until it parks (its first park is before anything else)."""

        def main() -> None:
            self._by_thread[threading.get_ident()] = w
            try:
                self.park("idle", "start")
                w.body()
            except Crash:
                pass
            except BaseException as exc:  # a real bug in the supervisor: report it, do not hang the driver
                w.error = exc
            finally:
                with self._cv:
                    w.state = "done"
                    self._cv.notify_all()

        w.thread = threading.Thread(target=main, name=w.name, daemon=True)
        with self._cv:
            w.state = "running"
        w.thread.start()
        self._wait(w)

    def _wait(self, w: Worker) -> None:
        with self._cv:
            while w.state == "running":
                self._cv.wait()

    def resume(self, w: Worker) -> None:
        """Let the parked worker proceed until it parks again or ends."""
        assert w.state == "parked", w.state
        with self._cv:
            w.go = True
            w.state = "running"
            self._cv.notify_all()
        self._wait(w)

    def crash(self, w: Worker) -> None:
        """Kill the parked worker at its park point."""
        if w.state != "parked":
            return
        w.crash = True
        self.resume(w)
        if w.thread is not None:
            w.thread.join()


Fault = Callable[[Worker, str], None]
"""A network fault on a worker's calls (``fault(worker, call)``): raises to fail the call (the world's partitions)."""

Deciding = Callable[[str, tuple[Any, ...]], None]
"""Told of every scheduler action a worker is about to make (``deciding(call, args)``), at the moment it decides
(before its call parks): the world's check that it still holds the job's lease."""


def parked_backend(
    inner: Any, conductor: Conductor, *, fault: Fault | None = None, deciding: Deciding | None = None
) -> Any:
    """A view of ``inner`` whose every method parks first; it implements the same optional interfaces. With
    ``fault``, a call the network fault drops raises once it is resumed (nothing reaches the scheduler)."""
    quiet = {"capabilities", "declarations", "extension_policy", "close"}

    def call(name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name not in quiet:
            kind = "act" if name in ACTION_METHODS else "observe"
            if kind == "act" and deciding is not None:
                deciding(name, args)
            conductor.park(kind, f"{name}({', '.join(map(str, args))[:60]})")
            w = conductor.current()
            if fault is not None and w is not None:
                fault(w, name)
        return method(*args, **kwargs)

    return view(inner, "Parked", call=call)


class ParkedRecords:
    """A record store whose writes park first, and which checks the fencing invariant at every write: a
    supervisor writes a job only while the stored lease is its own, or to take over a lease that has expired."""

    def __init__(self, inner: Any, conductor: Conductor, now: Callable[[], float]) -> None:
        self.inner = inner
        self.conductor = conductor
        self.now = now
        self.violations: list[str] = []
        self.fault: Fault | None = None
        """A network fault between the workers and the store (the world's partitions); None: none."""

    def _reach(self, call: str) -> None:
        """Raise what ``fault`` raises for the current worker's ``call`` (after its park, if it parks)."""
        w = self.conductor.current()
        if self.fault is not None and w is not None:
            self.fault(w, call)

    def create(self, job: JobRecord, events: Any = ()) -> JobRecord:
        self.conductor.park("write", f"create {job.id}")
        self._reach("create")
        return self.inner.create(job, events)  # type: ignore[no-any-return]

    def get(self, job_id: str) -> JobRecord:
        self._reach("get")
        return self.inner.get(job_id)  # type: ignore[no-any-return]

    def update(self, job: JobRecord, events: Any = (), *, fence: int | None = None) -> JobRecord:
        intent = " intent" if any(e.kind == "intent" for e in events) else ""
        self.conductor.park("write", f"update {job.id}@{job.version}{intent}")
        self._reach("update")
        w = self.conductor.current()
        try:
            before = self.inner.get(job.id)
        except Exception:
            before = None
        written = self.inner.update(job, events, fence=fence)
        if w is not None and before is not None:
            self._check_fencing(w, job, before)
        return written  # type: ignore[no-any-return]

    def _check_fencing(self, w: Worker, job: JobRecord, before: JobRecord) -> None:
        """Checked from outside the store, on a write that LANDED: the lease stored before it was the
        writer's, or free or expired and taken by this write. (Whether the store compared the token does not
        matter here: a store that forgets to is caught by what it let through.)"""
        owner = w.info.get("owner")
        lease = before.lease
        if lease is not None and lease.owner == owner:
            return
        taking = job.lease is not None and job.lease.owner == owner
        if taking and (lease is None or lease.expires_at <= self.now()):
            return
        held = f"{lease.owner} (token {lease.token}, until t={lease.expires_at:.1f})" if lease else "nobody"
        self.violations.append(f"fenced-writes: {owner} wrote job {job.id} while the lease is held by {held}")

    def jobs(self, *, active_only: bool = True, cluster: str | None = None) -> list[JobRecord]:
        self._reach("jobs")
        return self.inner.jobs(active_only=active_only, cluster=cluster)  # type: ignore[no-any-return]

    def to_supervise(self, *, cluster: str, owner: str, now: float) -> Any:
        self._reach("to_supervise")
        return self.inner.to_supervise(cluster=cluster, owner=owner, now=now)

    def peers(self, *, cluster: str, owner: str, now: float, expires_at: float) -> Any:
        self.conductor.park("write", f"peers {owner}")
        self._reach("peers")
        return self.inner.peers(cluster=cluster, owner=owner, now=now, expires_at=expires_at)

    def get_many(self, job_ids: Any) -> Any:
        self._reach("get_many")
        return self.inner.get_many(job_ids)

    def renew(self, *, cluster: str, owner: str, now: float, expires_at: float) -> dict[str, int]:
        self.conductor.park("write", f"renew {owner}")
        self._reach("renew")
        before = {j.id: j.lease for j in self.inner.jobs(active_only=False, cluster=cluster)}
        renewed: dict[str, int] = self.inner.renew(cluster=cluster, owner=owner, now=now, expires_at=expires_at)
        for job_id in renewed:
            lease = before.get(job_id)
            if lease is None or lease.owner != owner:  # its own lease, even expired meanwhile, is as an update
                held = f"{lease.owner} (until t={lease.expires_at:.1f})" if lease else "nobody"
                self.violations.append(f"fenced-writes: {owner} renewed job {job_id} while the lease is held by {held}")
        return renewed

    def summaries(self, **kwargs: Any) -> Any:
        return self.inner.summaries(**kwargs)

    def add_node_blames(self, blames: Any) -> int:
        self.conductor.park("write", f"blame {len(blames)}")
        return self.inner.add_node_blames(blames)  # type: ignore[no-any-return]

    def node_blames(self, cluster: str, since: float) -> Any:
        return self.inner.node_blames(cluster, since)

    def clear_node_blames(self, cluster: str, node: str) -> int:
        return self.inner.clear_node_blames(cluster, node)  # type: ignore[no-any-return]

    def prune_node_blames(self, cluster: str, before: float) -> int:
        # housekeeping, not parked: it adds no decision, and the seeds' schedules stay as they were
        return self.inner.prune_node_blames(cluster, before)  # type: ignore[no-any-return]

    def events(self, job_id: str, after: int = 0) -> Any:
        return self.inner.events(job_id, after)

    def close(self) -> None:
        self.inner.close()


class ParkedBatchRecords(ParkedRecords):
    """:class:`ParkedRecords` over a store that offers :class:`~dispatch.records.base.BatchWrites`, offering them
    too (so ``submit_many`` takes its batched path, as on every production store): each batch parks as one
    write, and every item of an ``update_many`` that landed is checked for fencing as an ``update`` is."""

    def create_many(self, items: Sequence[Written]) -> list[Any]:
        self.conductor.park("write", f"create_many {len(items)}")
        return self.inner.create_many(items)  # type: ignore[no-any-return]

    def update_many(self, items: Sequence[Written], *, fence: int | None = None) -> list[Any]:
        self.conductor.park("write", f"update_many {len(items)}")
        self._reach("update_many")
        w = self.conductor.current()
        before = self.inner.get_many([job.id for job, _ in items]) if w is not None else []
        stored = {job.id: job for job in before}
        answers: list[Any] = self.inner.update_many(items, fence=fence)
        for (job, _), answer in zip(items, answers, strict=True):
            was = stored.get(job.id)
            if w is not None and was is not None and isinstance(answer, JobRecord):
                self._check_fencing(w, job, was)
        return answers


def parked_records(inner: Any, conductor: Conductor, now: Callable[[], float]) -> ParkedRecords:
    """The parked view of ``inner``: a :class:`ParkedBatchRecords` when ``inner`` offers batch writes."""
    cls = ParkedBatchRecords if batch_writes(inner) is not None else ParkedRecords
    return cls(inner, conductor, now)
