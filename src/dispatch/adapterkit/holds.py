"""Hold instances as 32-bit numbers, for schedulers that can store a number on a job but not a name.

A dispatch hold carries an *instance* (the core's form is ``h<8 hex digits>``), so a late or repeated call can
be told apart and only the owner lifts its hold. Slurm stores it as a far-future begin time, Grid Engine as a
far-future ``-a`` date: both are numbers. :func:`encode_instance` maps an instance to ``k`` in
``[0, HOLD_SPAN)``: the core's form exactly (``k`` is its hex value), any other string through CRC-32.
:func:`decode_instance` reads ``k`` back as ``h<k in hex>``, which is the instance itself in the core's form.

For any other instance string, an :class:`InstanceBook` remembers which instance a number stood for, in a
small JSON file when given a path (a :class:`~dispatch.adapterkit.shared.SharedState`), so a process that did
not place the hold reports the instance the core placed (an adapter that never sees non-canonical instances
needs no book).
"""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path

from dispatch.adapterkit.shared import SharedState

HOLD_SPAN = 1 << 32
_CANONICAL = re.compile(r"h([0-9a-f]{8})")


def encode_instance(instance: str) -> int:
    """The number in ``[0, HOLD_SPAN)`` that stands for ``instance``."""
    m = _CANONICAL.fullmatch(instance)
    return int(m.group(1), 16) if m else zlib.crc32(instance.encode("utf-8"))


def decode_instance(code: int) -> str | None:
    """The canonical instance a number stands for, or None when it is out of range (encodes no hold)."""
    if 0 <= code < HOLD_SPAN:
        return f"h{code:08x}"
    return None


def matches(instance: str, held: str) -> bool:
    """Whether a hold read back as ``held`` (canonical) is ``instance`` (for :mod:`dispatch.adapterkit.guards`)."""
    return held == instance or decode_instance(encode_instance(instance)) == held


class InstanceBook:
    """Which instance each number stood for. In memory only when ``path`` is None; otherwise kept in ``path``
    (a :class:`~dispatch.adapterkit.shared.SharedState`, tolerant: an unreadable book only loses names, and
    holds then read back in the canonical form) and shared by every process using the same file."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._state = SharedState(path, tolerant=True) if path is not None else None
        self._memory: dict[str, str] = {}

    def _load(self) -> dict[str, str]:
        if self._state is None:
            return self._memory
        return {str(k): str(v) for k, v in self._state.read().items()}

    def remember(self, instance: str) -> int:
        """Record ``instance`` under its number (before placing the hold) and return the number."""
        code = encode_instance(instance)
        canonical = decode_instance(code)
        if canonical == instance:
            return code  # the core's own form reads back as itself
        key = f"{code:08x}"
        if self._state is None:
            self._memory[key] = instance
            return code
        with self._state.update() as book:
            book[key] = instance
        return code

    def name(self, code: int) -> str | None:
        """The instance a number stood for: the remembered one, else the canonical form; None out of range."""
        canonical = decode_instance(code)
        if canonical is None:
            return None
        return self._load().get(f"{code:08x}", canonical)
