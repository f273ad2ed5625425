"""Capabilities are documented one by one: what a yes promises and what relies on it."""

from __future__ import annotations

from pathlib import Path

from dispatch.capabilities import Capability

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_concepts_explains_every_capability() -> None:
    text = (DOCS / "concepts.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in text.splitlines() if line.startswith("| `")}
    missing = {c.value for c in Capability} - rows
    assert not missing, f"docs/concepts.md has no row for {sorted(missing)}"
