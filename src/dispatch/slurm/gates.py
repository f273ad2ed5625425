"""Gates and holds on Slurm: opening dispatch's start gate (``scontrol release``, a batch per script), a
supervisor's hold as a begin time (:mod:`dispatch.slurm.holds`), and requeue.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dispatch.adapterkit.fanout import spread
from dispatch.adapterkit.programs import program
from dispatch.capabilities import CapabilityAnswer, no
from dispatch.errors import DispatchError, NotFound, OutcomeUnknown, Rejected, Unavailable
from dispatch.slurm import errors as slurm_errors
from dispatch.slurm.arrayids import ArrayIdError, text_ids
from dispatch.slurm.arrayids import split as split_id
from dispatch.slurm.core import SlurmCore, _job_id
from dispatch.slurm.holds import HOLD_BASE, HOLD_SPAN, decode_hold, encode_hold
from dispatch.slurm.scripts import Script, ScriptOutput

OPEN_BATCH = 1000
"""Gates per script in :meth:`Gates.open_many` (an array's tasks kept together where they fit)."""
OPEN_GATES = program("dispatch.slurm", "open-gates.sh")
"""``programs/open-gates.sh``: opens dispatch's gate on the jobs ``$1`` (comma-separated) with one ``squeue`` and one
``scontrol release`` per job array (``<array>_[<tasks>]``, :data:`RANGES` ``$2``) and one for the plain jobs: prints
``<id> release|open|admin`` per job squeue knows (admin: an administrator's hold, never lifted); exit 2 when a
release failed (each line of its message on stderr after the ids it named). Slurm releases the tasks an array still
holds in its own record as that one record when one expression names them all; named one by one, each task would
first be split off into a job record of its own (the controller's cost of a submission, per task)."""
RELEASE_GATES = program("dispatch.slurm", "release-gates.sh")
"""``programs/release-gates.sh``: :data:`OPEN_GATES` without the ``squeue``, for a caller whom Slurm forbids to lift
an administrator's hold (:meth:`Gates.lifts_admin_holds`): Slurm's own refusal says which job carries one."""
ADMIN_LEVEL = 'sacctmgr -n -P show user "$1" format=adminlevel'
ADMIN_LEVEL_TTL = 60.0
"""Seconds the accounting database's "may not lift an administrator's hold" holds before it is asked again."""
RANGES = program("dispatch.slurm", "ranges.awk")
"""``programs/ranges.awk``: awk over job ids sorted by array and task (``-F_``): one ``<array>_[<ranges>]`` per
array, then the plain ids comma-separated."""
_FOR_JOB = re.compile(r"for job (\d+(?:_\d+)?)")
_FOR_TASKS = re.compile(r"(\d+)_\[?([0-9,-]+)\]?: (.*)")
"""scontrol's answer per range of an array expression's tasks, ``<array>_<ranges>: <message>``: for
``scontrol release 20261_[1-5]`` of a held array of tasks 1-3, 22.05 and 24.11 print ``20261_1-3: No error`` and
``20261_4-5: Invalid job id specified``, 26.05 the ranges in brackets (``16895_[1-3]: No error``), and all exit 1."""
_EXPRESSION = re.compile(r"[0-9_,\[\]-]+")
_READ_HOLD = program("dispatch.slurm", "read-hold.sh") + "\n"
HOLD_SCRIPT = _READ_HOLD + program("dispatch.slurm", "hold.sh")
"""Hold job ``$1`` with begin time ``$2`` (hold codes lie in [``$3``, ``$4``)): exit 4 not waiting (prints the
state), exit 5 another hold (prints its begin time)."""
RELEASE_SCRIPT = _READ_HOLD + program("dispatch.slurm", "release-hold.sh")
"""Lift hold ``$2`` from job ``$1`` if it carries it; exit 5 when it carries another."""


class Gates:
    """Gate, Holder and Requeuer."""

    def __init__(self, core: SlurmCore) -> None:
        self.core = core
        self._lifts_admin: bool | None = None
        self._not_admin_since: float | None = None  # when accounting last said this caller may not lift one

    def lifts_admin_holds(self) -> bool | None:
        """Whether Slurm lets this caller lift an administrator's hold (then opening a gate must first read the
        job's hold, as :data:`OPEN_GATES` does): root, the SlurmUser, or an Operator or Administrator in the
        accounting database. Without accounting only the first two are. None until the database has answered:
        the first opening asks it (``sacctmgr``, a call of the same script, which then reads the holds first
        as for a privileged caller); an answer that cannot be read counts as yes. The database's no holds for
        :data:`ADMIN_LEVEL_TTL` seconds, then the next opening asks again: an administrator may make the caller
        an Operator meanwhile, and an opening without the read would then lift an administrator's hold."""
        if self._not_admin_since is not None and self.core.clock.now() - self._not_admin_since > ADMIN_LEVEL_TTL:
            self._lifts_admin = self._not_admin_since = None
        if self._lifts_admin is None:
            user = self.core.facts.user
            slurm_user = self.core.facts.config.get("SlurmUser", "").split("(")[0].strip()
            if user in ("root", slurm_user) or not user:
                self._lifts_admin = True
            elif not self.core.facts.accounting_configured:
                self._lifts_admin = False
        return self._lifts_admin

    def _admin_level(self, out: ScriptOutput, index: int, asked_at: float) -> None:
        """Read the caller's admin level from call ``index`` of ``out`` (:meth:`lifts_admin_holds`), asked at
        ``asked_at``."""
        call = out.call(index)
        if call is not None and call.status is not None:
            level = call.stdout.strip().lower() if call.ok else ""
            self._lifts_admin = level not in ("none", "not set")
            self._not_admin_since = None if self._lifts_admin else asked_at

    def open(self, scheduler_id: str) -> None:
        error = self.open_many([scheduler_id])[0]
        if error is not None:
            raise error

    def open_many(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        """Open every gate with one ``squeue`` and one ``scontrol release`` per job array and one for the plain
        jobs, per :data:`OPEN_BATCH` ids (:data:`OPEN_GATES`; an array's tasks go in one script where they fit,
        so the tasks its record still holds are released as that one record): release a job held by its user
        (dispatch's gate), refuse one held by an administrator (Rejected), leave any other alone (already open);
        a job squeue no longer knows is NotFound."""
        self.core.writable()
        answers: list[DispatchError | None] = [None] * len(scheduler_ids)
        for chunk in _open_chunks(scheduler_ids, OPEN_BATCH):
            for k, answer in zip(chunk, self._open_chunk([scheduler_ids[k] for k in chunk]), strict=True):
                answers[k] = answer
        return answers

    def _open_chunk(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        jids: list[str | NotFound] = []
        for sid in scheduler_ids:
            try:
                jids.append(_job_id(sid))
            except NotFound as exc:
                jids.append(exc)
        valid = [j for j in jids if isinstance(j, str)]
        if not valid:
            return [j if isinstance(j, NotFound) else None for j in jids]
        lifts = self.lifts_admin_holds()
        direct = lifts is False
        s = self.core.script()
        asked_at = self.core.clock.now()
        if lifts is None:
            s.shell(ADMIN_LEVEL, self.core.facts.user)
        index = s.shell(RELEASE_GATES if direct else OPEN_GATES, ",".join(valid), RANGES)
        try:
            out = self.core.run(s, True, partial=True)
        except (Unavailable, OutcomeUnknown) as exc:
            return [j if isinstance(j, NotFound) else e for j, e in zip(jids, spread(exc, len(jids)), strict=True)]
        if lifts is None:
            self._admin_level(out, 0, asked_at)
        call = out.call(index)
        if call is not None and call.status not in (0, 2, None):
            err = slurm_errors.error_for("open", call.stderr or call.stdout, write=True, status=call.status)
            return [j if isinstance(j, NotFound) else e for j, e in zip(jids, spread(err, len(jids)), strict=True)]
        failed = _release_failures(call.stderr if call is not None else "")
        seen: dict[str, str] = {}
        if direct:
            seen = {jid: _released(failed.get(jid)) for jid in valid if call is not None and call.status is not None}
            failed = {jid: failed[jid] for jid, what in seen.items() if what == "release" and jid in failed}
            seen = {jid: what for jid, what in seen.items() if what != "gone"}
        for line in (call.stdout if call is not None else "").splitlines():
            parts = line.split()
            if len(parts) == 2:
                seen[parts[0]] = parts[1]
        answers: list[DispatchError | None] = []
        for jid in jids:
            if isinstance(jid, NotFound):
                answers.append(jid)
            elif call is None or call.status is None:  # cut: only what was printed is known
                what = seen.get(jid)
                answers.append(None if what == "open" else OutcomeUnknown(f"open {jid}: the script was cut"))
            elif jid not in seen:
                answers.append(NotFound(f"Slurm job {jid} is not in squeue"))
            elif seen[jid] == "admin":
                answers.append(
                    Rejected(f"job {jid} is held by an administrator (JobHeldAdmin); dispatch never releases it")
                )
            elif seen[jid] == "release" and jid in failed:
                answers.append(slurm_errors.error_for(f"open {jid}", failed[jid], write=True, status=1))
            else:
                answers.append(None)
        return answers

    def hold(self, scheduler_id: str, instance: str) -> None:
        """One script reads the job (``squeue``) and, if it is waiting and carries no other hold, sets the
        hold's start time: the read and the update are one round trip apart no more (Slurm has no
        compare-and-set; what is left is the gap between two commands on the login node)."""
        self.core.writable()
        jid = _job_id(scheduler_id)
        s = self.core.script()
        s.shell(HOLD_SCRIPT, jid, str(encode_hold(instance)), str(HOLD_BASE), str(HOLD_BASE + HOLD_SPAN))
        self._hold_answer(s, jid, instance, "hold")
        self.core.book.remember(instance)

    def release(self, scheduler_id: str, instance: str) -> None:
        """One script: lift the hold if it is ``instance``'s (``StartTime=now``); no hold is a no-op, another
        instance's hold is Rejected."""
        self.core.writable()
        jid = _job_id(scheduler_id)
        s = self.core.script()
        s.shell(RELEASE_SCRIPT, jid, str(encode_hold(instance)), str(HOLD_BASE), str(HOLD_BASE + HOLD_SPAN))
        self._hold_answer(s, jid, instance, "release")

    def _hold_answer(self, s: Script, jid: str, instance: str, what: str) -> None:
        out = self.core.run(s, True)
        call = out.call(0)
        if call is not None and call.status == 4:
            state = call.stdout.strip().lower() or "not pending"
            raise Rejected(f"job {jid} is {state}: the job is no longer pending")
        if call is not None and call.status == 5:
            other = decode_hold(float(call.stdout.strip())) if call.stdout.strip().isdigit() else None
            shown = self.core.hold_name(other) if other else "another hold"
            verb = "already carries" if what == "hold" else "carries"
            raise Rejected(f"job {jid} {verb} hold {shown}" + ("" if what == "hold" else f", not {instance}"))
        self.core.need(out, 0, f"{what} {jid}", write=True)

    def requeue(self, scheduler_id: str) -> None:
        """Two steps in one script: enable requeue (``Requeue=1``), then ``scontrol requeue``; then disable it
        again for the next execution. A cut between the steps raises OutcomeUnknown: the restart count either
        moved or it did not, and a later requeue repeats both steps safely."""
        self.core.writable()
        jid = _job_id(scheduler_id)
        s = self.core.script()
        s.call(["scontrol", "update", f"JobId={jid}", "Requeue=1"])
        s.call(["scontrol", "requeue", jid])
        s.call(["scontrol", "update", f"JobId={jid}", "Requeue=0"])
        out = self.core.run(s, True)
        self.core.need(out, 0, f"enable requeue of {jid}", write=True)
        self.core.need(out, 1, f"requeue {jid}", write=True)

    def requeue_after_end(self) -> CapabilityAnswer:
        """No: an ended job cannot be requeued, so a requeue rule is refused at load (see :class:`Requeuer`)."""
        return no(
            "Slurm refuses to requeue a job that has ended when it was submitted with --no-requeue ('Job has "
            "already finished'), and dispatch submits every job so, so that Slurm never requeues one by itself; "
            "rules act on ended executions, so use resubmit (a running job can still be requeued)"
        )


def _open_chunks(scheduler_ids: Sequence[str], size: int) -> list[list[int]]:
    """The positions of ``scheduler_ids`` in scripts of at most ``size`` ids, each array's tasks together (in the
    order of their first), an array larger than ``size`` cut into runs of ``size``."""
    groups: dict[str, list[int]] = {}
    for k, sid in enumerate(scheduler_ids):
        array, task = split_id(str(sid).strip())
        groups.setdefault(array if task is not None else "", []).append(k)
    plain = groups.pop("", [])
    chunks: list[list[int]] = []
    current: list[int] = []
    for members in [*groups.values(), *[[k] for k in plain]]:
        for first in range(0, len(members), size):
            run = members[first : first + size]
            if current and len(current) + len(run) > size:
                chunks.append(current)
                current = []
            current.extend(run)
    if current:
        chunks.append(current)
    return chunks


def _released(message: str | None) -> str:
    """What a release's answer says of a job, in :data:`OPEN_GATES`'s words: ``release`` (released, or failed
    otherwise: ``message`` is the error), ``open`` (it had ended: nothing to open), ``admin`` (Slurm refused:
    an administrator's hold), ``gone`` (Slurm knows no such job)."""
    if message is None:
        return "release"
    if "Invalid job id specified" in message:
        return "gone"
    if "Job has already finished" in message:
        return "open"
    if "Access/permission denied" in message:
        return "admin"
    return "release"


def _release_failures(stderr: str) -> dict[str, str]:
    """The jobs whose release failed, from :data:`OPEN_GATES`'s stderr (``<expression> <message>`` per line):
    the job a message names (``... for job <id>``), or the tasks of an array's range (:data:`_FOR_TASKS`; its
    ``No error`` released them); a message that names none (``slurm_suspend error: ...``, the summary scontrol
    adds) stands for every job of its expression only when no line named one of them."""
    failed: dict[str, str] = {}
    named_in: set[str] = set()
    general: list[tuple[str, str]] = []
    for line in stderr.splitlines():
        expr, _, message = line.partition(" ")
        if not _EXPRESSION.fullmatch(expr):
            expr, message = "", line
        named = _FOR_JOB.search(message)
        tasks = _FOR_TASKS.match(message)
        if named is not None:
            failed[named.group(1)] = message
            named_in.add(expr)
        elif tasks is not None:  # an array's tasks, as scontrol answers an array expression: each range its own line
            named_in.add(expr)
            said = tasks.group(3).strip()
            if said == "No error":  # released: scontrol still prints the line (and exits 1 for any other)
                continue
            try:
                ids = text_ids(f"{tasks.group(1)}_[{tasks.group(2)}]")
            except ArrayIdError:
                general.append((expr, message))
                continue
            for jid in ids:
                failed[jid] = said
        else:
            general.append((expr, message))
    for expr, message in general:
        if expr in named_in:
            continue
        for part in re.findall(r"\d+_\[[^\]]*\]|[^,]+", expr):
            try:
                ids = text_ids(part)
            except ArrayIdError:
                continue
            for jid in ids:
                failed.setdefault(jid, message)
    return failed
