import pytest

from dispatch.adapterkit import check_hold, check_open, check_release
from dispatch.adapterkit.holds import matches
from dispatch.errors import Rejected
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.spi import Gate, JobEvidence


def evidence(gate: Gate, foreign: tuple[str, ...] = ()) -> JobEvidence:
    return JobEvidence(
        "42", "dsp-j-1", Outcome(State.PENDING, Cause.GATED, Evidence("test", 0.0)), gate, foreign_holds=foreign
    )


def test_open_acts_only_on_a_closed_gate() -> None:
    assert check_open(evidence(Gate.CLOSED)) is True
    assert check_open(evidence(Gate.OPEN)) is False


def test_open_never_lifts_a_foreign_hold() -> None:
    with pytest.raises(Rejected, match="admin-hold"):
        check_open(evidence(Gate.CLOSED, ("admin-hold",)))


def test_hold_is_idempotent_for_the_same_instance_even_when_not_waiting() -> None:
    assert check_hold("42", ("h00000001",), "h00000001", waiting=False) is False


def test_hold_of_a_waiting_object() -> None:
    assert check_hold("42", (), "h00000001", waiting=True) is True


def test_hold_of_an_object_that_is_not_waiting_is_rejected_naming_its_state() -> None:
    with pytest.raises(Rejected, match="running"):
        check_hold("42", (), "h00000001", waiting=False, state="running")


def test_another_instance_is_rejected_where_one_hold_fits() -> None:
    with pytest.raises(Rejected, match="h00000002"):
        check_hold("42", ("h00000002",), "h00000001", waiting=True)
    assert check_hold("42", ("h00000002",), "h00000001", waiting=True, single=False) is True


def test_encoded_holds_are_recognised_through_matches() -> None:
    read_back = "h" + format(__import__("zlib").crc32(b"mine"), "08x")
    assert check_hold("42", (read_back,), "mine", waiting=True, matches=matches) is False
    assert check_release("42", (read_back,), "mine", matches=matches) is True
    with pytest.raises(Rejected):
        check_release("42", (read_back,), "mine")


def test_release_without_a_hold_is_a_noop() -> None:
    assert check_release("42", (), "h00000001") is False


def test_release_of_another_instance_is_rejected() -> None:
    with pytest.raises(Rejected, match="not 'h00000001'"):
        check_release("42", ("h00000002",), "h00000001")
    assert check_release("42", ("h00000002", "h00000001"), "h00000001") is True
