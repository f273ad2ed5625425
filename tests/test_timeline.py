"""The timeline model, built from records the memory adapter and the real supervisor wrote."""

from __future__ import annotations

from dispatch import timeline as model
from dispatch.cli.timeline import render_text
from dispatch.records import MemoryRecords
from dispatch.ui import scenarios


def test_preempted_then_resubmitted_has_two_lanes_and_the_decision() -> None:
    records = MemoryRecords()
    m = scenarios.memory(records)
    job_id = scenarios.preempted_then_resubmitted(m)
    tl = model.build(records.get(job_id), m.clock.now())
    assert [lane.submission for lane in tl.lanes] == [1, 2]
    first = [b for b in tl.lanes[0].bars if b.kind == "execution"]
    second = [b for b in tl.lanes[1].bars if b.kind == "execution"]
    assert [(b.state, b.label) for b in first] == [("failed", "preempted")]
    assert [(b.state, b.label) for b in second] == [("succeeded", "exit 0")]
    assert first[0].end <= second[0].start and not second[0].open
    (decision,) = tl.markers
    assert decision.kind == "decision" and decision.label == "resubmit"
    assert "rule evicted" in decision.detail and "preempted" in decision.detail
    assert tl.start <= first[0].start and second[0].end <= tl.end


def test_a_held_submission_is_shaded_and_the_escalation_marked() -> None:
    records = MemoryRecords()
    m = scenarios.memory(records)
    job_id = scenarios.held_after_timeout(m)
    job = records.get(job_id)
    tl = model.build(job, m.clock.now())
    assert [b.label for b in tl.lanes[0].bars if b.kind == "execution"] == ["timeout"]
    holds = [s for s in tl.lanes[1].shades if s.kind == "hold"]
    assert len(holds) == 1 and holds[0].open and holds[0].end == m.clock.now()
    assert "park-on-timeout" in holds[0].label
    assert [mk.kind for mk in tl.markers] == ["decision", "escalation"]
    assert job.active_holds()[0].instance in tl.markers[1].detail


def test_text_rendering_lists_every_bar_and_marker() -> None:
    records = MemoryRecords()
    m = scenarios.memory(records)
    job_id = scenarios.escalated_after_limit(m)
    text = render_text(model.build(records.get(job_id), m.clock.now()), width=60)
    rows = text.splitlines()
    lanes = [r for r in rows if r.startswith("#")]
    assert len(lanes) == 4 and all("X" in r for r in lanes)
    assert next(r for r in rows if r.startswith("markers")).count("^") == 3
    assert text.count("failed (preempted)") == 4
    assert "escalated: preempted" in text and "limit is reached" in text
