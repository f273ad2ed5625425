"""Parsing and mapping of Grid Engine 8.1.9's answers. The files under outputs/ were printed by the test cell
(qstat-j-context.xml is an excerpt: the elements the adapter does not read were removed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dispatch.gridengine.mapping import ACCOUNTING_LAG, awaiting_accounting, ended_outcome, live_reading
from dispatch.gridengine.parse import (
    AccountingRecord,
    ParseError,
    parse_detail,
    parse_duration,
    parse_qacct,
    parse_qstat,
    requested,
    size_bytes,
)
from dispatch.outcome import Cause, Evidence, State

OUT = Path(__file__).parent / "outputs"
EV = Evidence("test", 0.0)


def test_qstat_lists_running_and_pending_jobs() -> None:
    jobs = {j.job_id: j for j in parse_qstat((OUT / "qstat.xml").read_text())}
    assert jobs["23"].name == "dsp-6b0eed6bdce628-1" and jobs["23"].state == "t" and jobs["23"].host == "localhost"
    assert jobs["23"].start is not None
    assert jobs["3"].state == "hqw" and jobs["3"].host == "" and jobs["3"].submitted is not None


def test_unusable_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError):
        parse_qstat("error: commlib error: access denied")


def test_detail_reads_the_context_and_the_start_time() -> None:
    d = parse_detail((OUT / "qstat-j-context.xml").read_text())["3"]
    assert d.context == {"dispatch_hold": "h0000002a"} and d.execution_time == 2145916740


def test_qacct_records() -> None:
    (rec,) = parse_qacct((OUT / "qacct-h_rt.txt").read_text())
    assert (rec.job_id, rec.failed, rec.exit_status, rec.wallclock) == ("8", 37, 137, 6.0)
    assert requested(rec.category, "h_rt") == "5" and rec.maxvmem == pytest.approx(1.789 * 1024**2)
    (ok,) = parse_qacct((OUT / "qacct-success.txt").read_text())
    assert (ok.failed, ok.exit_status) == (0, 0) and ok.start is not None and ok.end is not None


@pytest.mark.parametrize(("text", "seconds"), [("60", 60), ("0:1:0", 60), ("01:00:05", 3605), ("x", None)])
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_sizes() -> None:
    assert size_bytes("100M") == 100 * 1024**2 and size_bytes("4.477KB") == pytest.approx(4.477 * 1024)
    assert size_bytes("lots") is None


def test_the_h_rt_kill_is_a_timeout_and_success_needs_exit_zero() -> None:
    (rec,) = parse_qacct((OUT / "qacct-h_rt.txt").read_text())
    out = ended_outcome(rec, stopped=False, ev=EV)
    assert (out.state, out.cause, out.signal) == (State.FAILED, Cause.TIMEOUT, 9)
    (ok,) = parse_qacct((OUT / "qacct-success.txt").read_text())
    assert ended_outcome(ok, False, EV).state is State.SUCCEEDED


def record(failed: int, exit_status: int, category: str = "", wallclock: float = 3.0) -> AccountingRecord:
    return AccountingRecord("9", "dsp-j-1", failed, str(failed), exit_status, 0, 1, 4, wallclock, 1e6, category, "h")


def test_a_kill_is_cancelled_only_when_dispatch_stopped_the_job() -> None:
    assert ended_outcome(record(100, 137), stopped=True, ev=EV).cause is Cause.CANCELLED
    other = ended_outcome(record(100, 137), stopped=False, ev=EV)
    assert (other.state, other.cause) == (State.FAILED, Cause.UNKNOWN)
    assert "does not say by whom" in other.detail


def test_exit_codes_memory_and_launch_failures() -> None:
    assert ended_outcome(record(0, 3), False, EV).exit_code == 3
    assert ended_outcome(record(37, 137, "-l h_vmem=1M"), False, EV).cause is Cause.OUT_OF_MEMORY
    assert ended_outcome(record(26, 0), False, EV).cause is Cause.LAUNCH_FAILED
    # the job script's launch checks failed (exit 125, before the program ran)
    assert ended_outcome(record(0, 125), False, EV).cause is Cause.NOT_LAUNCHABLE  # the job's own: no node blamed


def test_live_holds_gate_and_foreign_holds() -> None:
    (job,) = [j for j in parse_qstat((OUT / "qstat.xml").read_text()) if j.job_id == "3"]
    gated = live_reading(job, True, (), {}, None, EV)
    assert gated.gate_closed and gated.outcome.cause is Cause.GATED
    opened_then_held = live_reading(job, True, (), {"dispatch_gate": "open"}, None, EV)
    assert not opened_then_held.gate_closed and opened_then_held.outcome.cause is Cause.ADMIN_HELD
    operator = live_reading(job, False, ("operator hold",), {"dispatch_gate": "open"}, None, EV)
    assert operator.foreign_hold == "operator hold"
    held = live_reading(job, False, (), {"dispatch_gate": "open", "dispatch_hold": "h0000002a"}, 2145916740, EV)
    assert held.hold == "h0000002a" and held.outcome.cause is Cause.HELD
    stale = live_reading(job, False, (), {"dispatch_hold": "h0000002a"}, 1796140216, EV)
    assert stale.hold is None  # the start time was reset by a release: no hold, whatever the context says


@pytest.mark.parametrize(("state", "cause"), [("r", None), ("s", Cause.SUSPENDED), ("S", Cause.SUSPENDED),
                                             ("T", Cause.SUSPENDED), ("rs", Cause.SUSPENDED)])  # fmt: skip
def test_a_suspended_job_reads_running_suspended(state: str, cause: Cause | None) -> None:
    """qstat's s (by a user or an operator), S (its queue) and T (a threshold): still running with its slots,
    read running / suspended, which the stall judgement leaves alone."""
    (job,) = [j for j in parse_qstat((OUT / "qstat.xml").read_text()) if j.job_id == "3"]
    out = live_reading(dataclasses.replace(job, state=state), False, (), {"dispatch_gate": "open"}, None, EV).outcome
    assert (out.state, out.cause) == (State.RUNNING, cause)


def test_a_job_just_gone_from_qstat_and_not_yet_in_qacct_is_awaited_for_a_bounded_time() -> None:
    now = 1_800_000_000.0
    reason = awaiting_accounting(now - 15, None, now)
    assert reason is not None and "left qstat 15s ago" in reason
    assert awaiting_accounting(now - ACCOUNTING_LAG - 1, None, now) is None  # no record is coming: gone
    assert awaiting_accounting(None, None, now) is None  # never seen here: nothing to wait for
    stopped = awaiting_accounting(None, now - 5, now)
    assert stopped is not None and "deleted by dispatch while it ran" in stopped
    assert awaiting_accounting(None, now - ACCOUNTING_LAG - 1, now) is None
