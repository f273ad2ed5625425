"""The watcher's staleness is bounded and visible: a watch that cannot be resumed (its token revoked) is logged and
counted, the evidence read from its cache carries the time of its last successful sync, and a read of a cache
older than the bound raises Unavailable; restoring the token brings fresh reads back."""

from __future__ import annotations

import ast
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dispatch.errors import OutcomeUnknown, Unavailable
from dispatch.kubeflow.backend import KubeflowBackend
from dispatch.kubeflow.watch import Freshness
from dispatch.spi import StartRequest
from dispatch.supervise.metrics import WatchHealth

from .harness import TOKEN, FakeCluster, job_spec

pytestmark = pytest.mark.both_worlds

T = TypeVar("T")
REQUEST = 2.0
"""timeouts.apiserverRequest of these tests: the CallBound, hence the staleness bound, is REQUEST + 5 s."""


def kb(b: Any) -> KubeflowBackend:
    assert isinstance(b, KubeflowBackend)
    return b


def in_sync(b: KubeflowBackend, sid: str, cluster: FakeCluster, failure: str) -> None:
    """Wait until a read of ``sid`` is stamped with the clock's now: every watch in sync. One read may not be: the
    server ends each watch every REQUEST seconds, and a read in the moment before it is resumed carries the
    time of the last contact."""
    deadline = time.monotonic() + 15
    while True:
        try:
            if b.inspect(sid).outcome.evidence.observed_at == cluster.clock.now():
                return
        except Unavailable:
            pass
        assert time.monotonic() < deadline, failure
        time.sleep(0.2)


def _again(call: Callable[[], T], attempts: int = 5) -> T:
    for attempt in range(attempts):
        try:
            return call()
        except OutcomeUnknown:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def test_a_revoked_token_makes_reads_unavailable_within_the_bound(
    plain: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dispatch.kubeflow")
    b = kb(plain.backend(timeouts={"apiserverRequest": f"{REQUEST:g}s"}))
    bound = b.settings.call_bound
    try:
        # the set-up's calls run under the test's short request timeout too: on a loaded machine one may time out
        # (OutcomeUnknown) and is repeated, as the supervisor would (start and open are idempotent)
        sid = _again(lambda: b.start(StartRequest("j1", 1, "dsp-j1-1", job_spec("sleep"))))
        _again(lambda: b.open(sid))
        plain.tick(1)
        in_sync(b, sid, plain, "the watches did not sync after the start")  # the watches are open: in sync now

        revoked_at = time.monotonic()
        plain.control.revoke_token(TOKEN)
        last_ok: tuple[float, float] | None = None  # (clock now, observed_at) of the last read that answered
        unavailable: Unavailable | None = None
        # the open watches end by their server timeout, their resumption is refused (401), and from their last
        # sign of life the cache ages: a read past the bound must fail, within the server timeout + the bound
        while time.monotonic() - revoked_at < bound + REQUEST + 6:
            plain.tick(1)  # the injected clock runs on (1 s a step), so a stamp of "now" would show
            try:
                ev = b.inspect(sid)
            except Unavailable as exc:
                unavailable = exc
                break
            last_ok = (plain.clock.now(), ev.outcome.evidence.observed_at)
            time.sleep(0.2)
        waited = time.monotonic() - revoked_at
        assert unavailable is not None, f"reads still answered {waited:.1f}s after the token was revoked"
        assert waited <= bound + REQUEST + 3, f"Unavailable only after {waited:.1f}s (bound {bound:g}s)"
        assert "401" in str(unavailable)
        # stamped with the cache's last sync, not the read: older than the read by whole ticks (how many depends on
        # how many steps the loop made before the bound, fewer on a loaded machine)
        assert last_ok is not None and last_ok[0] - last_ok[1] >= 1, f"evidence stamped now: {last_ok}"
        for read in (
            lambda: b.inspect_many([sid]),
            lambda: b.find("dsp-j1-1", 0),
            lambda: b.watch(None, 0),
            lambda: b.cessation([sid]),
        ):
            with pytest.raises(Unavailable):
                read()

        assert isinstance(b, WatchHealth) and b.watch_age() > bound  # what the supervisor's metrics read
        failures = b.watch_failures()
        assert failures.get(("trainjobs", "401 Unauthorized"), 0) >= 1, failures
        logged = [r.getMessage() for r in caplog.records if r.name.startswith("dispatch.kubeflow")]
        assert any("trainjobs" in m and "401" in m and "Unauthorized" in m for m in logged), logged
        assert TOKEN not in caplog.text

        plain.control.restore_token(TOKEN)
        in_sync(b, sid, plain, "reads did not come back after the token was restored")
        assert any("recovered" in r.getMessage() for r in caplog.records if r.name.startswith("dispatch.kubeflow"))
    finally:
        plain.control.restore_token(TOKEN)
        b.close()


def test_the_bounds_follow_the_request_timeout() -> None:
    assert Freshness.of(60.0, 65.0) == Freshness(30, 60.0, 65.0)  # the defaults docs/adapters/kubeflow.md names
    assert Freshness.of(REQUEST, REQUEST + 5) == Freshness(1, 3.0, 7.0)
    assert Freshness.of(0.5, 5.5) == Freshness(1, 3.0, 5.5)  # a stream outlives its server timeout


def test_the_adapter_uses_no_private_attribute_of_lightkube() -> None:
    """Its objects' own attributes aside (``self._x``), the adapter and dispatch-admission read no ``_name`` of
    another object: lightkube's internals change without notice. ``_replace`` is a NamedTuple's public method."""
    src = Path(__file__).resolve().parents[2] / "src" / "dispatch"
    files = [*sorted((src / "kubeflow").glob("*.py")), src / "admission" / "controller.py"]
    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.attr != "_replace"
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    assert found == []


def test_an_object_this_process_deleted_is_not_brought_back_by_a_late_event() -> None:
    """start deletes a TrainJob it could not finish; the watch may still deliver that TrainJob's ADDED (or a
    list that began before the delete): a retried start must not find it in the cache and skip creating it."""
    from dispatch.kubeflow.watch import Cache

    cache = Cache(kueue=False, gate_name="dispatch", clock_now=time.time)
    old = {"metadata": {"name": "dj-j1-1", "uid": "u-1", "resourceVersion": "5"}}
    cache.put("trainjobs", old)
    cache.drop("trainjobs", old)
    assert "dj-j1-1" not in cache.trainjobs
    cache.event("trainjobs", "ADDED", old)  # late, from before the delete
    assert "dj-j1-1" not in cache.trainjobs
    cache.replace("trainjobs", [old])  # a list that began before the delete
    assert "dj-j1-1" not in cache.trainjobs
    new = {"metadata": {"name": "dj-j1-1", "uid": "u-2", "resourceVersion": "9"}}
    cache.event("trainjobs", "ADDED", new)  # the retried start's own TrainJob, same name
    assert cache.trainjobs["dj-j1-1"]["metadata"]["uid"] == "u-2"
