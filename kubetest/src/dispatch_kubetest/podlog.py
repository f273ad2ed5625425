"""``pods/log``: container logs from the LogBook, optionally followed as they are appended.

A follow stream ends after the buffered lines when the container terminates, its log is finished,
the pod is removed (or replaced) or the test drops watches. A Terminating pod (deleted, within its grace
period) is still there: its log reads, and follows, as before the delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from . import errors
from .params import parse_bool
from .resources import POD
from .watch import WatchDropped

if TYPE_CHECKING:
    from .faults import Faults
    from .logs import LogBook
    from .store import Store

JSON = dict[str, Any]


class _Server(Protocol):
    @property
    def store(self) -> Store: ...
    @property
    def logs(self) -> LogBook: ...
    @property
    def faults(self) -> Faults: ...


class PodRef(Protocol):
    """The pod a log request names (handler.py's Target)."""

    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...


class LogRequest(Protocol):
    """What serving a pod's log needs of the request it answers (handler.py's RequestHandler, which calls it)."""

    @property
    def fake(self) -> _Server: ...
    @property
    def query(self) -> dict[str, str]: ...
    def send_body(self, code: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None: ...
    def start_stream(self, content_type: str, code: int = 200, headers: dict[str, str] | None = None) -> None: ...
    def chunk(self, data: bytes) -> None: ...
    def end_stream(self) -> None: ...


def serve_pod_log(handler: LogRequest, t: PodRef) -> None:
    """``GET .../pods/<name>/log``: the container's lines, or a stream of them with ``follow``."""
    store = handler.fake.store
    pod = store.get(POD, t.namespace, t.name)
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    container = handler.query.get("container")
    if not container:
        if len(containers) != 1:
            raise errors.bad_request(
                f"a container name must be specified for pod {t.name}, choose one of: [{' '.join(containers)}]"
            )
        container = containers[0]
    if container not in containers:
        raise errors.bad_request(f"container {container} is not valid for pod {t.name}")
    if not _container_started(pod, container):
        raise errors.bad_request(f'container "{container}" in pod "{t.name}" is waiting to start: ContainerCreating')
    if parse_bool(handler.query.get("previous")):
        restarts = int((_container_status(pod, container) or {}).get("restartCount", 0))
        if restarts == 0:
            raise errors.bad_request(f'previous terminated container "{container}" in pod "{t.name}" not found')
        raise errors.bad_request("previous=true (logs of an earlier container instance) is not modelled")
    follow = parse_bool(handler.query.get("follow"))
    stamps = parse_bool(handler.query.get("timestamps"))
    tail_text = handler.query.get("tailLines")
    lines, finished = handler.fake.logs.read(t.namespace, t.name, container)
    start = len(lines)  # where a follow continues: after everything read here
    if tail_text:
        lines = lines[-int(tail_text) :] if int(tail_text) > 0 else []

    def render(items: list[tuple[str, str]]) -> bytes:
        return "".join(f"{ts} {text}\n" if stamps else f"{text}\n" for ts, text in items).encode()

    if not follow:
        handler.send_body(200, render(lines), "text/plain")
        return
    handler.start_stream("text/plain")
    if lines:
        handler.chunk(render(lines))
    epoch = handler.fake.faults.drop_epoch
    uid = pod["metadata"]["uid"]
    while True:
        with store.lock:
            while True:
                new, finished = handler.fake.logs.read(t.namespace, t.name, container, start)
                current = store.try_get(POD, t.namespace, t.name)
                ended = (
                    finished
                    or current is None
                    or current["metadata"]["uid"] != uid
                    or _container_terminated(current, container)
                )
                if new or ended or handler.fake.faults.drop_epoch != epoch:
                    break
                store.changed.wait(0.25)
        if new:
            start += len(new)
            handler.chunk(render(new))
        if handler.fake.faults.drop_epoch != epoch:
            if handler.fake.faults.drop_is_abrupt:
                raise WatchDropped()
            break
        if ended and not new:
            break
    handler.end_stream()


def _container_status(pod: JSON, container: str) -> JSON | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == container:
            return dict(cs)
    return None


def _container_started(pod: JSON, container: str) -> bool:
    cs = _container_status(pod, container)
    state = (cs or {}).get("state") or {}
    return "running" in state or "terminated" in state


def _container_terminated(pod: JSON, container: str) -> bool:
    cs = _container_status(pod, container)
    return "terminated" in ((cs or {}).get("state") or {})
