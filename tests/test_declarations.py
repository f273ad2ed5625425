"""The rules that tie declarations to interfaces, and the capability model."""

from __future__ import annotations

import math

import pytest

from dispatch import Capability, ConfigError, Unsupported
from dispatch.capabilities import Capabilities, Provenance, no, unknown, yes
from dispatch.declarations import check_poll_interval
from dispatch.spi import UNBOUNDED, DeclarationError, Declarations, Holder, PolledLoss, check_backend, restrict


class Polled:
    def hold(self, scheduler_id: str, instance: str) -> None: ...

    def release(self, scheduler_id: str, instance: str) -> None: ...


class Watching:
    def watch(self, cursor: str | None, timeout: float) -> object: ...


def test_zero_call_bound_with_holder_is_refused() -> None:
    decl = Declarations(60, 0, PolledLoss(300, 300, 300, UNBOUNDED))
    with pytest.raises(DeclarationError, match="Holder"):
        check_backend(Polled(), decl)


def test_polled_backend_needs_polled_loss_and_watcher_must_not() -> None:
    with pytest.raises(DeclarationError, match="polled"):
        check_backend(object(), Declarations(60, 5, None))
    with pytest.raises(DeclarationError, match="Watcher"):
        check_backend(Watching(), Declarations(60, 5, PolledLoss(1, 1, 1, 1)))
    check_backend(Watching(), Declarations(60, 5, None))


def test_poll_interval_must_beat_the_shortest_window() -> None:
    decl = Declarations(60, 5, PolledLoss(300, 120, 300, UNBOUNDED))
    check_poll_interval(decl, 120)
    with pytest.raises(ConfigError, match="120s") as err:
        check_poll_interval(decl, 121)
    assert err.value.path == "poll"
    assert PolledLoss(0, UNBOUNDED, 0, UNBOUNDED).shortest() is None
    check_poll_interval(Declarations(60, 5, PolledLoss(0, 0, 0, 0)), 1e6)


def test_declarations_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        Declarations(-1, 5, None)
    with pytest.raises(ValueError):
        Declarations(60, math.inf, None)
    with pytest.raises(ValueError):
        PolledLoss(-1, 0, 0, 0)


def test_restrict_hides_interfaces_and_forwards_the_rest() -> None:
    from dispatch.clock import FakeClock
    from dispatch.memory import MemoryScheduler, backend

    b = backend(MemoryScheduler(FakeClock(), "slurm"))
    assert isinstance(b, Holder)
    r = restrict(b, (Holder,))
    assert not isinstance(r, Holder)
    assert r.name == "memory"
    assert dict(r.capabilities()) == dict(b.capabilities())
    assert r.declarations() == b.declarations()


def test_capabilities_need_every_answer_and_a_reason() -> None:
    with pytest.raises(ValueError, match="without an answer"):
        Capabilities({Capability.HOLD: yes("x")})
    with pytest.raises(ValueError, match="reason"):
        yes("")
    full = Capabilities({c: no("n/a") for c in Capability})
    with pytest.raises(Unsupported, match="Hold.*n/a"):
        full.require(Capability.HOLD, "a hold")
    probed = full.with_answer(Capability.HOLD, yes("probe job held", Provenance.PROBED))
    assert probed.lowered_for_read_only()[Capability.HOLD].answer.value == "unknown"
    assert unknown("x").answer.value == "unknown"
    assert set(full.to_json()) == {c.value for c in Capability}


def test_an_unbounded_node_loss_window_is_allowed_and_shown() -> None:
    d = Declarations(UNBOUNDED, 5, PolledLoss(60, 60, 60, 60))
    assert d.to_json()["nodeLossWindow"] == "unbounded"
    with pytest.raises(ValueError):
        Declarations(math.nan, 5, None)
