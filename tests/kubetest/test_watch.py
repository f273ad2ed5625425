"""Watch semantics through lightkube's watch loop (and raw HTTP where lightkube cannot ask)."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from lightkube import ApiError, Client
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap
from lightkube.types import OnErrorAction, OnErrorResult, PatchType

from dispatch_kubetest import FakeAPIServer

from .conftest import AUTH

EventQueue = queue.Queue[tuple[str, str, str]]
TIMEOUT = 10.0


def _watch_in_thread(
    client: Client, rv: str | None, on_error: object = None, labels: dict[str, str] | None = None
) -> tuple[EventQueue, threading.Thread]:
    events: EventQueue = queue.Queue()

    def run() -> None:
        kwargs: dict[str, object] = {"namespace": "default", "resource_version": rv}
        if on_error is not None:
            kwargs["on_error"] = on_error
        if labels:
            kwargs["labels"] = labels
        try:
            for type_, obj in client.watch(ConfigMap, **kwargs):  # type: ignore[call-overload]
                events.put((type_, obj.metadata.name, (obj.data or {}).get("v", "")))
        except ApiError as exc:
            events.put(("APIERROR", str(exc.status.code), exc.status.reason or ""))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return events, thread


def _take(events: EventQueue, n: int) -> list[tuple[str, str, str]]:
    return [events.get(timeout=TIMEOUT) for _ in range(n)]


def _raw_watch(server: FakeAPIServer, params: dict[str, str]) -> Iterator[dict]:
    with httpx.stream(
        headers=AUTH,
        method="GET",
        url=f"{server.url}/api/v1/namespaces/default/configmaps",
        params={"watch": "true", **params},
        timeout=TIMEOUT,
    ) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line:
                yield json.loads(line)


def test_watch_resumes_after_drop_without_missing_a_transition(server: FakeAPIServer, client: Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="w", namespace="default"), data={"v": "0"}))
    start_rv = client.list(ConfigMap, namespace="default")
    list(start_rv)
    events, _ = _watch_in_thread(client, start_rv.resourceVersion)
    assert server.control.wait_for_watches(1)
    for i in range(1, 4):
        client.patch(ConfigMap, "w", {"data": {"v": str(i)}}, namespace="default", patch_type=PatchType.MERGE)
    assert _take(events, 3) == [("MODIFIED", "w", "1"), ("MODIFIED", "w", "2"), ("MODIFIED", "w", "3")]

    server.control.drop_watches()  # the server ends the stream; changes happen while nobody watches
    client.patch(ConfigMap, "w", {"data": {"v": "4"}}, namespace="default", patch_type=PatchType.MERGE)
    client.delete(ConfigMap, "w", namespace="default")
    client.create(ConfigMap(metadata=ObjectMeta(name="w2", namespace="default"), data={"v": "5"}))
    # lightkube reconnects from the last version it saw and gets exactly the missed transitions
    assert _take(events, 3) == [("MODIFIED", "w", "4"), ("DELETED", "w", "4"), ("ADDED", "w2", "5")]
    assert events.empty()
    finished_watches = [r for r in server.requests(method="GET", path_contains="/configmaps") if "watch" in r.query]
    assert len(finished_watches) == 1, "the first stream really ended; the events came on a second one"


def test_abrupt_drop_is_a_client_error_that_retry_survives(server: FakeAPIServer, client: Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="a", namespace="default"), data={"v": "0"}))
    listing = client.list(ConfigMap, namespace="default")
    list(listing)
    errors: list[str] = []

    def retry(exc: Exception, count: int) -> OnErrorResult:
        errors.append(type(exc).__name__)
        return OnErrorResult(OnErrorAction.RETRY, sleep=0.01)

    events, _ = _watch_in_thread(client, listing.resourceVersion, on_error=retry)
    assert server.control.wait_for_watches(1)
    server.control.drop_watches(abrupt=True)
    client.patch(ConfigMap, "a", {"data": {"v": "1"}}, namespace="default", patch_type=PatchType.MERGE)
    assert _take(events, 1) == [("MODIFIED", "a", "1")]
    assert errors, "the connection was cut mid-stream, so the client saw a transport error"


def test_expired_resource_version_gives_410_then_relist_works(server: FakeAPIServer, client: Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="e", namespace="default"), data={"v": "0"}))
    listing = client.list(ConfigMap, namespace="default")
    list(listing)
    old_rv = listing.resourceVersion
    client.patch(ConfigMap, "e", {"data": {"v": "1"}}, namespace="default", patch_type=PatchType.MERGE)
    server.control.compact()

    events, thread = _watch_in_thread(client, old_rv)
    assert _take(events, 1) == [("APIERROR", "410", "Expired")]
    thread.join(TIMEOUT)

    relist = client.list(ConfigMap, namespace="default")
    assert [(c.metadata.name, c.data["v"]) for c in relist] == [("e", "1")]
    events, _ = _watch_in_thread(client, relist.resourceVersion)
    assert server.control.wait_for_watches(1)
    client.patch(ConfigMap, "e", {"data": {"v": "2"}}, namespace="default", patch_type=PatchType.MERGE)
    assert _take(events, 1) == [("MODIFIED", "e", "2")]


def test_small_history_window_expires_a_lagging_resume_point(server: FakeAPIServer, client: Client) -> None:
    server.control.set_history_window(2)
    client.create(ConfigMap(metadata=ObjectMeta(name="h", namespace="default"), data={"v": "0"}))
    rv = client.get(ConfigMap, "h", namespace="default").metadata.resourceVersion
    for i in range(3):
        client.patch(ConfigMap, "h", {"data": {"v": str(i + 1)}}, namespace="default", patch_type=PatchType.MERGE)
    first = next(_raw_watch(server, {"resourceVersion": rv}))
    assert first["type"] == "ERROR"
    assert first["object"]["code"] == 410 and first["object"]["reason"] == "Expired"
    assert first["object"]["message"].startswith("too old resource version")


def test_bookmarks_carry_the_current_version(server: FakeAPIServer, client: Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="b", namespace="default")))
    rv = client.get(ConfigMap, "b", namespace="default").metadata.resourceVersion
    stream = _raw_watch(server, {"resourceVersion": rv, "allowWatchBookmarks": "true"})
    # an unrelated write elsewhere moves the global version; the bookmark reports it
    server.control.add_namespace("other")
    event = next(stream)
    assert event["type"] == "BOOKMARK"
    assert event["object"]["kind"] == "ConfigMap"
    assert int(event["object"]["metadata"]["resourceVersion"]) > int(rv)
    stream.close()


def test_watch_without_version_starts_with_current_objects_and_timeout_ends_it(
    server: FakeAPIServer, client: Client
) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="x1", namespace="default")))
    client.create(ConfigMap(metadata=ObjectMeta(name="x2", namespace="default")))
    seen = [(e["type"], e["object"]["metadata"]["name"]) for e in _raw_watch(server, {"timeoutSeconds": "1"})]
    assert seen == [("ADDED", "x1"), ("ADDED", "x2")]


def test_selector_transitions_are_added_and_deleted(server: FakeAPIServer, client: Client) -> None:
    client.create(ConfigMap(metadata=ObjectMeta(name="s", namespace="default", labels={"team": "b"}), data={"v": "0"}))
    listing = client.list(ConfigMap, namespace="default", labels={"team": "a"})
    list(listing)
    events, _ = _watch_in_thread(client, listing.resourceVersion, labels={"team": "a"})
    assert server.control.wait_for_watches(1)
    client.patch(
        ConfigMap,
        "s",
        {"metadata": {"labels": {"team": "a"}}, "data": {"v": "1"}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    client.patch(ConfigMap, "s", {"data": {"v": "2"}}, namespace="default", patch_type=PatchType.MERGE)
    client.patch(
        ConfigMap,
        "s",
        {"metadata": {"labels": {"team": "c"}}, "data": {"v": "3"}},
        namespace="default",
        patch_type=PatchType.MERGE,
    )
    assert _take(events, 3) == [("ADDED", "s", "1"), ("MODIFIED", "s", "2"), ("DELETED", "s", "3")]


@pytest.mark.parametrize("code", [500, 503, 429])
def test_injected_errors_are_status_objects(server: FakeAPIServer, client: Client, code: int) -> None:
    server.control.faults.fail_next(2, code, method="GET", path_contains="/configmaps", retry_after=1)
    for _ in range(2):
        with pytest.raises(ApiError) as err:
            client.get(ConfigMap, "nothing", namespace="default")
        assert err.value.status.code == code
        assert err.value.response is not None and err.value.response.headers.get("Retry-After") == "1"
    with pytest.raises(ApiError) as err:
        client.get(ConfigMap, "nothing", namespace="default")
    assert err.value.status.code == 404, "the fault was used up"


def test_injected_delay(server: FakeAPIServer, client: Client) -> None:
    server.control.faults.delay(0.5, count=1, path_contains="/configmaps")
    start = time.monotonic()
    list(client.list(ConfigMap, namespace="default"))
    assert time.monotonic() - start >= 0.5
    assert server.control.faults.pending() == 0, "a counted delay is used up"
