"""Fault injection for any backend: fail the next call of a method, as a broken transport would.

The core conformance checks need to see the supervisor survive a status read that could not be made and a
start whose outcome is unknown. The memory adapter injects those inside its simulator; a real scheduler
cannot be asked to, so :class:`Faults` wraps the real backend instead and fails a call on its way in or out:

* ``unavailable``: the call is not made; :class:`~dispatch.errors.Unavailable` is raised (nothing was done).
* ``unknown`` with ``landed=False``: the call is not made; :class:`~dispatch.errors.OutcomeUnknown` is raised
  (the caller cannot tell it was not made, exactly like a connection cut before the request arrived).
* ``unknown`` with ``landed=True``: the call is made on the real scheduler, then OutcomeUnknown is raised
  instead of its answer (a connection cut after the request was carried out).
* ``unanswered`` (``inspect_many`` only): the call is made, and every object it shows is answered
  :class:`~dispatch.spi.Unanswered` instead (a scheduler whose accounting lags behind its queue).

Each injection fails one call. The wrapper implements exactly the optional interfaces the wrapped backend
does, and forwards every other attribute to it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dispatch.errors import OutcomeUnknown, Unavailable
from dispatch.spi import CORE_METHODS, OPTIONAL_METHODS, Backend, JobEvidence, Unanswered, view

if TYPE_CHECKING:
    from dispatch.conformance.core import CoreHarness

KINDS = ("unknown", "unavailable", "unanswered")


def _interface_methods() -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for ms in OPTIONAL_METHODS.values() for m in ms))


class Faults:
    """A plan of failures shared by every backend it wraps."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[str, bool]]] = {}
        self.injected: list[tuple[str, str, bool]] = []

    def inject(self, method: str, kind: str, landed: bool = False) -> None:
        """Fail the next call of ``method`` with ``kind`` (``unknown``, ``unavailable``, or for
        ``inspect_many`` ``unanswered``)."""
        if kind not in KINDS:
            raise ValueError(f"fault kind {kind!r}: expected one of {', '.join(KINDS)}")
        if kind == "unavailable" and landed:
            raise ValueError("an unavailable call never landed: landed must be False")
        if kind == "unanswered" and (method != "inspect_many" or landed):
            raise ValueError("an unanswered fault is for inspect_many only, and landed must be False")
        if method not in (*CORE_METHODS, *_interface_methods()):
            raise ValueError(f"{method!r} is not a backend method")
        with self._lock:
            self._pending.setdefault(method, []).append((kind, landed))

    def _take(self, method: str) -> tuple[str, bool] | None:
        with self._lock:
            queue = self._pending.get(method)
            if not queue:
                return None
            fault = queue.pop(0)
            self.injected.append((method, *fault))
            return fault

    def wrap(self, backend: Backend) -> Backend:
        """A view of ``backend`` whose calls fail as injected (named as the backend: checks name it)."""

        def call(name: str, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            fault = self._take(name)
            if fault is None:
                return method(*args, **kwargs)
            kind, landed = fault
            if kind == "unanswered":
                return _unanswered(method(*args, **kwargs))
            if kind == "unavailable":
                raise Unavailable(f"injected: {name} could not reach the cluster")
            if landed:
                method(*args, **kwargs)
                raise OutcomeUnknown(f"injected: {name} was carried out but its answer was lost")
            raise OutcomeUnknown(f"injected: {name} may or may not have been carried out")

        return view(backend, "", call=call, others=True, label="faulty")


def _unanswered(answer: Any) -> dict[str, Any]:
    """An ``inspect_many`` answer with every object shown turned into Unanswered, read at the same time."""
    out: dict[str, Any] = {}
    for sid, ev in answer.items():
        at = ev.outcome.evidence.observed_at if isinstance(ev, JobEvidence) else ev.observed_at
        out[sid] = Unanswered(sid, "injected: no answer for it yet", at)
    return out


def with_faults(core: CoreHarness) -> CoreHarness:
    """A copy of a :class:`~dispatch.conformance.core.CoreHarness` whose backends are wrapped by one
    :class:`Faults` plan, with ``inject`` set to it (any ``inject`` it had is replaced)."""
    faults = Faults()
    inner = core.base.backend
    base = dataclasses.replace(core.base, backend=lambda: faults.wrap(inner()))
    return dataclasses.replace(core, base=base, inject=faults.inject)
