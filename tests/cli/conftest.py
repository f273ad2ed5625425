"""CLI fixtures: XDG directories under tmp_path, and ``dispatch`` run as a real subprocess (the console script's
entry point, ``dispatch.cli.main:main``, with this worktree's ``src`` first on the path)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENTRY = "import sys; from dispatch.cli.main import main; sys.exit(main())"


@dataclass
class Env:
    home: Path
    env: dict[str, str]

    @property
    def config(self) -> Path:
        return self.home / "config" / "dispatch" / "config.toml"

    @property
    def records(self) -> Path:
        return self.home / "state" / "dispatch" / "records.db"

    @property
    def local_state(self) -> Path:
        return self.home / "state" / "dispatch" / "local"

    def argv(self, *args: str | bytes) -> list[str | bytes]:
        return [sys.executable, "-c", ENTRY, *args]

    def run(self, *args: str | bytes, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            errors="surrogateescape",
        )

    def json(self, *args: str) -> Any:
        p = self.run(*args, "--json")
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def popen(self, *args: str | bytes, sigint_ignored: bool = False) -> subprocess.Popen[str]:
        """``sigint_ignored``: start the command with SIGINT ignored, as a script's background job is."""

        def ignore_sigint() -> None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        return subprocess.Popen(
            self.argv(*args),
            env=self.env,
            cwd=self.home,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=ignore_sigint if sigint_ignored else None,
        )


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Env]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_"))}
    env.update(
        {
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "PYTHONPATH": SRC + os.pathsep + env.get("PYTHONPATH", ""),
            "NO_COLOR": "1",
        }
    )
    e = Env(tmp_path, env)
    e.config.parent.mkdir(parents=True)
    e.config.write_text('[clusters.local]\nadapter = "local"\n[clusters.local.settings]\ngrace = "1s"\n')
    yield e
    jobs = e.local_state / "jobs"
    if jobs.exists():
        from dispatch.clock import SystemClock
        from dispatch.local import LocalBackend

        b = LocalBackend(e.local_state, SystemClock())
        for d in jobs.iterdir():
            with contextlib.suppress(Exception):
                b.stop_job(d.name)


def wait_until(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.1)
