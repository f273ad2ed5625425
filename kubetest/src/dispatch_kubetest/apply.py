"""Server-side apply with a simple, honest field-ownership model.

What it models:
- each object keeps, per field manager and operation (``Apply`` or ``Update``), the set of leaf
  field paths that manager last set; it is published as ``metadata.managedFields`` (FieldsV1);
- an apply that changes a field owned by another manager fails with 409 Conflict and
  ``FieldManagerConflict`` causes unless ``force=true``, which transfers ownership;
- managers that apply the same value to a field share it (as the real server does); an apply that
  changes a value takes it from its other owners;
- an apply that stops sending a field it owned (and nobody else owns) removes it;
- create/update/patch record ``Update`` ownership of the leaf fields they changed.

Lists named in ``LIST_MAP_KEYS`` (``conditions`` by ``type``, ``admissionChecks``, ``containers``,
``env``, ``replicatedJobs``... by ``name``, ``runtimePatches`` by ``manager``) are map-lists as in the
upstream schemas: each item is owned and merged by its key, so an AdmissionCheck controller can
apply only its own ``status.admissionChecks`` entry. Every other list is atomic (owned and replaced
whole).

What it does not model: list-map keys beyond that fixed table (the real server reads them from
each schema's ``x-kubernetes-list-map-keys``), ``x-kubernetes-list-type: set``, map types, version
conversion of managed fields; managedFields a client sends are ignored.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import StatusError

JSON = dict[str, Any]
Path = tuple[str, ...]

_IDENTITY: set[Path] = {
    ("apiVersion",),
    ("kind",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "resourceVersion"),
    ("metadata", "uid"),
    ("metadata", "managedFields"),
    ("metadata", "creationTimestamp"),
    ("metadata", "generation"),
    ("metadata", "deletionTimestamp"),
    ("metadata", "deletionGracePeriodSeconds"),
    ("metadata", "selfLink"),
}


LIST_MAP_KEYS: dict[str, str] = {
    "conditions": "type",
    "admissionChecks": "name",
    "podSets": "name",
    "podSetAssignments": "name",
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "replicatedJobs": "name",
    "replicatedJobsStatus": "name",
    "jobsStatus": "name",
    "runtimePatches": "manager",
}


def _list_key(field: str, value: Any) -> str | None:
    """The map key of list ``value`` stored under ``field``, or None if the list is atomic."""
    key = LIST_MAP_KEYS.get(field)
    if key is None or not isinstance(value, list) or not value:
        return None
    if all(isinstance(item, dict) and key in item for item in value):
        return key
    return None


def _item_token(key: str, value: Any) -> str:
    return f"[{key}={value}]"


def _find_item(items: list[Any], token: str) -> int | None:
    key, _, wanted = token[1:-1].partition("=")
    for i, item in enumerate(items):
        if isinstance(item, dict) and str(item.get(key)) == wanted:
            return i
    return None


def leaf_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """All leaf paths of ``obj``: dicts are descended into (an empty dict owns nothing), map-lists
    are descended into per item (``[name=x]`` components); anything else is a leaf."""
    if isinstance(obj, dict):
        out: set[Path] = set()
        for key, value in obj.items():
            list_key = _list_key(str(key), value)
            if list_key is not None:
                for item in value:
                    out |= leaf_paths(item, (*prefix, str(key), _item_token(list_key, item[list_key])))
            else:
                out |= leaf_paths(value, (*prefix, str(key)))
        return out
    return {prefix} if prefix else set()


def scoped_paths(obj: JSON, subresource: str) -> set[Path]:
    """Leaf paths an operation on the main resource (``""``) or ``status`` may own."""
    paths = {p for p in leaf_paths(obj) if p not in _IDENTITY and p[:2] != ("metadata", "managedFields")}
    if subresource == "status":
        return {p for p in paths if p[0] == "status"}
    return {p for p in paths if p[0] != "status"}


def get_path(obj: Any, path: Path) -> Any:
    cur = obj
    for part in path:
        if part.startswith("[") and isinstance(cur, list):
            index = _find_item(cur, part)
            if index is None:
                return None
            cur = cur[index]
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return None
    return cur


def _delete_path(obj: JSON, path: Path, keep: set[Path]) -> None:
    """Remove the field at ``path``; then prune containers the removal emptied (a map-list item
    left with nothing but its key counts as empty) unless someone owns them."""
    chain: list[Any] = [obj]
    cur: Any = obj
    for part in path[:-1]:
        nxt = get_path(cur, (part,))
        if nxt is None:
            return
        chain.append(nxt)
        cur = nxt
    last = path[-1]
    if last.startswith("[") and isinstance(cur, list):
        index = _find_item(cur, last)
        if index is not None:
            del cur[index]
    elif isinstance(cur, dict):
        cur.pop(last, None)
    for depth in range(len(path) - 1, 0, -1):
        container, parent, part = chain[depth], chain[depth - 1], path[depth - 1]
        empty = container in ({}, [])
        if part.startswith("[") and isinstance(container, dict):
            key = part[1:-1].partition("=")[0]
            empty = set(container) <= {key}
        if not empty or tuple(path[:depth]) in keep:
            break
        if part.startswith("[") and isinstance(parent, list):
            index = _find_item(parent, part)
            if index is not None:
                del parent[index]
        elif isinstance(parent, dict):
            parent.pop(part, None)


def deep_merge(base: Any, overlay: Any, field: str = "") -> Any:
    """Merge dicts recursively and map-lists by key; any other ``overlay`` value replaces the base."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        out = copy.deepcopy(base)
        for key, value in overlay.items():
            out[key] = deep_merge(out.get(key), value, str(key))
        return out
    list_key = _list_key(field, overlay)
    if list_key is not None and _list_key(field, base) == list_key:
        merged = copy.deepcopy(base)
        for item in overlay:
            token = _item_token(list_key, item[list_key])
            index = _find_item(merged, token)
            if index is None:
                merged.append(copy.deepcopy(item))
            else:
                merged[index] = deep_merge(merged[index], item)
        return merged
    return copy.deepcopy(overlay)


def render_path(path: Path) -> str:
    """A path as the apiserver prints it in conflicts: ``.status.admissionChecks[name="x"].state``."""
    out = ""
    for part in path:
        if part.startswith("["):
            key, _, value = part[1:-1].partition("=")
            out += f'[{key}="{value}"]'
        else:
            out += f".{part}"
    return out


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


class Ownership:
    """Field ownership of one object: ``(manager, operation, subresource) -> paths`` plus times."""

    def __init__(self) -> None:
        self.owners: dict[tuple[str, str, str], set[Path]] = {}
        self.times: dict[tuple[str, str, str], str] = {}

    def copy(self) -> Ownership:
        other = Ownership()
        other.owners = {k: set(v) for k, v in self.owners.items()}
        other.times = dict(self.times)
        return other

    def _take(self, key: tuple[str, str, str], paths: set[Path], now: str) -> None:
        for other, owned in self.owners.items():
            if other != key:
                owned -= {p for p in owned if any(_overlaps(p, q) for q in paths)}
        self.owners.setdefault(key, set()).update(paths)
        self.times[key] = now
        for k in [k for k, v in self.owners.items() if not v]:
            del self.owners[k]
            self.times.pop(k, None)

    def record_update(self, old: JSON | None, new: JSON, manager: str, subresource: str, now: str) -> None:
        """Give ``manager`` (operation Update) the leaf fields that ``new`` added or changed."""
        changed = {p for p in scoped_paths(new, subresource) if old is None or get_path(old, p) != get_path(new, p)}
        if changed:
            self._take((manager, "Update", subresource), changed, now)

    def apply(self, current: JSON, applied: JSON, manager: str, force: bool, subresource: str, now: str) -> JSON:
        """Return ``current`` with ``applied`` merged in; updates ownership or raises 409."""
        key = (manager, "Apply", subresource)
        wanted = scoped_paths(applied, subresource)
        conflicts: list[tuple[str, Path]] = []
        for (other, op, sub), owned in self.owners.items():
            if (other, op, sub) == key or other == manager:
                continue
            for p in owned:
                for q in wanted:
                    if _overlaps(p, q) and get_path(current, q) != get_path(applied, q):
                        conflicts.append((other, q))
        if conflicts and not force:
            seen = sorted(set(conflicts))
            causes = [
                {
                    "reason": "FieldManagerConflict",
                    "message": f'conflict with "{m}"',
                    "field": render_path(p),
                }
                for m, p in seen
            ]
            lines = "; ".join(f'conflict with "{m}": {render_path(p)}' for m, p in seen)
            raise StatusError(
                409,
                f"Apply failed with {len(seen)} conflict{'s' if len(seen) > 1 else ''}: {lines}",
                "Conflict",
                {"causes": causes},
            )
        previously = self.owners.get(key, set())
        merged: JSON = deep_merge(current, {k: v for k, v in applied.items() if k != "metadata"})
        meta = applied.get("metadata") or {}
        merged_meta = merged.setdefault("metadata", {})
        for mk in ("labels", "annotations"):
            if mk in meta:
                merged_meta[mk] = deep_merge(merged_meta.get(mk) or {}, meta[mk])
        for mk in ("ownerReferences", "finalizers"):
            if mk in meta:
                merged_meta[mk] = copy.deepcopy(meta[mk])
        others: set[Path] = set()
        for k, owned in self.owners.items():
            if k != key:
                others |= owned
        for p in sorted(previously - wanted, key=len, reverse=True):
            if not any(_overlaps(p, q) for q in wanted) and p not in others:
                _delete_path(merged, p, others | wanted)
        # Ownership is shared: a field applied with the value it already has gains this manager as a co-owner;
        # only the fields this apply changes (possible only without conflicts, or forced) leave other managers.
        changed = {q for q in wanted if get_path(current, q) != get_path(applied, q)}
        self._take(key, changed, now)
        self.owners[key] = set(wanted)  # an applier owns exactly what it last applied
        self.times[key] = now
        if not wanted:
            self.owners.setdefault(key, set())
            self.times[key] = now
        return merged

    def managed_fields(self, api_version: str) -> list[JSON]:
        out: list[JSON] = []
        for (manager, op, sub), paths in sorted(self.owners.items()):
            fields: JSON = {}
            for p in sorted(paths):
                cur = fields
                for part in p:
                    if part.startswith("["):
                        key, _, value = part[1:-1].partition("=")
                        cur = cur.setdefault(f'k:{{"{key}":"{value}"}}', {})
                    else:
                        cur = cur.setdefault(f"f:{part}", {})
            entry: JSON = {
                "manager": manager,
                "operation": op,
                "apiVersion": api_version,
                "time": self.times.get((manager, op, sub), ""),
                "fieldsType": "FieldsV1",
                "fieldsV1": fields,
            }
            if sub:
                entry["subresource"] = sub
            out.append(entry)
        return out
