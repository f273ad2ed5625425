"""The steady path: settled quiet jobs cost no record read, fold or next_step while nothing changes.

A job for which next_step said ``nothing`` last cycle is remembered as a :class:`Quiet` entry. When its current
submission is settled (:class:`~dispatch.supervise.fold.Settled`: a live object, no open intent, no stray, no
unknown clock running) and its record is still at the version this supervisor holds, the next cycle marks it
steady (:meth:`Steady._steady`): its record is not read again, and unless the cycle's observation differs from
what the record holds (:meth:`Observing._unchanged <dispatch.supervise.observation.Observing._unchanged>`) it is
not folded or asked about. Jobs are handled in the order of the heads whichever path they take
(:meth:`Steady._in_order`), so the decisions are the same as with ``steady=False``.
"""

from __future__ import annotations

from dataclasses import dataclass

from dispatch.outcome import Cause, State
from dispatch.records.base import Records
from dispatch.records.model import JobHead, JobRecord
from dispatch.supervise.fold import Settled


@dataclass(slots=True)
class Quiet:
    """A job for which next_step said ``nothing`` last cycle, as it was then (see :meth:`Acting._steps
    <dispatch.supervise.acting.Acting._steps>`). ``settled`` is its current submission's settled view, or None
    when it is not settled (then only the next_step call is skipped); ``key`` is its (state, cause) for the
    cycle report."""

    job: JobRecord
    settled: Settled | None
    key: tuple[State, Cause | None]


class Steady:
    """The steady-path part of :class:`~dispatch.supervise.Supervisor` (which sets these attributes)."""

    records: Records
    _cache: dict[str, JobRecord]
    _quiet: dict[str, Quiet]
    """The jobs (by id) for which next_step said ``nothing`` last cycle."""

    def _load(self, heads: list[JobHead], steady: list[Quiet]) -> list[JobRecord]:
        """The records of ``heads``: the copy this supervisor wrote or read last when its version is still the
        stored one, otherwise read (in one batch). So a steady cycle decodes only what others changed. The
        records of ``steady`` stay cached as they are (a quiet job's record is always the cached one); the
        cache lets go of every other job's."""
        cache = self._cache
        stale = [h.id for h in heads if (c := cache.get(h.id)) is None or c.version != h.version]
        fetched = {j.id: j for j in self.records.get_many(stale)} if stale else {}
        out = []
        for h in heads:
            job = fetched.get(h.id) or cache.get(h.id)
            if job is not None:
                cache[h.id] = job
                out.append(job)
        if len(cache) > len(steady) + len(out):  # jobs that are no longer this supervisor's, or closed
            keep = {q.job.id for q in steady} | {j.id for j in out}
            self._cache = {k: v for k, v in cache.items() if k in keep}
        return out

    def _steady(self, ours: list[JobHead]) -> tuple[list[Quiet | JobHead], list[Quiet], list[JobHead]]:
        """Mark this supervisor's leased heads that are steady (quiet last cycle, settled, and still at the version
        it held then: nothing but new evidence can change them). Returns ``ours`` in order with each steady head
        replaced by its entry, the steady entries, and the other heads."""
        quiet = self._quiet
        marks: list[Quiet | JobHead] = []
        steady: list[Quiet] = []
        rest: list[JobHead] = []
        for h in ours:
            q = quiet.get(h.id)
            if q is not None and q.settled is not None and q.job.version == h.version:
                steady.append(q)
                marks.append(q)
            else:
                rest.append(h)
                marks.append(h)
        return marks, steady, rest

    @staticmethod
    def _in_order(marks: list[Quiet | JobHead], room: list[JobHead], owned: list[JobRecord]) -> list[Quiet | JobRecord]:
        """The steady entries and the owned records in the order of the heads (``marks``, then ``room``), so
        jobs are supervised in the same order whichever path they take."""
        by_id = {j.id: j for j in owned}
        out: list[Quiet | JobRecord] = []
        for m in marks:
            if isinstance(m, Quiet):
                out.append(m)
            elif (job := by_id.get(m.id)) is not None:
                out.append(job)
        out += [job for h in room if (job := by_id.get(h.id)) is not None]
        return out


__all__ = ["Quiet", "Steady"]
