"""The garbage collector for owners the real apiextensions-apiserver holds (front world only).

In a cluster, kube-controller-manager's garbage collector deletes an object once none of its owners exists. The
project's server collects dependents of its own objects itself (store.py), but in the front world a TrainJob, a
JobSet or a Workload lives in the real apiextensions-apiserver, which has no garbage collector: this reactor plays
it for dependents (in either server) whose owner is a custom resource. Before deleting, it asks the API for the
owner (GET), as the real collector verifies an absent owner live, so a dependent seen before its owner's watch
event is never collected. Deletion is background; the ``orphan`` and ``foregroundDeletion`` finalizers on owners
are not modelled (an owner deleted that way stays deleting).
"""

from __future__ import annotations

from typing import Any

from ..resources import Catalogue, ResourceType, default_catalogue
from .base import Reactor

JSON = dict[str, Any]


class GarbageCollector(Reactor):
    manager = "garbage-collector"

    def __init__(self, cluster: Any, kinds: list[ResourceType], owner_groups: frozenset[str]) -> None:
        super().__init__(cluster)
        self.kinds = kinds
        self.owner_groups = owner_groups
        self.catalogue = Catalogue(default_catalogue())

    def _owner_exists(self, namespace: str, ref: JSON) -> bool:
        rt = self.catalogue.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if rt is None:
            return True  # an owner kind nobody here serves: leave the dependent alone
        ns = namespace if rt.namespaced else ""
        owner = self.store.try_get(rt, ns, str(ref.get("name", "")))
        if owner is not None and owner["metadata"].get("uid") == ref.get("uid"):
            return True
        fetch = getattr(self.store, "fetch", None)
        live = fetch(rt, ns, str(ref.get("name", ""))) if fetch is not None else owner
        return live is not None and live["metadata"].get("uid") == ref.get("uid")

    def reconcile(self) -> None:
        for rt in self.kinds:
            items, _ = self.store.list(rt)
            for obj in items:
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                refs = [
                    r
                    for r in meta.get("ownerReferences") or []
                    if str(r.get("apiVersion", "")).rpartition("/")[0] in self.owner_groups
                ]
                if refs and not any(self._owner_exists(meta.get("namespace", ""), r) for r in refs):
                    self.delete(rt, obj)
