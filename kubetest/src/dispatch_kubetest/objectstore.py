"""The object interface the reactors and the control surface work through, in either test world.

Two implementations: :class:`~dispatch_kubetest.store.Store` (the project's server's own storage, used in-process
by the pure world) and :class:`~dispatch_kubetest.apistore.APIStore` (HTTP against one API endpoint, the front of
front.py, where the custom resources live in the real apiextensions-apiserver). A reactor written against this
Protocol cannot tell which one it has; what it may rely on is what both give:

- ``list``/``try_get``/``get`` answer copies; ``list`` sorts by (namespace, name) and also answers the version the
  list was read at (opaque: only the in-process store's is comparable to anything);
- ``create`` answers the stored object (defaulted, pruned); ``keep_status`` seeds a status in the same call;
- ``mutate(change)`` is read-modify-write: ``change`` gets a copy of the current object and returns the new one;
  a change that alters nothing writes nothing; ``subresource="status"`` writes only the status;
- ``delete`` deletes with background propagation (a finalizer keeps the object, marked deleting); a pod is deleted
  gracefully (kept Terminating, see store.py) unless ``grace_seconds`` is 0; ``grace_seconds`` is sent as the
  request's ``gracePeriodSeconds`` (None: not sent) and matters for pods only;
- errors are :class:`~dispatch_kubetest.errors.StatusError` with the HTTP code (404 gone, 409 conflict...).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from .clock import FakeClock
from .resources import ResourceType

JSON = dict[str, Any]


class ObjectStore(Protocol):
    clock: FakeClock

    def try_get(self, rt: ResourceType, namespace: str, name: str) -> JSON | None: ...

    def get(self, rt: ResourceType, namespace: str, name: str) -> JSON: ...

    def list(self, rt: ResourceType, namespace: str | None = None) -> tuple[list[JSON], Any]: ...

    def create(
        self, rt: ResourceType, namespace: str, obj: JSON, manager: str = "", *, keep_status: bool = False
    ) -> JSON: ...

    def mutate(
        self,
        rt: ResourceType,
        namespace: str,
        name: str,
        change: Callable[[JSON], JSON],
        manager: str = "",
        subresource: str = "",
    ) -> JSON: ...

    def delete(self, rt: ResourceType, namespace: str, name: str, *, grace_seconds: int | None = None) -> Any: ...

    def random_suffix(self, seed: str, length: int = 5) -> str: ...

    def created_at(self, obj: JSON) -> datetime:
        """When ``obj`` was created on the injected clock (the real server stamps wall-clock time; see apistore)."""
        ...
