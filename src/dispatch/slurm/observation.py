"""Observation and history on Slurm: squeue's text listing first, JSON and sacct only for what it does not
settle, each job's evidence (its executions, holds and progress) and the first failing rank's code.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from dispatch.adapterkit.identity import execution_identity, submission_of
from dispatch.adapterkit.programs import program
from dispatch.capabilities import Capability
from dispatch.errors import DispatchError, NotFound, Unavailable
from dispatch.outcome import Evidence, State
from dispatch.slurm import errors as slurm_errors
from dispatch.slurm import progress, tasklines
from dispatch.slurm.arrayids import split as split_id
from dispatch.slurm.core import SlurmCore, _job_id, _node_names
from dispatch.slurm.mapping import Reading, accounting_settling, outcome_of
from dispatch.slurm.parse import (
    SACCT_TEXT_FIELDS,
    SQUEUE_TEXT_FIELDS,
    ParseError,
    SlurmJob,
    filter_jobs,
    parse_sacct,
    parse_sacct_text,
    parse_squeue,
    parse_squeue_text,
    text_settles,
)
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence, RankProgress

log = logging.getLogger("dispatch.slurm.backend")
ARRAY_PREFIX = "dspa-"
"""The start of a job array's name (:func:`dispatch.slurm.arrays.new_name`): its tasks' markers are in its map."""
FIRST_CODES_KEPT = 1024
"""Executions whose first failing rank :meth:`Observation.inspect_many` keeps (all forgotten when full)."""
SACCT_TEXT = program("dispatch.slurm", "sacct-text.sh")
"""``programs/sacct-text.sh``: 22.05's text ``sacct`` of the jobs ``$1``, the fields ``$2``."""


class _Observed(NamedTuple):
    """squeue's view of a job (None when gone) and sacct's executions (oldest first). A named tuple, not a
    frozen dataclass: one is built per job per cycle, and a tuple costs a third of one."""

    live: SlurmJob | None
    history: tuple[SlurmJob, ...]
    progress: Mapping[int, str] | None = None
    """The raw progress reports by rank, read in the same script as squeue (None: not read)."""


class Observation:
    """Backend.inspect and inspect_many (ProgressScope), from squeue and sacct."""

    def __init__(self, core: SlurmCore) -> None:
        self.core = core
        self._first_codes: dict[tuple[str, int], int | None] = {}  # (job id, restart) -> srun's first task code

    def observe(
        self, ids: Sequence[str], *, full: bool = False, progress_of: Collection[str] | None = ()
    ) -> dict[str, _Observed]:
        """squeue's and sacct's view of ``ids``. Cheap first: one text listing (:data:`SQUEUE_TEXT_FIELDS`)
        answers for every job it settles (:func:`text_settles`: running, or pending for a plain reason, in its
        first execution); JSON (and sacct) are asked only for the others, and sacct alone for the jobs the
        listing no longer shows. ``full``: JSON for every job (output paths, flags). ``progress_of``: the jobs
        whose progress to read with the listing, where they run and have reports (None: every job; the default
        none)."""
        try:
            jids = [_job_id(i) for i in ids]
            if not jids:
                return {}
            if full:
                return self._observe_json(jids)
            return self._observe_text_first(jids, progress_of)
        except ParseError as exc:  # unusable output: the read had no effect and tells nothing (never a crash)
            raise Unavailable(f"squeue/sacct: unusable output: {str(exc)[:300]}") from None

    def _observe_text_first(self, jids: list[str], progress_of: Collection[str] | None) -> dict[str, _Observed]:
        s = self.core.script()
        # one call: the listing, and the reports of the running jobs that have any (progress.OBSERVE)
        s.shell(
            progress.OBSERVE, ",".join(jids), SQUEUE_TEXT_FIELDS, self.core.progress_root(), progress.want(progress_of)
        )
        out = self.core.run(s, False)
        call = out.call(0)
        listing, reports = progress.split(call.stdout) if call is not None else ("", "")
        raw = progress.parse_reports(reports)
        rows: list[SlurmJob] = []
        if call is not None and call.status == 0:
            rows = parse_squeue_text(listing, self.core.slurm_release)
        elif call is None or "Invalid job id" not in call.stderr:
            stderr = call.stderr if call else ""
            raise slurm_errors.error_for("squeue", stderr, write=False, status=call.status if call else None)
        wanted = set(jids)
        listed = {j.job_id: j for j in rows if j.job_id in wanted}
        result = {jid: _Observed(job, ()) for jid, job in listed.items() if text_settles(job)}
        unsettled = [j for j in jids if j in listed and j not in result]
        gone = [j for j in jids if j not in listed]
        if unsettled:
            result.update(self._observe_json(unsettled))
        if gone and self.core.caps[Capability.ACCOUNTING_HISTORY].yes:
            for jid, history in self.history(gone).items():
                if jid in wanted and history:
                    result[jid] = _Observed(None, tuple(history))
        return {j: result[j]._replace(progress=raw[j]) if j in raw else result[j] for j in jids if j in result}

    def _observe_json(self, jids: list[str]) -> dict[str, _Observed]:
        s = self.core.script()
        if self.core.dialect == "v0.0.38":
            s.call(["squeue", "--json"])  # ignores filters: filtered here
        else:
            s.call(["squeue", "--json", "-t", "all", "-j", ",".join(jids)])
        out = self.core.run(s, False)
        call = out.call(0)
        live: dict[str, SlurmJob] = {}
        if call is not None and call.status == 0:
            _, jobs = parse_squeue(call.stdout)
            live = {j.job_id: j for j in filter_jobs(jobs, ids=jids)}
        elif call is None or "Invalid job id" not in call.stderr:
            # one purged id makes squeue fail with "Invalid job id" (no JSON): that alone means "not live"
            stderr = call.stderr if call else ""
            raise slurm_errors.error_for("squeue", stderr, write=False, status=call.status if call else None)
        need_history = [j for j in jids if j not in live or (live[j].restart_cnt or 0) > 0 or live[j].state == "FAILED"]
        history = (
            self.history(need_history) if need_history and self.core.caps[Capability.ACCOUNTING_HISTORY].yes else {}
        )
        return {j: _Observed(live.get(j), tuple(history.get(j, ()))) for j in jids if j in live or history.get(j)}

    def history(self, jids: Sequence[str]) -> dict[str, list[SlurmJob]]:
        """sacct's executions of ``jids``. An array task is asked with its array (sacct names a task still held
        in the array's record only so), and one the array's accounting no longer holds at all, neither in the
        array's record nor in one of its own, reads as cancelled (:func:`_dropped_task`)."""
        arrays_asked = sorted({a for a, t in map(split_id, jids) if t is not None})
        asked = ",".join([*jids, *arrays_asked])
        s = self.core.script()
        if self.core.dialect == "v0.0.38":
            s.shell(SACCT_TEXT, asked, SACCT_TEXT_FIELDS)
        else:
            s.call(["sacct", "--json", "-D", "-j", asked])
        out = self.core.run(s, False)
        call = self.core.need(out, 0, "sacct", write=False)
        if self.core.dialect == "v0.0.38":
            jobs = parse_sacct_text(call.stdout, self.core.slurm_release)
        else:
            _, jobs = parse_sacct(call.stdout)
        by: dict[str, list[SlurmJob]] = {}
        for j in jobs:
            by.setdefault(j.job_id, []).append(j)
        for lst in by.values():
            lst.sort(key=lambda j: (j.restart_cnt or 0, j.submit_time or 0))
        for jid in jids:
            if jid not in by:
                dropped = _dropped_task(jid, jobs)
                if dropped is not None:
                    by[jid] = [dropped]
        return by

    def _evidence_of(
        self, jid: str, obs: _Observed, memo: dict[tuple[object, ...], Reading] | None = None
    ) -> JobEvidence:
        """The evidence of one job. ``memo`` shares readings between jobs whose records map alike within one
        observation (thousands of gated jobs are one reading)."""
        now = self.core.clock.now()
        live = obs.live
        if live is not None and not obs.history and memo is not None and live.state != "FAILED":
            return self._listed_evidence(jid, live, obs.progress, now, memo)
        marker_job = obs.live or obs.history[-1]
        submission = submission_of(marker_job.name)  # an array task's name is its array's: submission 1
        executions: list[ExecutionEvidence] = []
        seen: set[int] = set()
        for rec in obs.history:
            r = rec.restart_cnt or 0
            if obs.live is not None and r >= (obs.live.restart_cnt or 0):
                continue
            seen.add(r)
            executions.append(self._execution(jid, submission, rec, r, self._reading(rec, "sacct", now, memo)))
        current = obs.live or obs.history[-1]
        r = current.restart_cnt or 0
        same = [h for h in obs.history if (h.restart_cnt or 0) == r]
        if obs.live is not None and same and (same[-1].step_states or same[-1].step_exit_code):
            current = replace(current, step_states=same[-1].step_states, step_exit_code=same[-1].step_exit_code)
        if (
            obs.live is not None
            and self.core.caps[Capability.ACCOUNTING_HISTORY].yes
            and accounting_settling(obs.live, same[-1] if same else None, now)
        ):
            current = replace(current, state="", flags=current.flags | {"COMPLETING"})  # read as running
        source = "squeue" if obs.live is not None else "sacct"
        reading = self._reading(current, source, now, memo)
        if r not in seen:
            executions.append(self._execution(jid, submission, current, r, reading))
        executions.sort(key=lambda e: e.restart)
        if obs.progress and executions and executions[-1].outcome.state is State.RUNNING:
            cur = executions[-1]
            executions[-1] = replace(cur, progress=progress.reports_of(obs.progress, cur.identity, self.core.offset))
        return JobEvidence(
            scheduler_id=jid,
            marker=None if marker_job.name.startswith(ARRAY_PREFIX) else (marker_job.name or None),
            outcome=reading.outcome,
            gate=Gate.CLOSED if reading.gate_closed else Gate.OPEN,
            holds=(self.core.hold_name(reading.hold),) if reading.hold else (),
            foreign_holds=(reading.foreign_hold,) if reading.foreign_hold else (),
            executions=tuple(executions),
        )

    def _listed_evidence(
        self,
        jid: str,
        live: SlurmJob,
        raw: Mapping[int, str] | None,
        now: float,
        memo: dict[tuple[object, ...], Reading],
    ) -> JobEvidence:
        """:meth:`_evidence_of` of a job the listing alone shows (no accounting history; not ``FAILED``, so no
        accounting to wait for): its one execution built directly. What most of a cycle's jobs take, so it
        builds each object once (a supervisor of 10,000 jobs reads this 10,000 times a cycle)."""
        reading = self._reading(live, "squeue", now, memo)
        outcome = reading.outcome
        name = live.name
        restart = live.restart_cnt or 0
        # the id was checked on the way in (_job_id), the submission is >= 1 and the restart count is Slurm's
        identity = f"{submission_of(name)}.{jid}.{restart}" if restart >= 0 else execution_identity(1, jid, restart)
        reports: tuple[RankProgress, ...] = ()
        if raw and outcome.state is State.RUNNING:
            reports = progress.reports_of(raw, identity, self.core.offset)
        if outcome.state.waiting or not live.nodes:
            execution = ExecutionEvidence(identity, restart, outcome, progress=reports)
        else:
            off = self.core.offset
            start = live.start_time
            end = live.end_time
            execution = ExecutionEvidence(
                identity,
                restart,
                outcome,
                started_at=start - off if start and start < 4e9 else None,
                ended_at=end - off if outcome.state.ended and end and end < 4e9 else None,
                nodes=_node_names(live.nodes),
                progress=reports,
            )
        return JobEvidence(
            scheduler_id=jid,
            marker=None if name.startswith(ARRAY_PREFIX) else (name or None),
            outcome=outcome,
            gate=Gate.CLOSED if reading.gate_closed else Gate.OPEN,
            holds=(self.core.hold_name(reading.hold),) if reading.hold else (),
            foreign_holds=(reading.foreign_hold,) if reading.foreign_hold else (),
            executions=(execution,),
        )

    @staticmethod
    def _reading(rec: SlurmJob, source: str, now: float, memo: dict[tuple[object, ...], Reading] | None) -> Reading:
        if memo is None:
            return outcome_of(rec, Evidence(source, now))
        key = (source, rec.state, rec.flags, rec.reason, rec.description, rec.eligible_time, rec.restart_cnt,
               rec.start_time is None, rec.exit_code, rec.signal, rec.step_states, rec.step_exit_code)  # fmt: skip
        reading = memo.get(key)
        if reading is None:
            reading = memo[key] = outcome_of(rec, Evidence(source, now))
        return reading

    def _execution(self, jid: str, n: int, rec: SlurmJob, restart: int, reading: Reading) -> ExecutionEvidence:
        off = self.core.offset
        outcome = reading.outcome
        # Slurm fills start_time with an estimate while pending, and with the cancel time for a job cancelled
        # before it ran: only an execution that left the waiting states with nodes allocated has started. A
        # running job's end_time is Slurm's projection from its time limit: only an ended one has an end.
        ran = not outcome.state.waiting and bool(rec.nodes)
        if not ran:
            return ExecutionEvidence(execution_identity(n, jid, restart), restart, outcome)
        return ExecutionEvidence(
            identity=execution_identity(n, jid, restart),
            restart=restart,
            outcome=outcome,
            started_at=rec.start_time - off if rec.start_time and rec.start_time < 4e9 else None,
            ended_at=rec.end_time - off if outcome.state.ended and rec.end_time and rec.end_time < 4e9 else None,
            nodes=_node_names(rec.nodes),
        )

    def inspect(self, scheduler_id: str) -> JobEvidence:
        got = self.inspect_many([scheduler_id])
        jid = _job_id(scheduler_id)
        if jid not in got:
            raise NotFound(
                f"Slurm job {jid} is not in squeue"
                + ("" if self.core.caps[Capability.ACCOUNTING_HISTORY].yes else " and there is no accounting to ask")
            )
        return got[jid]

    def scopes_progress(self) -> bool:
        """True: :meth:`inspect_many` takes ``progress_of`` (:class:`~dispatch.spi.ProgressScope`)."""
        return True

    def inspect_many(
        self, scheduler_ids: Sequence[str], *, progress_of: Collection[str] | None = None
    ) -> Mapping[str, JobEvidence]:
        """The evidence of ``scheduler_ids`` in one script (more only for jobs the text listing does not settle).
        Progress is read where it can exist and is wanted: the running executions of ``progress_of`` (None: of
        every job) that have reports (:mod:`dispatch.slurm.progress`)."""
        memo: dict[tuple[object, ...], Reading] = {}
        observed = self._with_first_failures(self.observe(scheduler_ids, progress_of=progress_of))
        return {j: self._evidence_of(j, o, memo) for j, o in observed.items()}

    def _with_first_failures(self, observed: dict[str, _Observed]) -> dict[str, _Observed]:
        """Each execution whose srun step failed carries the code of its first failing rank, as srun logged it
        (:mod:`~dispatch.slurm.tasklines`), instead of accounting's highest one. One script reads the srun lines
        of every such execution not read before; an execution's lines are final once its step has ended, so each
        is read once. Only a FAILED execution is read (the mapping reports a step's code for no other). If the read
        fails, accounting's code stands (the fold keeps the first reading of an end)."""
        failed: set[tuple[str, int]] = set()
        for jid, obs in observed.items():
            records = (*obs.history, *((obs.live,) if obs.live is not None else ()))
            ended_failed = {rec.restart_cnt or 0 for rec in records if rec.state == "FAILED"}
            failed.update(
                (jid, r) for rec in records if rec.step_exit_code and (r := rec.restart_cnt or 0) in ended_failed
            )
        unread = sorted(failed - self._first_codes.keys())
        if unread:
            s = self.core.script()
            s.shell(tasklines.READ, self.core.pointer("")[:-1], *(f"{jid}:{r}" for jid, r in unread))
            try:
                call = self.core.need(self.core.run(s, False), 0, "read srun's task lines", write=False)
            except DispatchError as exc:
                log.info("srun's task lines not read (accounting's step codes stand): %s", exc)
            else:
                if len(self._first_codes) + len(unread) > FIRST_CODES_KEPT:
                    self._first_codes.clear()
                read = tasklines.first_exit_codes(call.stdout)
                self._first_codes.update({key: read.get(key) for key in unread})

        def first(jid: str, rec: SlurmJob) -> SlurmJob:
            key = (jid, rec.restart_cnt or 0)
            code = self._first_codes.get(key) if key in failed else None
            return replace(rec, step_exit_code=code) if code else rec

        if not failed:
            return observed
        touched = {jid for jid, _ in failed}
        return {
            jid: obs._replace(
                live=first(jid, obs.live) if obs.live is not None else None,
                history=tuple(first(jid, h) for h in obs.history),
            )
            if jid in touched
            else obs
            for jid, obs in observed.items()
        }


def _dropped_task(jid: str, accounted: Sequence[SlurmJob]) -> SlurmJob | None:
    """The reading of array task ``jid`` when sacct holds its array (``accounted``: every row of it, the tasks
    still in the array's record each named) but not the task: cancelled before it started. Slurm drops a task
    without a trace in no other way: one cancelled while it waits in the array's record leaves it, and on 24.11
    and 26.05 one cancelled while it waits in a record of its own never reaches accounting (squeue shows it
    CANCELLED for ``MinJobAge``, then forgets it), where a task that started has its own row. None for a plain
    job, or a task whose array sacct does not know (yet)."""
    array, task = split_id(jid)
    if task is None:
        return None
    rows = [j for j in accounted if split_id(j.job_id)[0] == array]
    if not rows:
        return None
    first = min(rows, key=lambda j: j.submit_time or 0)
    return SlurmJob(
        job_id=jid,
        name=first.name,
        state="CANCELLED",
        flags=frozenset(),
        description="cancelled before it started: its array's accounting holds no record of it",
        restart_cnt=0,
        submit_time=first.submit_time,
        source="sacct",
        release=first.release,
    )
