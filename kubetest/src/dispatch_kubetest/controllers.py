"""The controller roles as controllers run: in a background thread, woken by watches, acting through the API.

In the front world (``FakeAPIServer(crd_backend=...)``) the reactors (Kueue, Trainer, JobSet, the Job
controller, the kubelet and scheduler, a garbage collector) read from the informer caches of an
:class:`~dispatch_kubetest.apistore.APIStore` and write over HTTP to the front. :class:`ControllerLoop` runs them:

- a round runs every reactor once, in a fixed order (Kueue, Trainer, JobSet, Job, Pod, garbage collector); each
  reactor is level-triggered (it looks at the whole cache and corrects what differs), so a round after any event
  is enough and no event needs interpreting;
- a round starts when a watch event arrives, when :meth:`kick` is called (the control surface does after it acts
  and after the injected clock moves: time-based reactions have no event), and again straight after a round that
  wrote something or failed (a failed round is retried after a short pause, as a controller requeues);
- :meth:`settle` resyncs the caches of the kinds other clients write (a barrier: a write made before it is seen
  even when its watch event is still on the way), kicks, and waits until the controllers are quiescent: a round
  that began after the kick and after the last event seen, wrote nothing and failed nowhere. It raises
  :class:`SettleTimeout` naming what kept changing or failing when that does not happen within its bound.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field

from .apistore import APIStore
from .errors import StatusError
from .reactors.base import Reactor
from .resources import ResourceType

log = logging.getLogger(__name__)


class SettleTimeout(AssertionError):
    """The controllers did not become quiescent in time (a reactor keeps writing, or keeps failing), or the API
    server refused the same write as invalid round after round."""


REFUSED_ROUNDS = 3
"""Rounds in a row in which the API server refuses the same write as invalid (422) before ``settle`` gives up
at once: a schema does not change its mind, so waiting for the timeout would only hide the model's bug (and on
a loaded machine the timeout can pass before the first round ends, hiding which write it was)."""


@dataclass
class Round:
    started_at_seq: int
    writes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class ControllerLoop:
    """Runs ``reactors`` against ``store`` in one daemon thread (see the module docstring)."""

    def __init__(
        self,
        store: APIStore,
        reactors: list[Reactor],
        *,
        external: tuple[ResourceType, ...] = (),
        retry_pause: float = 0.05,
    ) -> None:
        self.store = store
        self.reactors = reactors
        self.external = external
        """Kinds that clients other than the controllers write (the code under test: TrainJobs, runtime copies,
        dispatch-admission's Workload status): ``settle`` resyncs their caches first, so a write made just before
        it is seen even if its watch event is still on the way."""
        self.retry_pause = retry_pause
        self.round_lock = threading.RLock()
        """Held for a whole round; the control surface holds it while it plays the kubelet, so no round interleaves."""
        self._cond = threading.Condition()
        self._seq = 0
        self._last: Round | None = None
        self.rounds = 0
        self._refused: dict[str, int] = {}
        """Each 422 of the last round -> the rounds in a row that it came back."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kubetest-controllers", daemon=True)

    # ---- lifecycle ----------------------------------------------------------------------------------------
    def start(self, sync_timeout: float = 30.0) -> None:
        self.store.on_event = self.kick
        self.store.start()
        missing = self.store.wait_synced(sync_timeout)
        if missing:
            raise SettleTimeout(f"informers not synced after {sync_timeout} s: {', '.join(missing)}")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=10)
        self.store.stop()

    # ---- events -------------------------------------------------------------------------------------------
    def kick(self) -> int:
        """Ask for a round; answers the sequence number a later round will have seen."""
        with self._cond:
            self._seq += 1
            self._cond.notify_all()
            return self._seq

    def _run(self) -> None:
        seen = -1
        while not self._stop.is_set():
            with self._cond:
                while self._seq == seen and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return
                seen = self._seq
            current = self._round(seen)
            with self._cond:
                self._last = current
                self.rounds += 1
                self._refused = {e: self._refused.get(e, 0) + 1 for e in current.errors if ": 422 " in e}
                self._cond.notify_all()
            if current.errors:
                time.sleep(self.retry_pause)
            if current.writes or current.errors:
                seen = -1  # go again at once: a level-triggered controller requeues after it acted

    def _round(self, seq: int) -> Round:
        out = Round(seq)
        with self.round_lock:
            self.store.take_writes()
            for reactor in self.reactors:
                try:
                    reactor.reconcile()
                except StatusError as exc:
                    log.debug("%s: %s", reactor.manager, exc)
                    out.errors.append(f"{reactor.manager}: {exc.code} {exc.reason}: {exc.message}")
                except (OSError, ValueError, KeyError) as exc:
                    log.debug("%s: %s", reactor.manager, exc)
                    where = traceback.extract_tb(exc.__traceback__)[-1]
                    out.errors.append(
                        f"{reactor.manager}: {type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
                    )
            out.writes = self.store.take_writes()
        return out

    # ---- quiescence ---------------------------------------------------------------------------------------
    def _quiet(self, target: int) -> bool:
        last = self._last
        return (
            last is not None
            and last.started_at_seq >= target
            and last.started_at_seq == self._seq
            and not last.writes
            and not last.errors
        )

    def settle(self, timeout: float = 300.0, max_rounds: int = 100) -> int:
        """Resync the external kinds, kick, then wait until a round that saw everything so far changes nothing;
        answers the rounds run.

        Raises SettleTimeout on controllers that never stop writing (``max_rounds`` rounds without a quiet one:
        the failure this catches, whatever the machine's speed), on a write the API server refuses
        ``REFUSED_ROUNDS`` rounds in a row, and on a loop that is stuck (no quiet round within ``timeout``
        seconds: a bound for a loaded machine, where a round against a real API server can take seconds)."""
        self.store.resync(self.external)
        target = self.kick()
        deadline = time.monotonic() + timeout
        with self._cond:
            first = self.rounds
            while not self._quiet(target):
                refused = sorted(e for e, n in self._refused.items() if n >= REFUSED_ROUNDS)
                if refused:
                    raise SettleTimeout(
                        f"the API server refused a write {REFUSED_ROUNDS} rounds in a row: {refused[0]}"
                    )
                left = deadline - time.monotonic()
                if left <= 0 or self.rounds - first > max_rounds or not self._thread.is_alive():
                    last = self._last or Round(-1)
                    raise SettleTimeout(
                        f"controllers not quiescent after {self.rounds - first} rounds "
                        f"(bounds: {max_rounds} rounds, {timeout} s): "
                        f"last round wrote {last.writes[:8]}, failed {last.errors[:4]}, "
                        f"{self._seq - last.started_at_seq} event(s) since it began"
                    )
                self._cond.wait(min(left, 0.5))
            return self.rounds - first
