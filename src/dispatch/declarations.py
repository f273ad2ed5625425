"""Declarations: the time bounds a backend promises, and the rules that tie them to its interfaces.

* ``node_loss_window``: the longest the scheduler takes to declare a lost node (and end its jobs). It may be
  ``UNBOUNDED`` for a scheduler that never ends a lost node's jobs by itself (Grid Engine with
  ``reschedule_unknown 0``): then a job on a lost node keeps reading as it last did (running) and is never
  concluded node-lost, and an ``unknown`` reading never counts as an ending (the supervisor's unknown grace is
  the NodeLossWindow); an operator must stop such a job, and the core conformance check of node loss does not
  apply.
* ``call_bound``: the landing bound. A call issued at t has taken effect by t + call_bound, or never will.
  Zero means the backend knows no such bound; then it may not offer Holder or Requeuer, because a late hold
  or requeue could land after the supervisor decided it had failed.
* ``polled_loss``: for a backend without a Watcher, how long each kind of evidence survives after a job ends
  (``UNBOUNDED`` for forever, 0 for not at all). The supervisor must poll at least as often as the shortest
  finite, non-zero window, or it may miss how a job ended.

All durations are float seconds; :data:`UNBOUNDED` is ``math.inf``. The rules between declarations and a
backend's interfaces are checked by :func:`dispatch.spi.check_backend`, next to the interfaces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dispatch.errors import ConfigError

UNBOUNDED = math.inf


def _window(value: float) -> str:
    return "unbounded" if math.isinf(value) else f"{value:g}s"


@dataclass(frozen=True)
class PolledLoss:
    """How long each kind of evidence survives after a job ends, for a polled backend."""

    state: float
    cause: float
    exit_code: float
    execution: float

    def __post_init__(self) -> None:
        for name in ("state", "cause", "exit_code", "execution"):
            value = getattr(self, name)
            if math.isnan(value) or value < 0:
                raise ValueError(f"polled loss window {name} must be >= 0 or UNBOUNDED")

    def shortest(self) -> float | None:
        """The shortest finite, non-zero window: the one polling must beat. None if there is none."""
        finite = [w for w in (self.state, self.cause, self.exit_code, self.execution) if 0 < w < math.inf]
        return min(finite) if finite else None

    def to_json(self) -> dict[str, str]:
        return {
            "state": _window(self.state),
            "cause": _window(self.cause),
            "exitCode": _window(self.exit_code),
            "execution": _window(self.execution),
        }


@dataclass(frozen=True)
class Declarations:
    """A backend's declared bounds. ``polled_loss`` is None exactly when the backend is a Watcher."""

    node_loss_window: float
    call_bound: float
    polled_loss: PolledLoss | None

    def __post_init__(self) -> None:
        if math.isnan(self.node_loss_window) or self.node_loss_window < 0:
            raise ValueError("node_loss_window must be a number of seconds >= 0, or UNBOUNDED")
        if not math.isfinite(self.call_bound) or self.call_bound < 0:
            raise ValueError("call_bound must be a finite number of seconds >= 0")

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeLossWindow": _window(self.node_loss_window),
            "callBound": _window(self.call_bound),
            "polledLoss": self.polled_loss.to_json() if self.polled_loss else None,
        }


def check_poll_interval(declarations: Declarations, interval: float) -> None:
    """Raise :class:`ConfigError` (key ``poll``) when ``interval`` is longer than the shortest PolledLoss window."""
    if not math.isfinite(interval) or interval <= 0:
        raise ConfigError("poll", "the poll interval must be a positive number of seconds")
    if declarations.polled_loss is None:
        return
    shortest = declarations.polled_loss.shortest()
    if shortest is not None and interval > shortest:
        raise ConfigError(
            "poll",
            f"polling every {interval:g}s is slower than the backend's shortest PolledLoss window "
            f"({shortest:g}s): evidence of how a job ended could vanish unseen; poll at least that often",
        )
