"""docs/performance.md holds the project's figures: every section names the command that produced its figures and
the date they were measured, so a reader can rerun it and knows how old it is."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "performance.md"
COMMAND = re.compile(r"`(?:PYTHONPATH=src )?(?:time )?(?:python3? |\./scripts/|scripts/)[^`]+`")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", DOC.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_section_names_its_command_and_date() -> None:
    found = sections()
    assert len(found) >= 8, list(found)
    for title, text in found.items():
        assert COMMAND.search(text), f"section {title!r} names no command"
        assert DATE.search(text), f"section {title!r} gives no date"
