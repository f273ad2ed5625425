"""Per-thread request context: whether the write being admitted came from an HTTP client.

Admission checks that model webhooks or schema validation apply to client requests only; the
reactors (which play controllers) write through the store directly and are marked internal.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_state = threading.local()


def is_external() -> bool:
    return bool(getattr(_state, "external", False))


def field_validation() -> str:
    return str(getattr(_state, "field_validation", ""))


@contextmanager
def external_request(field_validation_mode: str) -> Iterator[None]:
    _state.external = True
    _state.field_validation = field_validation_mode
    try:
        yield
    finally:
        _state.external = False
        _state.field_validation = ""


@contextmanager
def internal() -> Iterator[None]:
    """Writes made inside this block (by reactors) are not client requests."""
    saved = (getattr(_state, "external", False), getattr(_state, "field_validation", ""))
    _state.external = False
    _state.field_validation = ""
    try:
        yield
    finally:
        _state.external, _state.field_validation = saved
