"""The shipped fault-injection wrapper: one failure per injection, on the way in or out, interfaces kept."""

from __future__ import annotations

import pytest

from dispatch.actions import marker_for
from dispatch.conformance.faults import Faults
from dispatch.conformance.memory import memory_harness
from dispatch.errors import NotFound, OutcomeUnknown, Unavailable
from dispatch.spec import JobSpec
from dispatch.spi import Holder, JobEvidence, StartRequest, Unanswered, Watcher, interfaces_of


def request(n: int = 1) -> StartRequest:
    return StartRequest("j1", n, marker_for("j1", n), JobSpec(command=("sleep", "100"), nodes=1))


def test_unavailable_is_not_made_and_fails_once() -> None:
    faults = Faults()
    b = faults.wrap(memory_harness("slurm").backend())
    faults.inject("start", "unavailable")
    with pytest.raises(Unavailable):
        b.start(request())
    assert b.find(request().marker, 0.0) == []
    sid = b.start(request())
    assert [f.scheduler_id for f in b.find(request().marker, 0.0)] == [sid]


def test_unknown_landed_is_carried_out_and_unknown_not_landed_is_not() -> None:
    faults = Faults()
    b = faults.wrap(memory_harness("slurm").backend())
    faults.inject("start", "unknown", landed=True)
    with pytest.raises(OutcomeUnknown):
        b.start(request(1))
    assert len(b.find(request(1).marker, 0.0)) == 1
    faults.inject("start", "unknown", landed=False)
    with pytest.raises(OutcomeUnknown):
        b.start(request(2))
    assert b.find(request(2).marker, 0.0) == []
    assert faults.injected == [("start", "unknown", True), ("start", "unknown", False)]


def test_the_view_implements_what_the_backend_does_and_forwards_the_rest() -> None:
    inner = memory_harness("slurm").backend()
    view = Faults().wrap(inner)
    assert interfaces_of(view) == interfaces_of(inner)
    assert isinstance(view, Holder) and not isinstance(view, Watcher)
    assert view.scheduler is inner.scheduler  # type: ignore[attr-defined]
    with pytest.raises(NotFound):
        view.inspect("nope")


@pytest.mark.parametrize(
    ("method", "kind", "landed"),
    [
        ("start", "boom", False),
        ("nonsense", "unknown", False),
        ("open", "unavailable", True),
        ("inspect", "unanswered", False),
        ("inspect_many", "unanswered", True),
    ],
)
def test_bad_injections_are_refused(method: str, kind: str, landed: bool) -> None:
    with pytest.raises(ValueError):
        Faults().inject(method, kind, landed)


def test_unanswered_is_made_and_answers_every_object_shown_as_not_yet_once() -> None:
    faults = Faults()
    b = faults.wrap(memory_harness("slurm").backend())
    sid = b.start(request())
    faults.inject("inspect_many", "unanswered")
    got = b.inspect_many([sid, "999999"])
    assert set(got) == {sid}  # an id with no trace stays absent
    answer = got[sid]
    assert isinstance(answer, Unanswered) and answer.scheduler_id == sid and "injected" in answer.reason
    assert isinstance(b.inspect_many([sid])[sid], JobEvidence)
