"""Docs and code speak of the project, never of its issue tracker: no ``#12``, ``issue 7``, ``PR 3``, ``issue's``."""

from __future__ import annotations

import re
import subprocess

from .blocks import ROOT

PATTERNS = re.compile(
    r"(?<![\w&/\"'])#\d+\b(?!\s+\d)"  # "#12" (not "&#39;", a URL fragment, a quoted "#1" or a "#1 1001" lane label)
    r"|\bissues?\s*#?\d+"  # "issue 7", "issues #3"
    r"|\bissue-\d+"
    r"|\bissue's\b"  # "the issue's acceptance run"
    r"|\b(?:PR|pull request)\s*#?\d+",
    re.IGNORECASE,
)
SUFFIXES = {".md", ".py", ".sh", ".toml", ".yaml", ".yml", ".sql", ".cfg", ".txt", ""}


def tracked_text_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if "." + p.rsplit(".", 1)[-1] in SUFFIXES or "." not in p.rsplit("/", 1)[-1]]


def hits(text: str) -> list[str]:
    return [m.group(0) for m in PATTERNS.finditer(text)]


def test_no_issue_numbers_in_docs_or_code() -> None:
    files = tracked_text_files()
    assert any(f.endswith("README.md") for f in files) and len(files) > 100, "git ls-files listed the repository"
    found = []
    for rel in files:
        path = ROOT / rel
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if rel == "tests/docs/test_no_issue_references.py":
                break
            found += [f"{rel}:{n}: {h}" for h in hits(line)]
    assert not found, "issue-tracker references (say what the project does instead):\n" + "\n".join(found)


def test_the_patterns_see_what_they_must() -> None:
    assert hits("see issue 7 / records") == ["issue 7"]
    assert hits("fixed in #12.") == ["#12"]
    assert hits("this is the issue's acceptance run") == ["issue's"]
    assert hits("PR 31 and pull request #4") == ["PR 31", "pull request #4"]
    assert hits("# 1. install, [x](#states-and-causes), &#39;, http://h/#3, issuer 5") == []
    assert hits('#1 1001  execution 1.1001.0, startswith("#1")') == []
