"""Live progress on a terminal: ``dispatch run`` of a job that reports and ``dispatch submit --from`` draw one line
on stderr when it is a terminal (a pseudo-terminal here); piped, ``--quiet`` and ``--json`` write what they wrote
before, byte for byte."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from .conftest import Env

TRAIN = (
    "import time\n"
    "from dispatch import job\n"
    "print('starting', flush=True)\n"
    "for step in range(31):\n"
    "    job.progress(step, total=30)\n"
    "    time.sleep(0.1)\n"
    "print('finished', flush=True)\n"
)

RUN = ("run", "-e", "DISPATCH_PROGRESS_INTERVAL=0", "--", sys.executable, "-c", TRAIN)


def on_a_terminal(cli: Env, *args: str, env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run ``dispatch ARGS`` with stderr on a pseudo-terminal and stdout piped: (exit code, stdout, what the
    terminal received)."""
    master, slave = os.openpty()
    p = subprocess.Popen(
        cli.argv(*args),
        env={**cli.env, **(env or {})},
        cwd=cli.home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    )
    os.close(slave)
    assert p.stdout is not None
    fds = {master: b"", p.stdout.fileno(): b""}
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 60
    try:
        while fds and time.monotonic() < deadline:
            ready, _, _ = select.select(list(fds), [], [], 0.2)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the terminal's other end closed (Linux: EIO)
                    chunk = b""
                if chunk:
                    fds[fd] += chunk
                else:
                    got[fd] = fds.pop(fd)
        code = p.wait(timeout=30)
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
    got.update(fds)
    out, tty = got[p.stdout.fileno()], got[master]
    return code, out, tty


def test_run_shows_the_job_s_step_total_rate_and_eta_live_on_a_terminal(cli: Env) -> None:
    code, out, tty = on_a_terminal(cli, *RUN)
    assert code == 0, tty
    assert out == b"starting\nfinished\n"
    text = tty.decode()
    frames = re.findall(r"\r(step \d+/30 \[[#.]{20}\] \d+% [^\r\x1b]*)\x1b\[K", text)
    assert frames, text
    assert any(re.search(r"/s ETA \d", f) for f in frames), frames  # a rate and a time left once it moved
    assert "succeeded" in text.splitlines()[-1]  # the end line comes after the progress line, on its own


def test_run_with_quiet_or_json_on_a_terminal_draws_no_progress(cli: Env) -> None:
    for extra in ("--quiet", "--json"):
        code, out, tty = on_a_terminal(cli, RUN[0], extra, *RUN[1:])
        assert code == 0
        assert b"step " not in tty and b"\x1b[K" not in tty.replace(b"\r\x1b[K\r", b""), tty
        if extra == "--json":
            assert json.loads(out)["state"] == "succeeded"


def test_run_piped_writes_what_it_wrote_before(cli: Env) -> None:
    piped = cli.run(*RUN)
    never = subprocess.run(
        cli.argv(*RUN), env={**cli.env, "DISPATCH_PROGRESS_BAR": "never"}, cwd=cli.home, capture_output=True
    )
    assert piped.returncode == never.returncode == 0
    assert piped.stdout.encode() == never.stdout == b"starting\nfinished\n"

    def plain(err: bytes) -> bytes:  # the job id and the time it took differ from run to run
        job = re.search(rb"job (\S+) submitted", err)
        assert job, err
        return re.sub(rb"after [0-9.hms]+", b"after T", err.replace(job.group(1), b"ID"))

    assert plain(piped.stderr.encode()) == plain(never.stderr)
    assert "step " not in piped.stderr and "\r" not in piped.stderr


def _sweep(cli: Env, n: int) -> Path:
    path = cli.home / "sweep.json"
    path.write_text(json.dumps({"sweep": {"i": list(range(n))}, "spec": {"command": ["true"], "name": "s{i}"}}))
    return path


def test_submit_from_shows_each_phase_live_on_a_terminal(cli: Env) -> None:
    code, out, tty = on_a_terminal(cli, "submit", "--from", str(_sweep(cli, 12)))
    assert code == 0, tty
    assert len(out.decode().split()) == 12
    text = tty.decode()
    assert re.search(r"\rsubmitting 12 jobs to local: \[[#.]{20}\] recorded \d+/12", text), text
    assert "recorded 12/12, started 12/12, opened 12/12" in text and text.endswith("\n")


def test_submit_from_piped_or_as_json_writes_what_it_wrote_before(cli: Env) -> None:
    path = _sweep(cli, 3)
    piped = cli.run("submit", "--from", str(path))
    assert piped.returncode == 0 and piped.stderr == "" and len(piped.stdout.split()) == 3
    code, out, tty = on_a_terminal(cli, "submit", "--from", str(path), "--json")
    assert code == 0 and json.loads(out)["complete"] is True
    assert b"recorded" not in tty  # --json keeps its spinner, no progress line
