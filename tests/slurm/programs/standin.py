"""Running one of the adapter's programs on its own: real bash (or awk) with stand-in commands on PATH that print
bytes captured from real clusters (tests/slurm/transcripts, tests/gridengine/outputs) and log their arguments."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "transcripts"
RELEASES = ("22.05.8", "24.11.5", "26.05.5")


def transcript(kind: str, release: str) -> dict[str, Any]:
    """``tests/slurm/transcripts/<kind>-<release>.json`` (kind ``slurm`` or ``arrays``)."""
    return dict(json.loads((TRANSCRIPTS / f"{kind}-{release}.json").read_text()))


def commands(where: Path, **outputs: str) -> dict[str, str]:
    """An environment whose PATH starts with stand-ins, one per keyword: each prints its text (verbatim) and
    appends ``<name> <args>`` to ``where/calls``. A text ``!N<message>`` makes it print the message on stderr and
    exit N."""
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, text in outputs.items():
        data = bin_dir / f"{name}.out"
        body = f'echo "{name} $*" >>"{where}/calls"\n'
        if text.startswith("!"):
            code, message = text[1], text[2:]
            data.write_text(message)
            body += f'cat "{data}" >&2\nexit {code}\n'
        else:
            data.write_text(text)
            body += f'cat "{data}"\n'
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LC_ALL": "C"}


def calls(where: Path) -> list[str]:
    log = where / "calls"
    return log.read_text().splitlines() if log.exists() else []


def bash(
    program: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``bash -c PROGRAM _ ARGS...``, as the adapter runs it (under ``umask 077``, as every script does)."""
    return subprocess.run(
        ["bash", "-c", f"umask 077\n{program}", "_", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
