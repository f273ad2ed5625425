"""Watch streams: ADDED/MODIFIED/DELETED (and BOOKMARK, ERROR) events as JSON lines.

Semantics modelled on the apiserver's watch cache:
- no ``resourceVersion`` (or ``"0"``): synthetic ADDED events for the current objects, then changes;
- ``resourceVersion=N``: every change after N, in order; N older than the store's retained
  history gets one ERROR event carrying a 410 ``Expired`` Status, then the stream ends;
- the selector is applied to both the old and the new state of a changed object: an object that
  starts matching arrives as ADDED, one that stops matching as DELETED;
- with ``allowWatchBookmarks=true``, BOOKMARK events (an object of the watched kind carrying only
  ``metadata.resourceVersion``) are sent every ``bookmark_interval`` seconds of silence and when a
  test calls ``WatchHub.bookmark_now()``;
- ``timeoutSeconds`` ends the stream cleanly; ``Faults.drop_watches()`` ends every open stream.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import StatusError
from .faults import Faults
from .resources import ResourceType
from .store import Event, Store

JSON = dict[str, Any]


class WatchHub:
    """Bookkeeping shared by all watch streams of one server."""

    def __init__(self, bookmark_interval: float = 1.0) -> None:
        self._lock = threading.Condition()
        self.bookmark_interval = bookmark_interval
        self._bookmark_seq = 0
        self._open = 0

    def bookmark_now(self, store: Store) -> None:
        """Make every open watch that allows bookmarks send one now."""
        with self._lock:
            self._bookmark_seq += 1
        store.notify()

    @property
    def bookmark_seq(self) -> int:
        with self._lock:
            return self._bookmark_seq

    @property
    def open_watches(self) -> int:
        with self._lock:
            return self._open

    def opened(self) -> None:
        with self._lock:
            self._open += 1
            self._lock.notify_all()

    def closed(self) -> None:
        with self._lock:
            self._open -= 1
            self._lock.notify_all()

    def wait_for_open(self, count: int, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` watch streams are open (True) or ``timeout`` passes."""
        with self._lock:
            return self._lock.wait_for(lambda: self._open >= count, timeout)


@dataclass
class WatchRequest:
    rt: ResourceType
    namespace: str | None
    predicate: Callable[[JSON], bool]
    resource_version: str | None
    allow_bookmarks: bool
    timeout_seconds: float | None
    send_initial_events: bool = False
    """Watch-list: the current objects as ADDED, then a BOOKMARK annotated ``k8s.io/initial-events-end``."""


class WatchDropped(Exception):
    """Raised to the HTTP layer when a watch must be closed abruptly (no final chunk)."""


def _line(type_: str, obj: JSON) -> bytes:
    return json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n"


def translate(event: Event, req: WatchRequest) -> tuple[str, JSON] | None:
    """The event this watcher sees for a store event, or None if it sees nothing."""
    if event.rt.group != req.rt.group or event.rt.plural != req.rt.plural:
        return None
    new_match = req.predicate(event.obj)
    old_match = event.old is not None and req.predicate(event.old)
    if event.type == "ADDED":
        return ("ADDED", event.obj) if new_match else None
    if event.type == "DELETED":
        return ("DELETED", event.obj) if (new_match or old_match) else None
    if new_match and old_match:
        return "MODIFIED", event.obj
    if new_match:
        return "ADDED", event.obj
    if old_match:
        return "DELETED", event.obj
    return None


def run_watch(store: Store, hub: WatchHub, faults: Faults, req: WatchRequest, write: Callable[[bytes], None]) -> None:
    """Stream events for ``req`` through ``write`` until timeout, drop, error or disconnect."""
    start_epoch = faults.drop_epoch
    seen_bookmarks = hub.bookmark_seq
    deadline = time.monotonic() + req.timeout_seconds if req.timeout_seconds else None
    rv_text = req.resource_version
    initial_end = False
    if req.send_initial_events:  # resourceVersionMatch=NotOlderThan: the current state is never older
        items, cursor = store.list(req.rt, req.namespace, req.predicate)
        initial = [("ADDED", o) for o in items]
        initial_end = True
    elif rv_text in (None, "", "0"):
        items, cursor = store.list(req.rt, req.namespace, req.predicate)
        initial = [("ADDED", o) for o in items]
    else:
        try:
            cursor = int(str(rv_text))
        except ValueError:
            write(_line("ERROR", StatusError(400, f"invalid resource version {rv_text!r}").status()))
            return
        initial = []
        if cursor < store.oldest_resource_version:
            err = StatusError(410, f"too old resource version: {cursor} ({store.oldest_resource_version})", "Expired")
            write(_line("ERROR", err.status()))
            return
    for type_, obj in initial:
        write(_line(type_, obj))
    if initial_end:
        end = {
            "kind": req.rt.kind,
            "apiVersion": req.rt.api_version,
            "metadata": {"resourceVersion": str(cursor), "annotations": {"k8s.io/initial-events-end": "true"}},
        }
        write(_line("BOOKMARK", end))
    last_sent = time.monotonic()
    while True:
        out: list[tuple[str, JSON]] = []
        error: StatusError | None = None
        bookmark = False
        with store.lock:
            while True:
                if faults.drop_epoch != start_epoch:
                    break  # a drop wins over pending events: they are resent on resume
                try:
                    events = store.events_since(cursor)
                except StatusError as exc:
                    error = exc
                    break
                for ev in events:
                    seen = translate(ev, req)
                    if seen is not None:
                        out.append(seen)
                if events:
                    cursor = events[-1].rv
                if out:
                    break
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                if req.allow_bookmarks and (
                    hub.bookmark_seq != seen_bookmarks or now - last_sent >= hub.bookmark_interval
                ):
                    bookmark = True
                    seen_bookmarks = hub.bookmark_seq
                    break
                wait = 0.25
                if deadline is not None:
                    wait = min(wait, max(deadline - now, 0.0))
                if req.allow_bookmarks:
                    wait = min(wait, max(hub.bookmark_interval - (now - last_sent), 0.0))
                store.changed.wait(wait if wait > 0 else 0.001)
        if error is not None:
            write(_line("ERROR", error.status()))
            return
        if faults.drop_epoch != start_epoch:
            if faults.drop_is_abrupt:
                raise WatchDropped()
            return
        for type_, obj in out:
            write(_line(type_, obj))
        if out:
            last_sent = time.monotonic()
        if bookmark:
            marker = {
                "kind": req.rt.kind,
                "apiVersion": req.rt.api_version,
                "metadata": {"resourceVersion": str(cursor)},
            }
            write(_line("BOOKMARK", marker))
            last_sent = time.monotonic()
        if deadline is not None and time.monotonic() >= deadline:
            return
