"""The parsers and the mapping on real bytes: every state captured from every real release.

The transcripts (``tests/slurm/transcripts/slurm-<release>.json``) hold the raw ``squeue``/``sacct`` answers,
JSON and text, captured by ``scripts/slurm/capture.py`` on the real clusters. Each capture is replayed to a
real :class:`SlurmBackend` (preflight answered by the kit, every read answered from the capture), so the
adapter reads the bytes exactly as it does on the cluster.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import pytest

import dispatch.slurm as slurm
from dispatch.clock import FakeClock
from dispatch.outcome import Cause, Evidence, State
from dispatch.slurm.mapping import outcome_of
from dispatch.slurm.parse import parse_sacct, parse_sacct_text, parse_squeue, release_of
from dispatch.slurmtest import CapturedExecutor, load_transcript, ready_preflight
from dispatch.spi import Gate

HERE = os.path.dirname(__file__)
_EV = Evidence("transcript", 0.0)
TRANSCRIPTS = sorted(glob.glob(os.path.join(HERE, "transcripts", "slurm-*.json")))
RELEASE_SERIES = ("22.05", "24.11", "26.05")

# state -> (State, Cause, exit code, signal) the adapter must read, live and from accounting alike
EXPECTED: dict[str, tuple[State, Cause | None, int | None, int | None]] = {
    "gated": (State.PENDING, Cause.GATED, None, None),
    "dispatch-held": (State.HELD, Cause.HELD, None, None),
    "admin-held": (State.HELD, Cause.ADMIN_HELD, None, None),
    "pending-resources": (State.PENDING, Cause.QUEUED, None, None),
    "running": (State.RUNNING, None, None, None),
    "completed": (State.SUCCEEDED, Cause.EXIT, 0, None),
    "failed-exit-3": (State.FAILED, Cause.EXIT, 3, None),
    "signal-killed": (State.FAILED, Cause.EXIT, None, 9),
    "cancelled": (State.CANCELLED, Cause.CANCELLED, None, None),
    "timeout": (State.FAILED, Cause.TIMEOUT, None, None),
    "oom-batch": (State.FAILED, Cause.OUT_OF_MEMORY, None, None),
    "oom-step": (State.FAILED, Cause.OUT_OF_MEMORY, None, None),
    "preempted": (State.FAILED, Cause.PREEMPTED, None, None),
    "node-fail": (State.FAILED, Cause.NODE_LOST, None, None),
    "requeued-held": (State.HELD, Cause.ADMIN_HELD, None, None),
}


def _transcripts() -> list[dict[str, Any]]:
    return [load_transcript(p) for p in TRANSCRIPTS]


def _cases() -> list[Any]:
    out = []
    for doc in _transcripts():
        for state, rec in doc["states"].items():
            for cap in rec["captures"]:
                out.append(pytest.param(doc, state, rec["job_id"], cap, id=f"{doc['release']}-{state}-{cap['phase']}"))
    return out


def inspect(release: str, capture: dict[str, Any], job_id: str):
    ex = CapturedExecutor(capture, ready_preflight(release, now=capture["at"]))
    b = slurm.new({}, executor=ex, clock=FakeClock(capture["at"]))
    return b.inspect(job_id)


def test_every_release_is_captured_with_every_state() -> None:
    got = {doc["release"][:5]: doc for doc in _transcripts()}
    assert sorted(got) == sorted(RELEASE_SERIES), f"transcripts for {sorted(got)}; run scripts/slurm/capture.py"
    for doc in got.values():
        missing = set(EXPECTED) | {"requeued"}
        missing -= set(doc["states"])
        assert not missing, f"{doc['release']} lacks {sorted(missing)}: run scripts/slurm/capture.py"


@pytest.mark.parametrize(("doc", "state", "job_id", "capture"), [c for c in _cases() if c.values[1] in EXPECTED])
def test_adapter_reads_the_captured_state(doc: dict, state: str, job_id: str, capture: dict) -> None:
    ev = inspect(doc["release"], capture, job_id)
    want_state, want_cause, want_code, want_signal = EXPECTED[state]
    o = ev.outcome
    assert (o.state, o.cause, o.exit_code, o.signal) == (want_state, want_cause, want_code, want_signal), o
    assert "None" not in o.detail.split()
    assert ev.gate is (Gate.CLOSED if state == "gated" else Gate.OPEN)
    if state == "dispatch-held":
        assert ev.holds == ("h0000abcd",)
    last = ev.executions[-1]
    if o.state is State.RUNNING:
        assert last.started_at is not None and last.ended_at is None  # no projected end taken as an end
    if o.state.ended and last.nodes:
        assert last.started_at is not None and last.ended_at is not None


@pytest.mark.parametrize(("doc", "state", "job_id", "capture"), [c for c in _cases() if c.values[1] == "requeued"])
def test_requeued_job_keeps_its_first_execution_ended(doc: dict, state: str, job_id: str, capture: dict) -> None:
    ev = inspect(doc["release"], capture, job_id)
    if capture["phase"] == "just-requeued" and len(ev.executions) == 1:
        # the controller had not counted the restart yet: one execution, never running without a start
        assert ev.outcome.state is not State.RUNNING or ev.executions[0].started_at is not None
        return
    assert len(ev.executions) == 2, ev.executions
    first, second = ev.executions
    assert first.outcome.state is State.CANCELLED or first.outcome.cause is Cause.PREEMPTED, first
    assert first.started_at is not None and first.ended_at is not None
    if ev.outcome.state is State.RUNNING:
        assert second.started_at is not None
    if capture["phase"] == "acct":
        assert ev.outcome.state is State.CANCELLED


@pytest.mark.parametrize(("doc", "state", "job_id", "capture"), _cases())
def test_text_and_json_agree_on_exit_code_and_signal(doc: dict, state: str, job_id: str, capture: dict) -> None:
    """sacct as text and as JSON give the same execution the same code and signal (22.05's JSON excepted:
    it loses exit codes, so the adapter never reads it for them)."""
    release = release_of(json.loads(capture["sacct_json"]))
    text = [j for j in parse_sacct_text(capture["sacct_text"], release) if j.job_id == job_id]
    _, js = parse_sacct(capture["sacct_json"])
    js = [j for j in js if j.job_id == job_id]
    assert len(text) == len(js)
    for t, j in zip(text, js, strict=True):
        if doc["release"].startswith("22.05"):
            continue
        a, b = outcome_of(t, _EV).outcome, outcome_of(j, _EV).outcome
        assert (a.exit_code, a.signal) == (b.exit_code, b.signal), (t, j)
    if capture["squeue_json"]:
        _, live = parse_squeue(capture["squeue_json"])
        assert [j.job_id for j in live] == [job_id]
