"""The hostile argv vectors of the Slurm tests (read from tests/slurm/integration.py, so both stay one list),
plus markup that would run in a page if anything were left unescaped."""

from __future__ import annotations

import ast
from pathlib import Path

SLURM_TESTS = Path(__file__).resolve().parents[1] / "slurm" / "integration.py"


def _slurm_vectors() -> list[str]:
    tree = ast.parse(SLURM_TESTS.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HOSTILE" for t in node.targets):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list) and all(isinstance(v, str) for v in value)
            return value
    raise AssertionError(f"no HOSTILE list in {SLURM_TESTS}")


MARKUP = [
    "<script>window.pwned = 1</script>",
    '"><img src=x onerror="window.pwned=1">',
    "</title><svg onload=window.pwned=1>",
    "]]><!-- & &amp; &lt;",
    "{{ 7*7 }} {% raw %}",
]
HOSTILE = [*_slurm_vectors(), *MARKUP]
NAMES = [v for v in HOSTILE if v and v.isprintable() and len(v) <= 128]
"""The vectors a job name may carry (names are printable, 1 to 128 characters)."""
