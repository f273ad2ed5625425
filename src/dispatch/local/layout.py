"""The local adapter's state directory: where each job's files live, and how they are read and written.

The GPU ledger is ``<state dir>/gpus/`` (``device-<id>.lock`` per device, ``ledger.lock``; see
:mod:`dispatch.local.ledger`). One directory per scheduler object, ``<state dir>/jobs/<scheduler id>/``::

    manifest.json            who made it (job id, submission, marker), when, its spec and working directory
    lock                     flock'ed around every change
    open.json                present once dispatch opened the start gate
    holds.json               {instance: placed at} of the holds on it
    stopped.json             present once it was asked to stop
    executions/<R>/          one directory per execution (restart R = 0, 1, ...)
        plan.json            what to run: argv, working directory, env, ranks and their output files, limits
        spawned.json         the launcher for it was started (written under the lock, before the start), with
                             the start's nonce; removed only when that launcher provably never runs
        claim.<nonce>.json   who settled that start: the launcher (its pid: it runs) or its spawner giving up
                             ({"abandoned": true}: it never runs), whichever created the file first
        launcher.json        the launcher's pid, start time, MASTER_PORT, the nodes' process groups, its GPUs
                             (or, while it waits for free ones, ``waiting``: why)
        rank-<r>.out/.err    each rank's stdout and stderr (kept after the job ends)
        rank-<r>.exit        each rank's exit code or signal
        end-request.json     why dispatch asked the launcher to end it (stop, requeue)
        result.json          the execution's outcome, written by the launcher last
        progress/rank-<r>.json  each rank's last progress report (dispatch.job.progress), read while it runs
        launcher.log         the launcher's own stderr (empty unless it crashed)

Every file is written atomically, so state survives the dispatch process and is read the same by any process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dispatch.adapterkit.progress import FILE as REPORT_FILE
from dispatch.adapterkit.progress import MAX_REPORT
from dispatch.local import launcher as files
from dispatch.local.launcher import job_lock, read_json, write_json

__all__ = ["ExecutionFiles", "JobFiles", "files", "job_lock", "read_json", "write_json"]


@dataclass(frozen=True)
class ExecutionFiles:
    """What one execution's directory holds, read at one time."""

    restart: int
    dir: str
    plan: dict[str, Any] | None
    spawned: dict[str, Any] | None
    launcher: dict[str, Any] | None
    result: dict[str, Any] | None
    launcher_alive: bool
    progress: tuple[tuple[int, bytes], ...] = ()
    """(rank, file content) of each rank's progress report, read only while the execution runs."""

    @classmethod
    def read(cls, job_dir: str, restart: int, *, alive: bool | None = None) -> ExecutionFiles:
        d = files.execution_dir(job_dir, restart)
        launcher = _dict(read_json(os.path.join(d, files.LAUNCHER)))
        result = _dict(read_json(os.path.join(d, files.RESULT)))
        if alive is None:
            alive = result is None and launcher is not None and pid_runs_launcher(launcher.get("pid"), job_dir)
        return cls(
            restart=restart,
            dir=d,
            plan=_dict(read_json(os.path.join(d, files.PLAN))),
            spawned=_dict(read_json(os.path.join(d, files.SPAWNED))),
            launcher=launcher,
            result=result,
            launcher_alive=alive,
            progress=_progress(d) if result is None and launcher is not None else (),
        )

    @property
    def running(self) -> bool:
        """Spawned, no result yet, and the launcher is alive (or not yet confirmed dead while spawning)."""
        return self.spawned is not None and self.result is None and (self.launcher_alive or self.launcher is None)


@dataclass(frozen=True)
class JobFiles:
    """Everything in one job directory, read at one time (no lock: every file is replaced atomically)."""

    scheduler_id: str
    dir: str
    manifest: dict[str, Any]
    gate_open: bool
    holds: dict[str, Any]
    stopped: dict[str, Any] | None
    executions: tuple[ExecutionFiles, ...]

    @classmethod
    def read(cls, job_dir: str) -> JobFiles | None:
        manifest = _dict(read_json(os.path.join(job_dir, files.MANIFEST)))
        if manifest is None:
            return None
        restarts = sorted(int(n) for n in _listdir(os.path.join(job_dir, files.EXECUTIONS)) if n.isdigit())
        holds = _dict(read_json(os.path.join(job_dir, files.HOLDS))) or {}
        return cls(
            scheduler_id=os.path.basename(job_dir),
            dir=job_dir,
            manifest=manifest,
            gate_open=os.path.exists(os.path.join(job_dir, files.GATE_OPEN)),
            holds=holds,
            stopped=_dict(read_json(os.path.join(job_dir, files.STOPPED))),
            executions=tuple(ExecutionFiles.read(job_dir, r) for r in restarts),
        )

    @property
    def spawned(self) -> list[ExecutionFiles]:
        return [e for e in self.executions if e.spawned is not None]

    @property
    def current(self) -> ExecutionFiles | None:
        """The last spawned execution."""
        spawned = self.spawned
        return spawned[-1] if spawned else None

    @property
    def queued(self) -> ExecutionFiles | None:
        """A planned execution not spawned yet (the first one, or one a requeue planned)."""
        for e in self.executions:
            if e.spawned is None and e.plan is not None:
                return e
        return None


def pid_runs_launcher(pid: object, job_dir: str) -> bool:
    """True if ``pid`` is alive and is the launcher of ``job_dir`` (its command line names the directory), so a
    reused pid is never mistaken for the launcher."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return os.fsencode(job_dir) in cmdline.split(b"\0")


def _progress(exec_dir: str) -> tuple[tuple[int, bytes], ...]:
    d = os.path.join(exec_dir, files.PROGRESS)
    out = []
    for name in _listdir(d):
        m = REPORT_FILE.fullmatch(name)
        if m is None:
            continue
        try:
            with open(os.path.join(d, name), "rb") as f:
                out.append((int(m.group(1)), f.read(MAX_REPORT + 1)))
        except OSError:
            continue  # replaced or removed meanwhile: the next read sees it
    return tuple(sorted(out))


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except (FileNotFoundError, NotADirectoryError):
        return []
