"""The observation's evidence: the path most jobs of a cycle take (a job the listing alone shows) gives the same
evidence as the general one, for any listed row."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

import dispatch.slurm as slurm
from dispatch.clock import FakeClock
from dispatch.slurm.observation import Observation, _Observed
from dispatch.slurm.parse import SlurmJob
from dispatch.slurmtest import RELEASE_2605, TranscriptExecutor, ready_preflight

NOW = 1_800_000_000.0

_STATES = ["PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "COMPLETED", "CANCELLED", "TIMEOUT", "PREEMPTED",
           "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REQUEUED", "RESIZING", "SIGNALING", "FAILED",
           ""]  # fmt: skip
_REASONS = ["None", "JobHeldUser", "JobHeldAdmin", "Priority", "Resources", "BeginTime", "Dependency",
            "launch failed requeued held", "ReqNodeNotAvail", "(null)"]  # fmt: skip
_NAMES = ["dsp-j-1", "dsp-j-3", "dspa-0123456789abcdef", "someone-elses", ""]


def _observation() -> Observation:
    ex = TranscriptExecutor(ready_preflight(RELEASE_2605, now=NOW))
    backend = slurm.new({}, executor=ex, clock=FakeClock(NOW))
    obs = backend._observation
    assert isinstance(obs, Observation)
    return obs


_OBS = _observation()
_times = st.one_of(st.none(), st.floats(NOW - 1e5, NOW + 10, allow_nan=False), st.just(5e9))


def _report(rank: int, execution: str, step: int) -> str:
    return json.dumps({"rank": rank, "step": step, "total": 100, "at": NOW - 5, "execution": execution})


@st.composite
def _listed(draw: st.DrawFn) -> tuple[str, SlurmJob, dict[int, str] | None]:
    task = draw(st.one_of(st.none(), st.integers(0, 50)))
    jid = f"4242_{task}" if task is not None else str(draw(st.integers(1, 99999)))
    restart = draw(st.one_of(st.none(), st.integers(0, 3)))
    job = SlurmJob(
        job_id=jid,
        name=draw(st.sampled_from(_NAMES)),
        state=draw(st.sampled_from(_STATES)),
        flags=frozenset(draw(st.sets(st.sampled_from(["REQUEUED", "COMPLETING", "RESV_DEL_HOLD", "STAGE_OUT"])))),
        reason=draw(st.sampled_from(_REASONS)),
        restart_cnt=restart,
        start_time=draw(_times),
        end_time=draw(_times),
        exit_code=draw(st.one_of(st.none(), st.integers(0, 255))),
        nodes=draw(st.sampled_from(["", "n1", "n[1-3]", "bad[["])),
    )
    raw = None
    if draw(st.booleans()):
        execution = f"1.{jid}.{restart or 0}" if draw(st.booleans()) else "9.other.0"
        raw = {r: _report(r, execution, draw(st.integers(0, 100))) for r in range(draw(st.integers(0, 2)))}
        if draw(st.booleans()):
            raw[3] = "not a report"
    return jid, job, raw


@settings(max_examples=400, deadline=None)
@given(_listed())
def test_a_listed_job_reads_the_same_on_the_short_path_as_on_the_general_one(
    case: tuple[str, SlurmJob, dict[int, str] | None],
) -> None:
    jid, job, raw = case
    observed = _Observed(job, (), raw)
    general = _OBS._evidence_of(jid, observed, None)  # no memo: the general path, reading each record afresh
    short = _OBS._evidence_of(jid, observed, {})
    assert short == general
