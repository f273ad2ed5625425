"""Terminal output: aligned tables, colour only on a terminal (and never with NO_COLOR), ages, JSON, a spinner."""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import click

STATE_COLOURS = {
    "succeeded": "green",
    "failed": "red",
    "running": "cyan",
    "pending": "yellow",
    "held": "yellow",
    "cancelled": "magenta",
    "unknown": "red",
    "yes": "green",
    "no": "red",
}


def colour_enabled(stream: TextIO | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())


def style(text: str, *, fg: str | None = None, bold: bool = False, dim: bool = False, err: bool = False) -> str:
    if not colour_enabled(sys.stderr if err else sys.stdout):
        return text
    return click.style(text, fg=fg, bold=bold, dim=dim)


def state_style(text: str, key: str | None = None) -> str:
    return style(text, fg=STATE_COLOURS.get(key or text), bold=(key or text) in ("failed", "unknown"))


def width(text: str) -> int:
    """Display width, counting East Asian wide characters as two cells and ignoring ANSI escapes."""
    plain = click.unstyle(text)
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in plain)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], styles: Sequence[Any] | None = None) -> str:
    """A plain table: left-aligned columns two spaces apart, the header in bold on a terminal.

    ``styles`` optionally gives, per column, a function applied to each cell after alignment (colour does not
    disturb the alignment because widths are measured on the plain text).
    """
    widths = [width(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], width(cell))
    lines = ["  ".join(style(h.ljust(widths[i]), bold=True) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            pad = cell + " " * (widths[i] - width(cell))
            fn = styles[i] if styles and i < len(styles) else None
            cells.append(fn(cell, pad) if fn else pad)
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str, ensure_ascii=False))


def cell(text: object) -> str:
    """One table cell: never spanning lines, control characters made visible."""
    s = "-" if text is None or text == "" else str(text)
    return "".join(c if c.isprintable() else "?" for c in s)


@contextmanager
def spinner(message: str) -> Iterator[None]:
    """A spinner on stderr while a block runs, only on a terminal (and quiet otherwise)."""
    if not sys.stderr.isatty() or os.environ.get("DISPATCH_NO_SPINNER"):
        yield
        return
    stop = threading.Event()

    def spin() -> None:
        for frame in itertools.cycle("|/-\\"):
            if stop.wait(0.1):
                break
            sys.stderr.write(f"\r{frame} {message}")
            sys.stderr.flush()
        sys.stderr.write("\r" + " " * (len(message) + 2) + "\r")
        sys.stderr.flush()

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def note(message: str) -> None:
    """A message for the human, on stderr (stdout stays for data)."""
    click.echo(style(message, dim=True, err=True), err=True)
