"""Label and field selectors, parsed from query strings the way the apiserver parses them.

Label selectors support ``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)`` and
``k notin (a,b)``. Field selectors support ``=``, ``==`` and ``!=`` on the field labels each
resource allows; any other field label is a 400, as on a real server.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import bad_request
from .resources import ResourceType

JSON = dict[str, Any]

_FIELDS_ALL = ("metadata.name", "metadata.namespace")
_FIELDS_EXTRA: dict[str, tuple[str, ...]] = {
    "pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    "nodes": ("spec.unschedulable",),
    "events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "jobs": ("status.successful",),
    "namespaces": ("status.phase",),
}

_KEY = r"[A-Za-z0-9](?:[-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s+\(([^)]*)\)\s*$")
_OP_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*([-A-Za-z0-9_.]*)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!exists"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op == "exists":
            return present
        if self.op == "!exists":
            return not present
        if self.op == "=":
            return present and value == self.values[0]
        if self.op == "!=":
            return not present or value != self.values[0]
        if self.op == "in":
            return present and value in self.values
        return not present or value not in self.values  # notin


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p for p in (s.strip() for s in parts) if p]


def parse_label_selector(text: str | None) -> list[Requirement]:
    """Parse ``labelSelector``; raises a 400 ``StatusError`` on bad syntax."""
    if not text:
        return []
    reqs: list[Requirement] = []
    for part in _split_top_level(text):
        m = _SET_RE.match(part)
        if m:
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(Requirement(m.group(1), m.group(2), values))
            continue
        m = _OP_RE.match(part)
        if m:
            op = "=" if m.group(2) in ("=", "==") else "!="
            reqs.append(Requirement(m.group(1), op, (m.group(3),)))
            continue
        m = _EXISTS_RE.match(part)
        if m:
            reqs.append(Requirement(m.group(2), "!exists" if m.group(1) else "exists"))
            continue
        raise bad_request(f"unable to parse requirement: {part!r}")
    return reqs


def labels_match(reqs: list[Requirement], obj: JSON) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


def _get_path(obj: JSON, dotted: str) -> str:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    negate: bool
    value: str

    def matches(self, obj: JSON) -> bool:
        return (_get_path(obj, self.field) == self.value) != self.negate


def parse_field_selector(text: str | None, rt: ResourceType) -> list[FieldRequirement]:
    """Parse ``fieldSelector`` for ``rt``; unsupported field labels are a 400 like the apiserver's."""
    if not text:
        return []
    allowed = _FIELDS_ALL + _FIELDS_EXTRA.get(rt.plural, ())
    out: list[FieldRequirement] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        m = re.match(r"^([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*)$", part)
        if not m:
            raise bad_request(f"invalid field selector: {part!r}")
        name = m.group(1)
        if name not in allowed:
            raise bad_request(f'"{name}" is not a known field selector: only "{", ".join(allowed)}"')
        out.append(FieldRequirement(name, m.group(2) == "!=", m.group(3)))
    return out


def fields_match(reqs: list[FieldRequirement], obj: JSON) -> bool:
    return all(r.matches(obj) for r in reqs)


def make_filter(
    labels: list[Requirement], fields: list[FieldRequirement], namespace: str | None
) -> Callable[[JSON], bool]:
    """A predicate for objects in ``namespace`` (``None`` = all) that match both selectors."""

    def predicate(obj: JSON) -> bool:
        if namespace is not None and (obj.get("metadata") or {}).get("namespace") != namespace:
            return False
        return labels_match(labels, obj) and fields_match(fields, obj)

    return predicate
