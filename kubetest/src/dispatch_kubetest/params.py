"""Query-parameter parsing shared by the request handlers."""

from __future__ import annotations

from . import errors


def parse_bool(text: str | None) -> bool:
    """Go's ``strconv.ParseBool`` (clients send ``true``, ``True``, ``1``...)."""
    if text is None:
        return False
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False", ""):
        return False
    raise errors.bad_request(f"invalid boolean value {text!r}")
