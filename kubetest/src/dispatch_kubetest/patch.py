"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the approximated strategic merge.

Strategic merge patch is approximated by JSON merge patch: lists are replaced, not merged by
their patch merge keys. That is the documented gap for built-in types; custom resources refuse
strategic merge with 415 unless the server is told otherwise.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import StatusError, bad_request


def merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` with ``patch`` applied per RFC 7386 (``null`` deletes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [_unescape(t) for t in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for t in tokens:
        if isinstance(cur, dict) and t in cur:
            cur = cur[t]
        elif isinstance(cur, list) and t.isdigit() and int(t) < len(cur):
            cur = cur[int(t)]
        else:
            raise StatusError(422, f"jsonpatch: path /{'/'.join(tokens)} does not exist", "Invalid")
    return cur


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise StatusError(422, f"jsonpatch: bad index {last}", "Invalid")
    else:
        raise StatusError(422, "jsonpatch: parent is not a container", "Invalid")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise StatusError(422, "jsonpatch: cannot remove the root", "Invalid")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    _resolve(doc, tokens)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return doc


def json_patch(target: Any, operations: Any) -> Any:
    """Apply an RFC 6902 operation list; a non-list body is a 400 (as on the apiserver)."""
    if not isinstance(operations, list):
        raise bad_request("json patch body must be a JSON array of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation: {op!r}")
        kind = op["op"]
        tokens = _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _resolve(doc, tokens)
            doc = _add(_remove(doc, tokens), tokens, copy.deepcopy(op.get("value"))) if tokens else op["value"]
        elif kind == "test":
            if _resolve(doc, tokens) != op.get("value"):
                raise StatusError(422, f"jsonpatch: test failed at {op['path']}", "Invalid")
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_resolve(doc, source))
            if kind == "move":
                doc = _remove(doc, source)
            doc = _add(doc, tokens, value)
        else:
            raise bad_request(f"unknown json patch op {kind!r}")
    return doc
