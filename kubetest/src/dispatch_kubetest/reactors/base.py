"""Shared helpers for reactors: conditions, owner references, status and spec writes."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import StatusError
from ..resources import ResourceType

if TYPE_CHECKING:
    from ..objectstore import ObjectStore

JSON = dict[str, Any]


def find_condition(obj: JSON, type_: str) -> JSON | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None


def is_true(obj: JSON, type_: str) -> bool:
    cond = find_condition(obj, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    status: JSON, type_: str, value: str, reason: str, message: str, now: str, generation: int | None = None
) -> None:
    """``meta.SetStatusCondition``: ``lastTransitionTime`` moves only when the status changes."""
    conds: list[JSON] = status.setdefault("conditions", [])
    for cond in conds:
        if cond.get("type") == type_:
            if cond.get("status") != value:
                cond["lastTransitionTime"] = now
            cond["status"] = value
            cond["reason"] = reason
            cond["message"] = message
            if generation is not None:
                cond["observedGeneration"] = generation
            return
    new: JSON = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }
    if generation is not None:
        new["observedGeneration"] = generation
    conds.append(new)


def owner_ref(owner: JSON, controller: bool = True) -> JSON:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: JSON) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def meta(obj: JSON) -> JSON:
    m: JSON = obj.setdefault("metadata", {})
    return m


class Host(Protocol):
    """What a reactor needs of the cluster that runs it (:class:`~dispatch_kubetest.control.Cluster`, which sits
    above the reactors): the store it reads and writes through."""

    @property
    def reactor_store(self) -> ObjectStore: ...


class Reactor:
    """Base class. Subclasses set ``manager`` (their field-manager name) and implement reconcile().

    A reactor reads and writes only through ``self.store``, an :class:`~dispatch_kubetest.objectstore.ObjectStore`:
    the project's store in the in-process world, an APIStore (informer caches, HTTP writes) in the front world."""

    manager = "reactor"

    def __init__(self, cluster: Host) -> None:
        self.cluster = cluster

    @property
    def store(self) -> ObjectStore:
        return self.cluster.reactor_store

    def now(self) -> str:
        return self.store.clock.rfc3339()

    def reconcile(self) -> None:
        raise NotImplementedError

    def admit(self, rt: ResourceType, obj: JSON, old: JSON | None) -> None:
        """Webhook-like hook run before every create/update is stored (default: nothing)."""

    # ---- writes ---------------------------------------------------------------------------
    def create(self, rt: ResourceType, obj: JSON) -> JSON:
        ns = meta(obj).get("namespace", "")
        return self.store.create(rt, ns, obj, self.manager)

    def write_status(self, rt: ResourceType, obj: JSON, status: JSON) -> JSON:
        """Replace ``obj``'s status (no-op if unchanged)."""
        m = obj["metadata"]

        def change(cur: JSON) -> JSON:
            cur["status"] = copy.deepcopy(status)
            return cur

        return self.store.mutate(rt, m.get("namespace", ""), m["name"], change, self.manager, "status")

    def edit(self, rt: ResourceType, obj: JSON, change: Callable[[JSON], None]) -> JSON | None:
        """Edit the stored object (spec/metadata) in place through ``change``; None if it is gone."""
        m = obj["metadata"]

        def apply(cur: JSON) -> JSON:
            change(cur)
            return cur

        try:
            return self.store.mutate(rt, m.get("namespace", ""), m["name"], apply, self.manager)
        except StatusError as exc:
            if exc.code == 404:
                return None
            raise

    def delete(self, rt: ResourceType, obj: JSON, grace_seconds: int | None = None) -> None:
        """Delete ``obj`` (a pod gracefully, unless ``grace_seconds`` is 0); nothing if it is gone already."""
        m = obj["metadata"]
        try:
            self.store.delete(rt, m.get("namespace", ""), m["name"], grace_seconds=grace_seconds)
        except StatusError as exc:
            if exc.code != 404:
                raise

    def owned(self, rt: ResourceType, owner: JSON) -> list[JSON]:
        uid = owner["metadata"]["uid"]
        items, _ = self.store.list(rt, owner["metadata"].get("namespace") or None)
        return [o for o in items if controller_uid(o) == uid]
