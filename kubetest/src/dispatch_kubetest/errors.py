"""Kubernetes ``metav1.Status`` errors, raised inside the server and written as JSON bodies.

Reasons and messages follow the apiserver's wording (``k8s.io/apimachinery/pkg/api/errors``),
because clients and adapters branch on ``reason`` and sometimes parse ``message``.
"""

from __future__ import annotations

from typing import Any

from .resources import ResourceType

JSON = dict[str, Any]

REASON_FOR_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class StatusError(Exception):
    """An API failure carrying the ``Status`` object the server answers with."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: JSON | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASON_FOR_CODE.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}

    def status(self) -> JSON:
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt: ResourceType, name: str) -> JSON:
    d: JSON = {"name": name, "kind": rt.plural}
    if rt.group:
        d["group"] = rt.group
    return d


def not_found(rt: ResourceType, name: str) -> StatusError:
    return StatusError(404, f'{rt.key} "{name}" not found', "NotFound", _details(rt, name))


def namespace_not_found(namespace: str) -> StatusError:
    return StatusError(
        404, f'namespaces "{namespace}" not found', "NotFound", {"name": namespace, "kind": "namespaces"}
    )


def already_exists(rt: ResourceType, name: str) -> StatusError:
    return StatusError(409, f'{rt.key} "{name}" already exists', "AlreadyExists", _details(rt, name))


def conflict(rt: ResourceType, name: str) -> StatusError:
    return StatusError(
        409,
        f'Operation cannot be fulfilled on {rt.key} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        "Conflict",
        _details(rt, name),
    )


def invalid(rt: ResourceType, name: str, causes: list[JSON]) -> StatusError:
    """422 Invalid; each cause is ``{"reason": "FieldValueInvalid", "message": ..., "field": ...}``."""
    summary = ", ".join(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes)
    details = _details(rt, name)
    details["kind"] = rt.kind
    details["causes"] = causes
    return StatusError(422, f'{rt.kind}.{rt.group or "core"} "{name}" is invalid: [{summary}]', "Invalid", details)


def forbidden(user: str, verb: str, rt_key: str, group: str, namespace: str, name: str = "") -> StatusError:
    resource = rt_key.split(".", 1)[0]
    subject = f'{rt_key} "{name}"' if name else rt_key
    where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    message = f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}"{where}'
    details: JSON = {"kind": resource}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return StatusError(403, message, "Forbidden", details)


def gone(message: str) -> StatusError:
    return StatusError(410, message, "Expired")


def bad_request(message: str) -> StatusError:
    return StatusError(400, message, "BadRequest")
