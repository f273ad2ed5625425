"""Transcripts for testing code that uses the Slurm adapter without a cluster.

* :class:`TranscriptExecutor` replays (expected script fragment, result) :class:`Exchange` values in order and
  raises :class:`UnexpectedScript` on a script that does not contain the next key (or when none is left).
  Keys are matched against the script after :func:`normalize` replaced its random nonce with :data:`NONCE`; a
  result may carry :data:`NONCE` too, and gets the script's real nonce.
* Renderers of squeue's text listing (:func:`squeue_text`) and of Slurm's job JSON for :data:`RELEASE_2205`
  (openapi v0.0.38), :data:`RELEASE_2511` (data_parser v0.0.44) and :data:`RELEASE_2605` (v0.0.45):
  :func:`squeue_json`, :func:`sacct_json`, and :func:`sacct_text` (22.05's text fallback), from a few
  :class:`Job` fields.
* :class:`CapturedExecutor` replays one moment captured from a real cluster (``scripts/slurm/capture.py``);
  :func:`load_transcript` reads a capture file.
* Builders of script replies: :func:`wrapped` (one :class:`Call` per deadline-wrapped call), :func:`ok`,
  :func:`fail`, :func:`absent`, :func:`expired`, :func:`not_run`, :func:`call_status`.
* :func:`ready_preflight`: the exchanges that answer a whole preflight (environment, probe, probe check).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dispatch.slurm.holds import encode_hold
from dispatch.slurm.parse import dialect_of
from dispatch.slurm.scripts import NONCE_RE
from dispatch.slurm.transport.base import Result, TransportFailure

NONCE = "<NONCE>"
RELEASE_2205 = "22.05.8"
RELEASE_2511 = "25.11.7"
RELEASE_2605 = "26.05.5"
RELEASES = (RELEASE_2205, RELEASE_2511, RELEASE_2605)


class UnexpectedScript(AssertionError):
    """A script arrived that the transcript did not expect (its text is in the message)."""


def normalize(script: str) -> str:
    """The script with every nonce replaced by :data:`NONCE`."""
    return NONCE_RE.sub(NONCE, script)


@dataclass(frozen=True)
class Exchange:
    """One expected script (``key`` must occur in the normalized script) and its answer. With ``fail`` set,
    the executor raises TransportFailure carrying ``result`` (a cut connection or a dead master)."""

    key: str
    result: Result
    fail: str | None = None


class TranscriptExecutor:
    """Answers scripts from a transcript, strictly in order."""

    def __init__(self, exchanges: Iterable[Exchange] = ()) -> None:
        self._queue = list(exchanges)
        self.scripts: list[str] = []
        self.closed = False

    def add(self, *exchanges: Exchange) -> None:
        self._queue.extend(exchanges)

    @property
    def remaining(self) -> int:
        return len(self._queue)

    def assert_done(self) -> None:
        if self._queue:
            raise UnexpectedScript(f"{len(self._queue)} exchange(s) never asked for; next key {self._queue[0].key!r}")

    def run(self, script: str, timeout: float) -> Result:
        self.scripts.append(script)
        norm = normalize(script)
        if not self._queue:
            raise UnexpectedScript(f"no exchange left for script:\n{norm}")
        ex = self._queue[0]
        if ex.key not in norm:
            raise UnexpectedScript(f"expected a script containing {ex.key!r}, got:\n{norm}")
        self._queue.pop(0)
        m = NONCE_RE.search(script)
        real = m.group(0) if m else NONCE
        result = replace(
            ex.result, stdout=ex.result.stdout.replace(NONCE, real), stderr=ex.result.stderr.replace(NONCE, real)
        )
        if ex.fail is not None:
            raise TransportFailure(ex.fail, result)
        return result

    def close(self) -> None:
        self.closed = True


# ------------------------------------------------------------------ replies


@dataclass(frozen=True)
class Call:
    """One deadline-wrapped call's reply: stdout, stderr, exit status (None with ``not_run``)."""

    stdout: str = ""
    stderr: str = ""
    status: int | None = 0
    not_run: bool = False


def ok(stdout: str = "") -> Call:
    return Call(stdout=stdout)


def fail(stderr: str, status: int = 1, stdout: str = "") -> Call:
    return Call(stdout=stdout, stderr=stderr if stderr.endswith("\n") else stderr + "\n", status=status)


def absent(job_id: str = "") -> Call:
    """squeue's answer for one purged or unknown job id."""
    return fail("slurm_load_jobs error: Invalid job id specified", 1)


def expired() -> Call:
    """A call killed by its deadline (``timeout`` exits 124)."""
    return Call(status=124)


def not_run() -> Call:
    """A call the script skipped because its deadline had passed."""
    return Call(status=None, not_run=True)


def call_status(index: int, call: Call) -> str:
    """The status line of call ``index``."""
    word = "notrun" if call.not_run else str(call.status)
    return f"\n@@{NONCE}:{index}:status:{word}\n"


def wrapped(*calls: Call, cut_after: int | None = None) -> Result:
    """A script's stdout with one framed reply per call. ``cut_after=i`` stops after call i's stdout (a cut
    connection: no status line)."""
    parts = [f"@@{NONCE}:start\n"]
    for i, c in enumerate(calls):
        parts.append(f"\n@@{NONCE}:{i}:out\n{c.stdout}")
        if cut_after is not None and i >= cut_after:
            return Result("".join(parts), "", 255)
        parts.append(f"\n@@{NONCE}:{i}:err\n{c.stderr}")
        parts.append(call_status(i, c))
    parts.append(f"\n@@{NONCE}:done\n")
    return Result("".join(parts), "", 0)


def reply(*calls: Call) -> Result:
    return wrapped(*calls)


# ------------------------------------------------------------------ job JSON


@dataclass(frozen=True)
class Job:
    """The fields the renderers know. ``state`` is the base state; ``flags`` are Slurm's state flags."""

    id: int
    name: str = "job"
    state: str = "PENDING"
    flags: tuple[str, ...] = ()
    reason: str = "None"
    description: str = ""
    restarts: int = 0
    priority: int = 1
    submit: int = 1_796_000_000
    eligible: int = 0
    start: int = 0
    end: int = 0
    exit_code: int | None = 0
    signal: int | None = None
    nodes: str = ""
    stdout: str = ""
    stderr: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def _n(value: int | None) -> dict[str, Any]:
    return {"set": value is not None, "infinite": False, "number": value or 0}


def _meta(release: str, db: bool) -> dict[str, Any]:
    major, minor, micro = release.split(".")
    if dialect_of(release) == "v0.0.38":
        kind = "openapi/dbv0.0.38" if db else "openapi/v0.0.38"
        return {
            "plugin": {"type": kind, "name": "Slurm OpenAPI v0.0.38"},
            "Slurm": {"version": {"major": int(major), "micro": int(micro), "minor": int(minor)}, "release": release},
        }
    return {
        "plugin": {
            "type": "",
            "name": "",
            "data_parser": f"data_parser/{dialect_of(release)}",
            "accounting_storage": "",
        },
        "client": {"source": "", "user": "ada", "group": "ada"},
        "slurm": {"version": {"major": major, "micro": micro, "minor": minor}, "release": release, "cluster": "c"},
    }


def _wait_status(job: Job) -> int:
    if job.signal:
        return job.signal & 0x7F
    return ((job.exit_code or 0) & 0xFF) << 8


def _exit_new(job: Job) -> dict[str, Any]:
    if job.signal:
        return {"status": ["SIGNALED"], "return_code": _n(None), "signal": {"id": _n(job.signal), "name": ""}}
    if job.state in ("PENDING",):
        return {"status": ["PENDING"], "return_code": _n(None), "signal": {"id": _n(None), "name": ""}}
    status = "SUCCESS" if not job.exit_code else "ERROR"
    return {"status": [status], "return_code": _n(job.exit_code or 0), "signal": {"id": _n(None), "name": ""}}


FLAGS_2205 = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
              "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")  # fmt: skip
"""Flags that 22.05's one-string job state shows instead of the base state (others it cannot show)."""


def squeue_json(release: str, *jobs: Job) -> str:
    """An ``squeue --json`` document of ``jobs`` in ``release``'s dialect."""
    import json

    old = dialect_of(release) == "v0.0.38"
    out = []
    for j in jobs:
        if old:
            # 22.05: a flag replaces the base state in the one string
            shown = next((f for f in j.flags if f in FLAGS_2205), j.state)
            rec: dict[str, Any] = {
                "job_id": j.id, "name": j.name, "job_state": shown, "state_reason": j.reason,
                "state_description": j.description, "restart_cnt": j.restarts, "priority": j.priority,
                "submit_time": j.submit, "eligible_time": j.eligible, "start_time": j.start, "end_time": j.end,
                "exit_code": _wait_status(j), "nodes": j.nodes, "standard_output": j.stdout,
                "standard_error": j.stderr, "requeue": False, "time_limit": None, "flags": [],
            }  # fmt: skip
        else:
            rec = {
                "job_id": j.id, "name": j.name, "job_state": [j.state, *j.flags], "state_reason": j.reason,
                "state_description": j.description, "restart_cnt": j.restarts, "priority": _n(j.priority),
                "hold": j.priority == 0, "submit_time": _n(j.submit), "eligible_time": _n(j.eligible),
                "start_time": _n(j.start), "end_time": _n(j.end), "exit_code": _exit_new(j), "nodes": j.nodes,
                "standard_output": j.stdout, "standard_error": j.stderr,
                "stdout_expanded": j.stdout.replace("%j", str(j.id)).replace("%r", str(j.restarts)),
                "stderr_expanded": j.stderr.replace("%j", str(j.id)).replace("%r", str(j.restarts)),
                "requeue": False, "time_limit": {"set": False, "infinite": True, "number": 0},
            }  # fmt: skip
        rec.update(j.extra)
        out.append(rec)
    doc = {"meta": _meta(release, False), "errors": [], "warnings": [], "jobs": out}
    return json.dumps(doc, indent=1)


def sacct_json(release: str, *jobs: Job) -> str:
    """An ``sacct --json`` document: one record per execution (give one Job per execution)."""
    import json

    old = dialect_of(release) == "v0.0.38"
    out = []
    for j in jobs:
        rec: dict[str, Any] = {
            "job_id": j.id,
            "name": j.name,
            "state": {"current": j.state if old else [j.state, *j.flags], "reason": j.reason},
            "time": {"submission": j.submit, "eligible": j.eligible, "start": j.start, "end": j.end},
            "nodes": j.nodes or "None assigned",
        }
        if old:
            # dbv0.0.38's bug: any normal exit reads SUCCESS / 0
            rec["exit_code"] = (
                {"status": "SIGNALED", "return_code": None, "signal": {"signal_id": j.signal, "name": ""}}
                if j.signal
                else {"status": "SUCCESS", "return_code": 0}
            )
        else:
            rec["exit_code"] = _exit_new(j)
            rec["restart_cnt"] = j.restarts
            rec["stdout"] = j.stdout
            rec["stderr"] = j.stderr
        out.append(rec)
    return json.dumps({"meta": _meta(release, True), "errors": [], "jobs": out}, indent=1)


def squeue_text(*jobs: Job) -> str:
    """The adapter's cheap listing: ``squeue -h -t all -O`` SQUEUE_TEXT_FIELDS, times as epoch seconds."""
    lines = []
    for j in jobs:
        running = j.state in ("RUNNING", "SUSPENDED")
        t = [str(x) if x else "N/A" for x in (j.eligible, j.start)]
        reason = j.description or j.reason
        lines.append("|".join([str(j.id), j.state, reason, str(j.restarts), *t, j.nodes if running else "", j.name]))
    return "\n".join(lines) + ("\n" if lines else "")


def sacct_text(*jobs: Job) -> str:
    """22.05's text fallback: ``sacct -X -D -P -n -o`` the adapter's fields, times as epoch seconds."""
    lines = []
    for j in jobs:
        code = f"{j.exit_code or 0}:{j.signal or 0}"
        t = [str(x) if x else "Unknown" for x in (j.submit, j.eligible, j.start, j.end)]
        lines.append("|".join([str(j.id), j.name, j.state, code, *t, j.nodes or "None assigned", j.reason]))
    return "\n".join(lines) + ("\n" if lines else "")


# ------------------------------------------------------------------ preflight


def scontrol_config(release: str = RELEASE_2205, **overrides: str) -> str:
    """``scontrol show config`` text with the keys preflight reads."""
    values = {
        "AccountingStorageType": "accounting_storage/slurmdbd",
        "AuthInfo": "cred_expire=10",
        "AuthType": "auth/munge",
        "ClusterName": "testcluster",
        "KillWait": "5 sec",
        "MessageTimeout": "10 sec",
        "MinJobAge": "15 sec",
        "SlurmdTimeout": "10 sec",
        "SLURM_VERSION": release,
    }
    values.update(overrides)
    return "".join(f"{k:<24}= {v}\n" for k, v in sorted(values.items()))


def environment_reply(release: str = RELEASE_2205, now: float = 1_800_000_000.0, **config: str) -> Result:
    return wrapped(ok(""), ok(f"{now:.6f}\n"), ok(scontrol_config(release, **config)), ok("/home/ada\nada\n"))


def ready_preflight(
    release: str = RELEASE_2205,
    *,
    now: float = 1_800_000_000.0,
    probe_id: int = 1000,
    hold: bool = True,
    accounting: bool = True,
    read_only: bool = False,
    apptainer: bool = False,
    **config: str,
) -> list[Exchange]:
    """The exchanges of a whole preflight (read-only: only the environment script). ``apptainer``: the container
    probe finds Apptainer and starts its test container (ContainerImage yes); else Apptainer is missing."""
    env = Exchange("scontrol show config", environment_reply(release, now, **config))
    if read_only:
        return [env]
    probe = Job(probe_id, "dispatch-preflight-probe", "PENDING", reason="JobHeldUser", priority=0,
                eligible=encode_hold("h00000001") if hold else 0)  # fmt: skip
    return [
        env,
        Exchange("dispatch-preflight-probe", wrapped(ok(f"{probe_id}\n"))),
        Exchange(
            "StartTime=uts",
            wrapped(
                ok(),
                ok(squeue_json(release, probe)),
                ok(f"{probe_id}\n") if accounting else fail("not found"),
                ok(),
                ok("found /usr/bin/apptainer\napptainer version 1.4.5\n") if apptainer else ok("missing\n"),
            ),
        ),
    ]


def exchanges(pairs: Sequence[tuple[str, Result]]) -> list[Exchange]:
    return [Exchange(k, r) for k, r in pairs]


# ------------------------------------------------------------------ captured real bytes


TRANSCRIPTS_DIR = "tests/slurm/transcripts"
"""Where ``scripts/slurm/capture.py`` writes one transcript per release (``slurm-<release>.json``)."""


def load_transcript(path: str) -> dict[str, Any]:
    """A transcript written by ``scripts/slurm/capture.py``: ``release``, ``cluster`` and ``states``, each state
    a ``job_id`` and its ``captures`` (``phase``, ``squeue_json``, ``squeue_text``, ``sacct_json``,
    ``sacct_text``: the raw answers)."""
    import json

    with open(path) as f:
        doc: dict[str, Any] = json.load(f)
    for key in ("release", "cluster", "states"):
        if key not in doc:
            raise ValueError(f"{path}: not a capture transcript (no {key!r})")
    return doc


class CapturedExecutor(TranscriptExecutor):
    """Replays its queued exchanges first (a preflight), then answers every read script from one captured
    moment of a real cluster: each call of the script gets the captured answer of the same command
    (``squeue --json``, ``squeue ... -O``, ``sacct --json``, text ``sacct``); a job squeue no longer knew
    answers "Invalid job id". Scripts that write raise :class:`UnexpectedScript`."""

    def __init__(self, capture: Mapping[str, Any], exchanges: Iterable[Exchange] = ()) -> None:
        super().__init__(exchanges)
        self.capture = capture

    def _answer(self, call: str) -> Call:
        cap = self.capture
        if "squeue" in call and "--json" in call:
            return ok(cap["squeue_json"]) if cap["squeue_json"] else absent()
        if "squeue" in call:
            return ok(cap["squeue_text"]) if cap.get("squeue_rc", 0) == 0 else absent()
        if "sacct" in call and "--json" in call:
            return ok(cap["sacct_json"])
        if "sacct" in call:
            return ok(cap["sacct_text"])
        raise UnexpectedScript(f"no captured answer for: {call[:300]}")

    def run(self, script: str, timeout: float) -> Result:
        if self.remaining:
            return super().run(script, timeout)
        self.scripts.append(script)
        body = normalize(script).split("\n}\n", 1)[-1]
        calls = re.split(r"^_dsp_call \d+ \S+ ", body, flags=re.M)[1:]
        if not calls:
            raise UnexpectedScript(f"no call in script:\n{normalize(script)}")
        result = wrapped(*(self._answer(c) for c in calls))
        m = NONCE_RE.search(script)
        return replace(result, stdout=result.stdout.replace(NONCE, m.group(0) if m else NONCE))
