"""Server-side apply with a simple, honest field-ownership model.

What it models:
- each object keeps, per field manager and operation (``Apply`` or ``Update``), the set of leaf
  field paths that manager last set; it is published as ``metadata.managedFields`` (FieldsV1);
- an apply that changes a field owned by another manager fails with 409 Conflict and
  ``FieldManagerConflict`` causes unless ``force=true``, which transfers ownership;
- an apply that stops sending a field it owned (and nobody else owns) removes it;
- create/update/patch record ``Update`` ownership of the leaf fields they changed.

What it does not model: lists are atomic leaves (no ``x-kubernetes-list-map-keys`` merging, so an
apply of ``containers`` owns and replaces the whole list); no ``x-kubernetes-map-type``; no
version conversion of managed fields; managedFields a client sends are ignored.
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
    ("metadata", "selfLink"),
}


def leaf_paths(obj: Any, prefix: Path = ()) -> set[Path]:
    """All leaf paths of ``obj``: dicts are descended into (an empty dict owns nothing); anything
    else (lists too) is a leaf."""
    if isinstance(obj, dict):
        out: set[Path] = set()
        for key, value in obj.items():
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
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _delete_path(obj: JSON, path: Path, keep: set[Path]) -> None:
    parents: list[tuple[JSON, str]] = []
    cur: Any = obj
    for part in path[:-1]:
        if not isinstance(cur, dict) or part not in cur:
            return
        parents.append((cur, part))
        cur = cur[part]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    # prune parents emptied by the removal unless someone owns them as leaves
    for depth in range(len(parents) - 1, -1, -1):
        parent, key = parents[depth]
        if parent.get(key) == {} and tuple(path[: depth + 1]) not in keep:
            del parent[key]
        else:
            break


def deep_merge(base: Any, overlay: Any) -> Any:
    """Merge dicts recursively; any non-dict value in ``overlay`` replaces the base value."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        out = copy.deepcopy(base)
        for key, value in overlay.items():
            out[key] = deep_merge(out.get(key), value)
        return out
    return copy.deepcopy(overlay)


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
        changed = {
            p for p in scoped_paths(new, subresource) if old is None or get_path(old, p) != get_path(new, p)
        }
        if changed:
            self._take((manager, "Update", subresource), changed, now)

    def apply(
        self, current: JSON, applied: JSON, manager: str, force: bool, subresource: str, now: str
    ) -> JSON:
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
                    "field": "." + ".".join(p),
                }
                for m, p in seen
            ]
            lines = "; ".join(f'conflict with "{m}": .{".".join(p)}' for m, p in seen)
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
        self._take(key, wanted, now)
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
