"""The extension reference in docs/concepts.md is what the registry generates, so it cannot drift."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_extension_reference_is_generated_from_the_registry() -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_extension_docs.py"), "--check"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr


def test_it_lists_every_kind_an_adapter_ships() -> None:
    text = (ROOT / "docs" / "concepts.md").read_text()
    for kind in ("slurm.Placement", "slurm.Resources", "kubeflow.RuntimeRef", "local.Limits", "dispatch.Image"):
        assert f"### `{kind}`" in text
    assert "| `gpusPerNode` | integer | none |" in text
