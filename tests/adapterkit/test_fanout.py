"""One call to several hosts: all unreachable is Unavailable, done on some is OutcomeUnknown (real commands)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dispatch.adapterkit.commands import CommandResult, CommandRunner
from dispatch.adapterkit.fanout import call_each, settle, spread
from dispatch.errors import DispatchError, NotFound, OutcomeUnknown, Rejected, Unavailable

UP = CommandRunner(timeout=10, prefix=("sh", "-c"))
"""A host that answers (this machine, through a shell: the words arrive as over ssh)."""
DOWN = CommandRunner(
    timeout=10, prefix=("ssh", "-p", "1", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "127.0.0.1")
)
"""A host nothing listens on: ssh's connection is refused before any session (Unavailable, even for a write)."""


def touch_on(hosts: dict[str, CommandRunner], directory: Path) -> dict[str, CommandResult | DispatchError]:
    return call_each(list(hosts), lambda h: hosts[h].write(["touch", str(directory / h)]))


def test_every_host_answered_gives_each_answer(tmp_path: Path) -> None:
    got = settle("touch", touch_on({"a": UP, "b": UP}, tmp_path), write=True)
    assert sorted(got) == ["a", "b"] and all(r.ok for r in got.values())
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()


def test_no_host_reached_is_unavailable_and_nothing_was_done(tmp_path: Path) -> None:
    answers = touch_on({"a": DOWN, "b": DOWN}, tmp_path)
    with pytest.raises(Unavailable, match="touch: no host answered") as err:
        settle("touch", answers, write=True)
    assert "a: ssh failed" in str(err.value) and "b: ssh failed" in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_a_write_done_on_some_hosts_only_is_outcome_unknown(tmp_path: Path) -> None:
    answers = touch_on({"a": UP, "b": DOWN}, tmp_path)
    with pytest.raises(OutcomeUnknown, match="touch took effect in part: done on a, not done on b: ssh failed"):
        settle("touch", answers, write=True)
    assert [p.name for p in tmp_path.iterdir()] == ["a"]  # it did act, on a


def test_a_read_missing_a_host_is_unavailable() -> None:
    answers = call_each(["a", "b"], lambda h: (UP if h == "a" else DOWN).read(["true"]))
    with pytest.raises(Unavailable, match="answered by a only"):
        settle("ps", answers, write=False)


def test_the_calls_run_at_once() -> None:
    barrier = threading.Barrier(3, timeout=10)  # each call waits for the other two: sequential calls never pass
    got = call_each(["a", "b", "c"], lambda h: barrier.wait() >= 0 and h)
    assert got == {"a": "a", "b": "b", "c": "c"}


_answer = st.sampled_from(["ok", "unavailable", "unknown", "rejected"])


@given(st.dictionaries(st.sampled_from("abcd"), _answer, min_size=1), st.booleans())
def test_the_rule(kinds: dict[str, str], write: bool) -> None:
    make = {"unavailable": Unavailable, "unknown": OutcomeUnknown, "rejected": Rejected}
    answers: dict[str, str | DispatchError] = {h: k if k == "ok" else make[k](f"{h} said no") for h, k in kinds.items()}
    values = set(kinds.values())
    try:
        got = settle("call", answers, write=write)
    except DispatchError as exc:
        raised: type[DispatchError] | None = type(exc)
    else:
        raised = None
        assert got == {h: "ok" for h in kinds}
    if values == {"ok"}:
        assert raised is None
    elif write and values & {"ok", "unknown"}:
        assert raised is OutcomeUnknown  # took effect (or may have) somewhere: never repeated blindly
    elif "rejected" in values:
        assert raised is Rejected
    else:
        assert raised is Unavailable


def test_bad_uses_are_refused() -> None:
    with pytest.raises(ValueError, match="named twice"):
        call_each(["a", "a"], lambda h: h)
    with pytest.raises(ValueError, match="no host"):
        settle("call", {}, write=True)


def test_spread_gives_each_item_its_own_copy() -> None:
    errors = spread(NotFound("gone"), 3)
    errors[0].job_id = "j1"
    assert [type(e) for e in errors] == [NotFound] * 3 and errors[1].job_id is None
