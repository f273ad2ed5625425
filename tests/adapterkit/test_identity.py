import pytest

from dispatch.actions import marker_for
from dispatch.adapterkit import execution_identity, submission_of
from dispatch.identity import RestartId


def test_submission_read_from_the_cores_marker() -> None:
    assert submission_of(marker_for("6b0e248a437748", 3)) == 3
    assert submission_of(marker_for("a-b_c", 12)) == 12


@pytest.mark.parametrize("marker", [None, "", "training", "dsp-x-0", "dsp-x-", "dsp-x-1a"])
def test_a_foreign_marker_gives_the_default(marker: str | None) -> None:
    assert submission_of(marker) == 1
    assert submission_of(marker, default=7) == 7


def test_execution_identity_round_trips() -> None:
    text = execution_identity(2, "4711", 1)
    assert text == "2.4711.1"
    assert RestartId.parse(text) == RestartId(2, "4711", 1)


@pytest.mark.parametrize(("n", "sid", "r"), [(0, "1", 0), (1, "1", -1), (1, "a b", 0), (1, "1;rm", 0)])
def test_bad_parts_are_refused(n: int, sid: str, r: int) -> None:
    with pytest.raises(ValueError):
        execution_identity(n, sid, r)
