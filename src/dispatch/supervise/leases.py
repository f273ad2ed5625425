"""Leases and sharing: which jobs this supervisor may write, and the fenced write itself.

A supervisor takes a **lease** on each job it works on (a fencing token and an expiry); every write for the job
passes ``fence=token``, so a supervisor whose lease was taken over cannot write (the store refuses it), and
:meth:`Leases._check` refuses before the store is even asked. The supervisors of a cluster register as peers
each cycle; each takes about its share of the jobs (:meth:`Leases.share`) and gives up leases it holds above it.
All leases a supervisor holds are renewed in one write once the earliest has half run out.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence

from dispatch.clock import Clock
from dispatch.errors import Conflict, DispatchError
from dispatch.records.base import Records
from dispatch.records.model import Event, JobHead, JobRecord, Lease, Peers
from dispatch.supervise.carried import newly_carried_out
from dispatch.supervise.report import CycleReport
from dispatch.supervise.stall import STALLED


class LostLease(DispatchError):
    """This supervisor no longer owns the job (its lease expired or was taken over): it stops touching it."""


class Leases:
    """The lease and sharing part of :class:`~dispatch.supervise.Supervisor` (which sets these attributes)."""

    records: Records
    clock: Clock
    owner: str
    cluster: str
    lease_ttl: float
    _cache: dict[str, JobRecord]
    """The record of each job as this supervisor last wrote or read it."""
    _seen: set[str]
    """The jobs this supervisor has supervised since it took their lease."""

    def share(self, peers: Peers) -> int:
        """How many jobs this supervisor should hold: the cluster's jobs needing supervision divided by the
        supervisors alive, rounded up (all of them when it is alone)."""
        return max(1, math.ceil(peers.jobs / max(1, len(peers.owners))))

    def _divide(
        self, heads: list[JobHead], peers: Peers | None, now: float
    ) -> tuple[list[JobHead], list[JobHead], int, float]:
        """Divide ``heads`` in one pass: this supervisor's unexpired leases, the free or expired ones it may take
        this cycle (up to its share, in an order of its own so that supervisors starting together do not all
        race for the same jobs), how many of its own it holds above its share, and when the earliest of its
        leases expires. Without ``peers`` (a supervisor of ``only`` some jobs) its share is every head it was
        given."""
        share = len(heads) if peers is None else self.share(peers)
        owner = self.owner
        ours: list[JobHead] = []
        others: list[JobHead] = []
        earliest = math.inf
        for h in heads:
            expires = h.lease_expires or 0.0
            if h.lease_owner != owner or expires <= now:
                others.append(h)
            else:
                ours.append(h)
                earliest = min(earliest, expires)
        room = max(0, share - len(ours))
        if room and others:
            others.sort(key=lambda h: zlib.crc32(f"{owner}/{h.id}".encode()))
        return ours, others[:room], max(0, len(ours) - share), earliest

    def _release(self, jobs: list[JobRecord], surplus: int, report: CycleReport) -> list[JobRecord]:
        """Give up ``surplus`` of this supervisor's leases (jobs with no open intent, so the next holder has
        nothing to resolve), so a supervisor that joined takes its share; returns the jobs still to supervise."""
        now = self.clock.now()
        released: set[str] = set()
        for job in sorted(jobs, key=lambda j: zlib.crc32(f"{self.owner}/{j.id}".encode()), reverse=True):
            if len(released) >= surplus:
                break
            lease = job.lease
            if lease is None or lease.owner != self.owner or job.open_intents():
                continue
            new = job.copy()
            new.lease = Lease(self.owner, lease.token, now)  # expired now: the next taker moves the token on
            event = Event(job.id, now, "lease", {"owner": None, "token": lease.token, "from": self.owner})
            try:
                self._check(job)
                self.records.update(new, [event], fence=lease.token)
                report.writes += 1
            except (Conflict, LostLease):
                report.conflicts += 1
            self._cache.pop(job.id, None)
            released.add(job.id)
        report.released = len(released)
        return [j for j in jobs if j.id not in released]

    def _renew(self, ours: list[JobHead], now: float, report: CycleReport) -> list[JobHead]:
        """Renew all of this supervisor's leases (``ours``: the heads of its unexpired ones) in ONE write (the
        cycle calls it once the earliest has half run out); returns those heads as they are after it."""
        expires = now + self.lease_ttl
        renewed = self.records.renew(cluster=self.cluster, owner=self.owner, now=now, expires_at=expires)
        report.writes += 1
        for job_id, version in renewed.items():
            job = self._cache.get(job_id)
            if job is not None and job.version == version - 1 and job.lease is not None:
                job.version = version
                job.lease = Lease(self.owner, job.lease.token, expires)
        return [JobHead(h.id, renewed[h.id], self.owner, expires) if h.id in renewed else h for h in ours]

    def _own(self, job: JobRecord, now: float, report: CycleReport) -> JobRecord | None:
        """The job under this supervisor's valid lease (taken as needed), or None if another holds it."""
        lease = job.lease
        if lease is not None and lease.owner == self.owner and now < lease.expires_at:
            return job  # renewed for all jobs at once (see _renew)
        if lease is not None and now < lease.expires_at:
            return None
        # free, or expired (ours included: an expired lease is never renewed in place, the token moves on)
        token = (lease.token if lease else 0) + 1
        new = job.copy()
        new.lease = Lease(self.owner, token, now + self.lease_ttl)
        new.updated_at = now
        previous = lease.owner if lease else None
        event = Event(job.id, now, "lease", {"owner": self.owner, "token": token, "from": previous})
        written = self.records.update(new, [event])  # compare-and-set on the version: one taker wins
        report.writes += 1
        if previous is not None and previous != self.owner:
            report.takeovers += 1
        self._seen.discard(job.id)
        return written

    def _check(self, job: JobRecord) -> None:
        """Raise LostLease unless ``job`` shows this supervisor's lease, unexpired on the clock."""
        lease = job.lease
        if lease is None or lease.owner != self.owner or self.clock.now() >= lease.expires_at:
            raise LostLease(f"job {job.id}: {self.owner} no longer holds the lease")

    def _fence(self, job: JobRecord) -> int | None:
        """The fencing token every write for ``job`` carries: its lease's (None without a lease)."""
        return None if job.lease is None else job.lease.token

    def _store(self, new: JobRecord, events: Sequence[Event], report: CycleReport) -> JobRecord:
        self._check(new)
        written = self.records.update(new, events, fence=self._fence(new))
        report.writes += 1
        return written

    def _commit(
        self,
        job: JobRecord,
        change: Callable[[JobRecord], tuple[JobRecord, list[Event]]],
        report: CycleReport,
        first: tuple[JobRecord, list[Event]] | None = None,
    ) -> JobRecord:
        """Apply ``change`` and write it; after a lost compare-and-set re-read, re-check the lease and retry.
        ``first``: ``change(job)`` already computed by the caller. The decisions the write shows carried out
        (:func:`~dispatch.supervise.carried.newly_carried_out`) are counted in ``report.carried_out`` (the
        resubmissions among them in ``report.resubmissions``, by cause), and the executions it records as stalled
        (:func:`~dispatch.supervise.stall.mark`'s events) in ``report.stalled``."""
        for attempt in range(3):
            new, events = first if first is not None and attempt == 0 else change(job)
            if new is job:
                return job
            try:
                written = self._store(new, events, report)
            except Conflict:
                report.conflicts += 1
                job = self.records.get(job.id)
                self._check(job)
                continue
            for d in newly_carried_out(job, written):
                report.carried_out[(d.action, d.rule)] += 1
                if d.action == "resubmit":
                    report.resubmissions[d.cause.value] += 1
            report.stalled += sum(1 for e in events if e.kind == STALLED)
            return written
        raise Conflict(f"job {job.id}: kept losing the compare-and-set")


__all__ = ["Leases", "LostLease"]
