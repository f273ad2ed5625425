"""Fenced blocks of the project's Markdown, with the annotation that precedes each (see docs/dev/docs-examples.md).

A block is ```` ```lang ```` ... ```` ``` ````. An HTML comment on the lines just before it (blank lines allowed
in between) may annotate it: ``<!-- docs-test: skip: <why> -->`` exempts it, ``<!-- docs-test: file NAME -->``
makes it a file written into the document's working directory instead of a program to run, and
``<!-- docs-test: needs MODULE -->`` says it needs a Python module that is no dependency of dispatch (torch).
Several annotations may precede one block, one per line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Languages the harness runs, and those that are not code (shown, never run).
RUN = {"python", "bash", "sh", "console", "toml", "yaml", "json"}
TEXT = {"text"}

_FENCE = re.compile(r"^(```+)\s*([\w+-]*)\s*$")
_NOTE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>skip|file|needs)\s*:?\s*(?P<arg>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    skip: str | None = None  # the stated reason, when exempt
    file: str | None = None  # the file name, when a file block
    needs: tuple[str, ...] = ()  # modules the block needs beyond dispatch's dependencies

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md and every Markdown file under docs/, in a stable order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            j += 1
        if j == len(lines):
            raise ValueError(f"{path.relative_to(ROOT)}:{start + 1}: the fenced block is never closed")
        notes: dict[str, str] = {}
        needs: list[str] = []
        k = start - 1
        while k >= 0 and (not lines[k].strip() or _NOTE.match(lines[k])):
            note = _NOTE.match(lines[k])
            if note and note["kind"] == "needs":
                needs += note["arg"].replace(",", " ").split()
            elif note:
                notes[note["kind"]] = note["arg"]
            k -= 1
        text = "\n".join(lines[start + 1 : j]) + "\n"
        out.append(Block(path, start + 1, lang, text, notes.get("skip"), notes.get("file"), tuple(needs)))
        i = j + 1
    return out


def all_blocks() -> list[Block]:
    return [b for doc in documents() for b in blocks(doc)]
