"""Parsing Slurm's answers into one internal job record, whatever the release.

The JSON dialect is the one the output declares (``meta.plugin.data_parser``, or ``meta.plugin.type`` for the
openapi plugins of 22.05); only output that declares nothing falls back to the release's era
(:func:`dialect_of`). The dialects differ where it matters:

* 22.05: openapi v0.0.38 (``meta.Slurm.release``): ``job_state`` is one string in which a flag replaces the
  base state (``"COMPLETING"``), times are plain integers (0 = unset), ``exit_code`` is a raw wait status.
  Its ``squeue --json`` ignores every filter, so callers filter by id or name here. Its ``sacct --json``
  reports every normal exit as 0, so sacct is read as text on 22.05 (:func:`parse_sacct_text`).
* 23.02: data_parser v0.0.39: numbers are ``{"set", "infinite", "number"}`` objects, and squeue's
  ``exit_code`` is such an object holding the raw wait status.
* 23.11 to 26.05: data_parser v0.0.40 to v0.0.45: ``exit_code`` is ``{"status", "return_code", "signal"}``.
* 25.11: data_parser v0.0.44 and 26.05: v0.0.45 (``meta.slurm.release``): ``job_state`` is a list (base
  state and flags), numbers are ``{"set", "infinite", "number"}`` objects, ``exit_code`` is
  ``{"status": [...], "return_code": {...}, "signal": {...}}``.

Also: ``scontrol show config`` (``Key = value`` lines, durations ``N sec``), and sbatch's ``--parsable``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dispatch.slurm import arrayids
from dispatch.slurm.arrayids import is_scheduler_id

BASE_STATES = frozenset(
    {
        "PENDING",
        "RUNNING",
        "SUSPENDED",
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
        "REQUEUED",  # sacct's state of an execution ended by a requeue
        "REVOKED",
    }
)


class ParseError(ValueError):
    """Slurm's output did not have the expected shape."""


@dataclass(slots=True)
class SlurmJob:
    """One job (squeue) or one execution (sacct), in release-independent form. Treated as immutable (change
    one with :func:`dataclasses.replace`); not frozen because an observation builds thousands of them and a
    frozen dataclass costs three times as much to build."""

    job_id: str
    name: str
    state: str
    """The base state (``PENDING`` ...); empty when 22.05 printed only a flag."""
    flags: frozenset[str]
    reason: str = ""
    description: str = ""
    restart_cnt: int | None = None
    priority: int | None = None
    submit_time: float | None = None
    eligible_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    nodes: str = ""
    stdout: str = ""
    stderr: str = ""
    stdout_expanded: str = ""
    stderr_expanded: str = ""
    requeue: bool | None = None
    source: str = "squeue"
    release: str = ""
    step_states: frozenset[str] = frozenset()
    """States of the execution's steps (sacct): a step OUT_OF_MEMORY under a FAILED job means OOM."""
    step_exit_code: int | None = None
    """The exit code of the first srun step (``<id>.<n>``, sacct) that exited non-zero: the ranks' own code,
    where the job's is the batch shell's (srun's, or the SIGTERM it died of when Slurm ended the other ranks).
    Slurm's is the highest of the ranks' codes; the backend replaces it with the first failing rank's where srun's
    task lines name it (:mod:`dispatch.slurm.tasklines`)."""
    extra: Mapping[str, Any] = field(default_factory=dict)


def release_of(doc: Mapping[str, Any]) -> str:
    """The Slurm release named in a JSON document's ``meta`` block (``"22.05.8"``, ``"26.05.5"``)."""
    meta = doc.get("meta") or {}
    for key in ("slurm", "Slurm"):
        block = meta.get(key)
        if isinstance(block, Mapping) and block.get("release"):
            return str(block["release"])
    raise ParseError("the JSON has no meta.slurm.release")


def dialect_of(release: str) -> str:
    """The default JSON dialect of a release: ``v0.0.38`` for 22.05, ``v0.0.39`` 23.02, ``v0.0.40`` 23.11,
    ``v0.0.41`` 24.05, ``v0.0.42`` 24.11, ``v0.0.43`` 25.05, ``v0.0.44`` 25.11, ``v0.0.45`` 26.05 and later.
    Used only for output that declares no dialect (:func:`declared_dialect`)."""
    version = _version(release)
    for upto, dialect in RELEASE_DIALECTS:
        if version < upto:
            return dialect
    return "v0.0.45"


RELEASE_DIALECTS = (
    ((23, 2), "v0.0.38"),
    ((23, 11), "v0.0.39"),
    ((24, 5), "v0.0.40"),
    ((24, 11), "v0.0.41"),
    ((25, 5), "v0.0.42"),
    ((25, 11), "v0.0.43"),
    ((26, 5), "v0.0.44"),
)
_DIALECT_RE = re.compile(r"v(\d+)\.(\d+)\.(\d+)")


def declared_dialect(doc: Mapping[str, Any]) -> str | None:
    """The dialect a JSON document declares in ``meta.plugin`` (``data_parser``, else the openapi ``type``),
    as ``"v0.0.NN"``; None when it declares none."""
    meta = doc.get("meta") or {}
    for key in ("plugin", "plugins"):
        block = meta.get(key)
        if not isinstance(block, Mapping):
            continue
        for field_name in ("data_parser", "type"):
            value = block.get(field_name)
            m = _DIALECT_RE.search(value) if isinstance(value, str) else None
            if m:
                return m.group(0)
    return None


def dialect_of_doc(doc: Mapping[str, Any], release: str) -> str:
    """The document's declared dialect, or the release's default when it declares none."""
    return declared_dialect(doc) or dialect_of(release)


def raw_exit_status(dialect: str) -> bool:
    """Whether squeue's ``exit_code`` is a raw wait status in this dialect (v0.0.38 and v0.0.39)."""
    m = _DIALECT_RE.fullmatch(dialect)
    if m is None:
        return False
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) <= (0, 0, 39)


def _version(release: str) -> tuple[int, int]:
    parts = release.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise ParseError(f"not a Slurm release: {release!r}") from None


def has_restart_pattern(release: str) -> bool:
    """Whether ``%r`` (restart count) works in ``--output``/``--error`` (25.11 and later)."""
    return _version(release) >= (25, 11)


def has_export_nil(release: str) -> bool:
    """Whether ``--export=NIL`` exists (23.02 and later; 22.05 uses NONE)."""
    return _version(release) >= (23, 2)


def _num(value: Any) -> int | None:
    """A number from either dialect: plain int (0 = unset for times), or a set/infinite/number object."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, Mapping):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        n = value.get("number")
        return int(n) if isinstance(n, int | float) else None
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def _time(value: Any) -> float | None:
    n = _num(value)
    return float(n) if n else None


def _states(value: Any) -> tuple[str, frozenset[str]]:
    items = [value] if isinstance(value, str) else list(value or [])
    words = [str(s).upper() for s in items]
    base = next((w for w in words if w in BASE_STATES), "")
    return base, frozenset(w for w in words if w != base)


def decode_wait_status(status: int) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait status (squeue's ``exit_code`` in v0.0.38 and v0.0.39).

    The rule for every source: a signal-killed execution has a signal and no exit code; one that exited has an
    exit code and no signal."""
    sig = status & 0x7F
    if sig == 0:
        return (status >> 8) & 0xFF, None
    return None, sig


def _exit(value: Any, raw_status: bool) -> tuple[int | None, int | None]:
    if value is None:
        return None, None
    if isinstance(value, int) and not isinstance(value, bool):
        return decode_wait_status(value) if raw_status else (value, None)
    if isinstance(value, Mapping) and "number" in value and "status" not in value:  # v0.0.39's number object
        n = _num(value)
        if n is None:
            return None, None
        return decode_wait_status(n) if raw_status else (n, None)
    if isinstance(value, Mapping):
        status = value.get("status")
        statuses = {str(s).upper() for s in ([status] if isinstance(status, str) else (status or []))}
        sig_block = value.get("signal") or {}
        sig = _num(sig_block.get("id")) if "id" in sig_block else _num(sig_block.get("signal_id"))
        rc = _num(value.get("return_code"))
        if statuses & {"SIGNALED", "CORE_DUMPED"}:
            return None, sig
        if statuses & {"PENDING", "INVALID"} and rc is None:
            return None, None
        return rc, None
    return None, None


def parse_squeue(text: str) -> tuple[str, list[SlurmJob]]:
    """Jobs in an ``squeue --json`` document, with the release it names."""
    doc = _load(text, "squeue")
    release = release_of(doc)
    old = raw_exit_status(dialect_of_doc(doc, release))
    jobs: list[SlurmJob] = []
    for raw in doc.get("jobs") or []:
        base, flags = _states(raw.get("job_state"))
        if base == "REQUEUED":  # in squeue, REQUEUED is a flag (22.05 prints it instead of the base state)
            base, flags = "", flags | {"REQUEUED"}
        flags = flags | frozenset(str(f).upper() for f in (raw.get("flags") or []) if str(f).upper() == "REQUEUED")
        code, sig = _exit(raw.get("exit_code"), raw_status=old)
        ids = _ids(
            str(raw.get("job_id")), raw.get("array_job_id"), raw.get("array_task_id"), raw.get("array_task_string")
        )
        jobs.extend(
            SlurmJob(
                job_id=jid,
                name=str(raw.get("name") or ""),
                state=base,
                flags=flags,
                reason=str(raw.get("state_reason") or ""),
                description=str(raw.get("state_description") or ""),
                restart_cnt=_num(raw.get("restart_cnt")),
                priority=_num(raw.get("priority")),
                submit_time=_time(raw.get("submit_time")),
                eligible_time=_time(raw.get("eligible_time")),
                start_time=_time(raw.get("start_time")),
                end_time=_time(raw.get("end_time")),
                exit_code=code,
                signal=sig,
                nodes=str(raw.get("nodes") or ""),
                stdout=str(raw.get("standard_output") or ""),
                stderr=str(raw.get("standard_error") or ""),
                stdout_expanded=str(raw.get("stdout_expanded") or ""),
                stderr_expanded=str(raw.get("stderr_expanded") or ""),
                requeue=raw.get("requeue") if isinstance(raw.get("requeue"), bool) else None,
                source="squeue",
                release=release,
            )
            for jid in ids
        )
    return release, jobs


def parse_sacct(text: str) -> tuple[str, list[SlurmJob]]:
    """Executions in an ``sacct --json`` document (one record per execution with ``-D``).

    On 22.05 (dbv0.0.38) the exit codes of normal exits are wrong (always 0): callers must not use this
    dialect for exit codes (the adapter reads sacct as text there).
    """
    doc = _load(text, "sacct")
    release = release_of(doc)
    jobs: list[SlurmJob] = []
    for raw in doc.get("jobs") or []:
        st = raw.get("state") or {}
        base, flags = _states(st.get("current"))
        if "REQUEUED" in flags:  # 26.05 gives an execution a requeue ended ["PENDING", "REQUEUED"]
            base, flags = "REQUEUED", flags - {"REQUEUED"}
        times = raw.get("time") or {}
        code, sig = _exit(raw.get("exit_code"), raw_status=False)
        nodes = raw.get("nodes")
        steps: set[str] = set()
        step_code: int | None = None
        for step in raw.get("steps") or []:
            cur = (
                (step.get("state") or {}) if isinstance(step.get("state"), Mapping) else {"current": step.get("state")}
            )
            steps.update(_states(cur.get("current"))[0:1])
            if step_code is None and _srun_step(step):
                c, _ = _exit(step.get("exit_code"), raw_status=False)
                step_code = c or None
        array = raw.get("array") if isinstance(raw.get("array"), Mapping) else {}
        ids = _ids(str(raw.get("job_id")), array.get("job_id"), array.get("task_id"), array.get("task"))
        jobs.extend(
            SlurmJob(
                job_id=jid,
                name=str(raw.get("name") or ""),
                state=base,
                flags=flags,
                reason=str(st.get("reason") or ""),
                restart_cnt=_num(raw.get("restart_cnt")),
                submit_time=_time(times.get("submission")),
                eligible_time=_time(times.get("eligible")),
                start_time=_time(times.get("start")),
                end_time=_time(times.get("end")),
                exit_code=code,
                signal=sig,
                nodes="" if nodes in (None, "None assigned") else str(nodes),
                stdout=str(raw.get("stdout") or ""),
                stderr=str(raw.get("stderr") or ""),
                stdout_expanded=str(raw.get("stdout_expanded") or ""),
                stderr_expanded=str(raw.get("stderr_expanded") or ""),
                source="sacct",
                release=release,
                step_states=frozenset(x for x in steps if x),
                step_exit_code=step_code,
            )
            for jid in ids
        )
    return release, jobs


def _srun_step(step: Mapping[str, Any]) -> bool:
    """Whether a JSON step is an srun step (``<id>.<n>``), not the batch or extern step."""
    ident = (step.get("step") or {}).get("id")
    if isinstance(ident, Mapping):  # older dialects: {"job_id": ..., "step_id": ...}
        ident = ident.get("step_id")
    text = str(ident if ident is not None else "")
    return text.rsplit(".", 1)[-1].isdigit() and text != ""


def _step_code(code: str) -> int | None:
    """A step's non-zero exit code from sacct's ``<code>:<signal>`` (None: zero, a signal, or unreadable)."""
    a, _, b = code.partition(":")
    if a.isdigit() and int(a) and (b == "" or b == "0"):
        return int(a)
    return None


SACCT_TEXT_FIELDS = "JobIDRaw,JobName,State,ExitCode,Submit,Eligible,Start,End,NodeList,Reason,JobID"
"""``sacct -P -n -o`` fields: the last, ``JobID``, names an array task ``<array>_<task>`` (a listing without it,
as older captures have, is read by the raw id)."""
SQUEUE_TEXT_FIELDS = "JobArrayID:|,State:|,Reason:|,RestartCnt:|,EligibleTime:|,StartTime:|,NodeList:|,Name:"
"""``squeue -h -t all -O`` fields (with ``SLURM_TIME_FORMAT=%s``): the cheap listing the adapter reads first."""


def parse_sacct_text(text: str, release: str = "") -> list[SlurmJob]:
    """Executions from ``sacct -X -D -P -n -o`` :data:`SACCT_TEXT_FIELDS` with ``SLURM_TIME_FORMAT=%s``.

    Used on 22.05, whose JSON loses non-zero exit codes. Restart numbers are not in the text: callers
    number a job's records in order (sacct prints them by submission).
    """
    jobs: list[SlurmJob] = []
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 10:
            raise ParseError(f"sacct line has {len(parts)} fields, expected 10: {line[:200]!r}")
        jid, name, state, code, sub, elig, start, end, nodes, reason = parts[:10]
        if len(parts) > 10 and parts[-1].strip():
            # JobID comes last (a Reason holding "|" shifts nothing before it)
            jid, name, reason = parts[-1].strip(), name, "|".join(parts[9:-1])
        base = state.split()[0].upper() if state.strip() else ""
        if "." in jid:  # a step line (sacct without -X): belongs to the execution printed before it
            owner, step = jid.split(".", 1)
            if jobs and jobs[-1].job_id == owner and base:
                jobs[-1] = replace(jobs[-1], step_states=jobs[-1].step_states | {base})
            if jobs and jobs[-1].job_id == owner and step.isdigit() and jobs[-1].step_exit_code is None:
                jobs[-1] = replace(jobs[-1], step_exit_code=_step_code(code))
            continue
        exit_code: int | None = None
        sig: int | None = None
        if ":" in code:
            a, b = code.split(":", 1)
            if a.isdigit() and b.isdigit():
                # the same rule as the JSON: a signal-killed execution has a signal and no exit code
                exit_code, sig = (None, int(b)) if int(b) else (int(a), None)
        for each in _text_ids(jid):
            n = counts.get(each, 0)
            counts[each] = n + 1
            jobs.append(_sacct_text_job(each, name, base, state, reason, n, (sub, elig, start, end), nodes, release,
                                        exit_code, sig))  # fmt: skip
    return jobs


def _sacct_text_job(
    jid: str,
    name: str,
    base: str,
    state: str,
    reason: str,
    n: int,
    times: tuple[str, str, str, str],
    nodes: str,
    release: str,
    exit_code: int | None,
    sig: int | None,
) -> SlurmJob:
    sub, elig, start, end = times
    return SlurmJob(
        job_id=jid,
        name=name,
        state=base if base in BASE_STATES else "",
        flags=frozenset() if base in BASE_STATES else frozenset({base}),
        reason=reason,
        description=state,
        restart_cnt=n,
        submit_time=_text_time(sub),
        eligible_time=_text_time(elig),
        start_time=_text_time(start),
        end_time=_text_time(end),
        exit_code=exit_code,
        signal=sig,
        nodes="" if nodes == "None assigned" else nodes,
        source="sacct",
        release=release,
    )


def parse_squeue_text(text: str, release: str = "") -> list[SlurmJob]:
    """Jobs from ``squeue -h -t all -O`` :data:`SQUEUE_TEXT_FIELDS` with ``SLURM_TIME_FORMAT=%s``.

    The cheap listing: id, base state, reason (squeue prints the state description there when one is set,
    e.g. "job requeued in held state"), restart count, eligible time, start time, nodes and name (last: it
    may hold ``|``). No exit code, flags, output paths or end time: :func:`text_settles` says which rows
    need nothing more. A start time counts only for a running job (a pending one's is an estimate).
    """
    jobs: list[SlurmJob] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = line.split("|", 7)
        if len(parts) < 8:
            raise ParseError(f"squeue line has {len(parts)} fields, expected 8: {line[:200]!r}")
        jid, state, reason, restarts, eligible, start, nodes, name = parts
        jid = jid.strip()
        ids = _text_ids(jid)
        # the tasks of an array's record are well-formed ids by construction: only a row's own id is checked
        if ids == [jid] and not is_scheduler_id(jid):
            raise ParseError(f"squeue printed no job id: {line[:200]!r}")
        state = state.strip().upper()
        base = state if state in BASE_STATES else ""
        running = base in ("RUNNING", "SUSPENDED")
        # one reading of the row's fields, shared by every task it stands for
        flags = _NO_FLAGS if base else frozenset({state})
        reason = reason.strip()
        restarts = restarts.strip()
        restart_cnt = int(restarts) if restarts.isdigit() else None
        eligible_time = _text_time(eligible)
        start_time = _text_time(start) if running else None
        nodes = nodes.strip() if running else ""
        # every field but the id, in SlurmJob's order: positional arguments build a job twice as fast as keywords
        fields = (name, base, flags, reason, "", restart_cnt, None, None, eligible_time, start_time, None, None,
                  None, nodes, "", "", "", "", None, "squeue", release)  # fmt: skip
        jobs.extend([SlurmJob(each, *fields) for each in ids])
    return jobs


_NO_FLAGS: frozenset[str] = frozenset()


def _text_ids(job_id: str) -> list[str]:
    try:
        return arrayids.text_ids(job_id)
    except arrayids.ArrayIdError as exc:
        raise ParseError(str(exc)) from None


def _ids(job_id: str, array_job: Any, array_task: Any, task_string: Any) -> list[str]:
    try:
        return arrayids.json_ids(job_id, array_job, array_task, task_string)
    except arrayids.ArrayIdError as exc:
        raise ParseError(str(exc)) from None


TEXT_SETTLED_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin", "BeginTime", "Priority", "Resources", "None"})


def text_settles(job: SlurmJob) -> bool:
    """Whether the text listing alone answers for this job: a first execution (restart 0) that is running, or
    pending for one of the plain reasons (dispatch's gate, an admin hold, a begin time, priority, resources,
    none). Anything else (ended jobs need their exit code, requeued ones their history, flagged or unusual
    states their flags and description) is asked again in JSON."""
    if job.restart_cnt != 0 or job.flags:
        return False
    if job.state in ("RUNNING", "SUSPENDED"):
        return job.start_time is not None and bool(job.nodes)
    return job.state == "PENDING" and job.reason in TEXT_SETTLED_REASONS


def _text_time(value: str) -> float | None:
    value = value.strip()
    return float(value) if value.isdigit() and int(value) > 0 else None


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"{what} printed no valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ParseError(f"{what} JSON is not an object")
    return doc


def filter_jobs(
    jobs: Iterable[SlurmJob], ids: Iterable[str] | None = None, names: Iterable[str] | None = None
) -> list[SlurmJob]:
    """Client-side filtering (22.05's squeue ignores ``-j`` and ``--name``)."""
    id_set = set(ids) if ids is not None else None
    name_set = set(names) if names is not None else None
    return [j for j in jobs if (id_set is None or j.job_id in id_set) and (name_set is None or j.name in name_set)]


def parse_config(text: str) -> dict[str, str]:
    """``scontrol show config``: ``Key = value`` lines into a mapping."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if " = " not in line:
            continue
        key, value = line.split(" = ", 1)
        key = key.strip()
        if key and " " not in key:
            out[key] = value.strip()
    return out


def config_seconds(config: Mapping[str, str], key: str, default: float) -> float:
    """A duration from the config (``"10 sec"``, ``"5 min"``, ``"300"``)."""
    value = config.get(key)
    if not value:
        return default
    words = value.split()
    try:
        n = float(words[0])
    except ValueError:
        return default
    unit = words[1].lower() if len(words) > 1 else "sec"
    return n * {"sec": 1.0, "min": 60.0, "hour": 3600.0, "hours": 3600.0}.get(unit, 1.0)


def auth_ttl(config: Mapping[str, str]) -> float | None:
    """The credential lifetime the AuthType gives (seconds), or None when it gives no landing bound."""
    auth = config.get("AuthType", "")
    info = config.get("AuthInfo", "")
    ttl: float | None = None
    for part in info.split(","):
        if part.strip().startswith("ttl="):
            try:
                ttl = float(part.split("=", 1)[1])
            except ValueError:
                ttl = None
    if auth == "auth/munge":
        return ttl if ttl is not None else 300.0
    if auth == "auth/slurm":
        return ttl if ttl is not None else 60.0
    return None


def parse_sbatch_id(text: str) -> str:
    """The job id from ``sbatch --parsable`` (``<id>`` or ``<id>;<cluster>``)."""
    line = text.strip().splitlines()[-1] if text.strip() else ""
    jid = line.split(";", 1)[0].strip()
    if not jid.isdigit():
        raise ParseError(f"sbatch printed no job id: {text.strip()[:200]!r}")
    return jid


_BRACKET = re.compile(r"\[([^\[\]]*)\]")
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@functools.lru_cache(maxsize=1024)
def expand_hostlist(text: str) -> tuple[str, ...]:
    """The node names of a Slurm hostlist (``n[1-3,07],gpu1`` -> ``n1 n2 n3 n07 gpu1``; zero padding kept), in
    order, each once. ParseError for text that is not a hostlist of plain node names. Kept for the most recent
    distinct hostlists (an observation reads the same few for thousands of running jobs)."""
    names: list[str] = []
    for part in _split_top(text.strip()):
        names += _expand_one(part, text)
    for n in names:
        if not _NODE_NAME.fullmatch(n):
            raise ParseError(f"not a Slurm node name in hostlist {text!r}: {n!r}")
    return tuple(dict.fromkeys(names))


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p]


def _expand_one(part: str, whole: str) -> list[str]:
    m = _BRACKET.search(part)
    if m is None:
        if "[" in part or "]" in part:
            raise ParseError(f"unbalanced brackets in hostlist {whole!r}")
        return [part]
    head, tail = part[: m.start()], part[m.end() :]
    out: list[str] = []
    for item in m.group(1).split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ParseError(f"not a range in hostlist {whole!r}: {item!r}")
        width = len(lo)
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first or last - first > 100_000:
            raise ParseError(f"not a range in hostlist {whole!r}: {item!r}")
        out += [f"{head}{i:0{width}d}{rest}" for i in range(first, last + 1) for rest in _expand_one(tail, whole)]
    return out
