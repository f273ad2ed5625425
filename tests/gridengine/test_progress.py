"""Progress on Grid Engine: the job's rank writes its reports beside its output, the backend reads them with the
job's state (no command per job), ``dispatch status``/``show`` show them, and on the real cell a stall rule ends
a job whose rank went silent, blames its host and resubmits it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dispatch.actions import marker_for
from dispatch.capabilities import Capability
from dispatch.clock import SystemClock
from dispatch.cluster import Cluster
from dispatch.gridengine import GridEngineBackend, GridEngineSettings, progress
from dispatch.gridengine.submit import build
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.records.model import Action
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest
from dispatch.supervise import Supervisor

from .cell import description

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENTRY = "import sys; from dispatch.cli.main import main; sys.exit(main())"


# ---- the pieces (no cell) ----------------------------------------------------------------------------------


def test_the_job_script_gives_the_rank_a_progress_directory_beside_its_output(tmp_path: Path) -> None:
    out = tmp_path / "out put's"  # a space and a quote: the directory is one shell word
    request = StartRequest("j1", 2, marker_for("j1", 2), JobSpec(("true",)))
    job = build(request, GridEngineSettings(), str(out))
    script = job.script
    assert "-o" in job.argv and f"{out}/{request.marker}.$JOB_ID.out" in job.argv
    job_id = "4711"
    env = subprocess.run(
        ["bash", "-c", script.split("\nexec ")[0] + '\nprintf %s "$DISPATCH_PROGRESS_DIR"'],
        env={"PATH": os.environ["PATH"], "JOB_ID": job_id, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert env == progress.directory(str(out), request.marker, job_id)
    assert os.path.isdir(env)  # made by the script: the rank's first report needs no mkdir


def test_only_this_executions_reports_are_read(tmp_path: Path) -> None:
    d = tmp_path / "m.17.progress"
    d.mkdir()
    report = {"rank": 0, "step": 30, "total": 100, "at": 1_800_000_010.5, "execution": "2.17.0"}
    (d / "rank-0.json").write_text(json.dumps(report))
    (d / "rank-1.json").write_text(json.dumps({**report, "rank": 1, "execution": "1.17.0"}))  # an older one's
    (d / "rank-2.json").write_text("not a report")
    (d / "rank-3.json").write_text(json.dumps({**report, "rank": 3, "pad": "x" * 5000}))  # too large to be one
    (d / "notes.txt").write_text(json.dumps(report))
    raw = progress.read_raw(str(d))
    assert sorted(raw) == [0, 1, 2]
    (p,) = progress.reports_of(raw, "2.17.0")
    assert (p.rank, p.step, p.total, p.at) == (0, 30, 100, 1_800_000_010.5)
    assert progress.read_raw(str(tmp_path / "missing")) == {}


# ---- on the real cell ----------------------------------------------------------------------------------------


def _settings(tmp: Path) -> dict[str, Any]:
    d = description()
    return {
        "sgeRoot": d["sge_root"],
        "sgeCell": d["sge_cell"],
        "queue": d["queue"],
        "stateDir": str(tmp / "state"),
        "outputDir": str(tmp / "output"),
    }


def _dispatch(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_"))}
    env.update(XDG_CONFIG_HOME=str(home / "config"), XDG_STATE_HOME=str(home / "state"), NO_COLOR="1")
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "-c", "sge", *args], env=env, capture_output=True, text=True, timeout=120
    )


REPORTING = (
    "import time\n"
    "from dispatch import job\n"
    "for step in range(100000):\n"
    "    job.progress(step, total=100000, loss=0.5)\n"
    "    time.sleep(0.05)\n"
)


@pytest.mark.gridengine
def test_status_and_show_carry_the_ranks_progress_on_the_cell(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    config = tmp_path / "config" / "dispatch" / "config.toml"
    config.parent.mkdir(parents=True)
    lines = [f"{k} = {json.dumps(v)}" for k, v in settings.items()]
    config.write_text('[clusters.sge]\nadapter = "gridengine"\n[clusters.sge.settings]\n' + "\n".join(lines) + "\n")
    backend = GridEngineBackend(GridEngineSettings(**_snake(settings)), SystemClock())
    answer = backend.capabilities()[Capability.PROGRESS_REPORTING]
    assert answer.yes and ".progress/rank-<r>.json" in answer.reason
    p = _dispatch(tmp_path, "submit", "-e", "DISPATCH_PROGRESS_INTERVAL=0.2", "-e", f"PYTHONPATH={SRC}", "--",
                  sys.executable, "-c", REPORTING)  # fmt: skip
    assert p.returncode == 0, p.stderr
    job = p.stdout.strip()
    try:
        deadline = time.monotonic() + 180  # the cell's scheduler starts it within its interval; a loaded machine
        row: dict[str, Any] = {}
        while True:
            s = _dispatch(tmp_path, "status", job, "--json")
            assert s.returncode == 0, s.stderr
            (row,) = json.loads(s.stdout)
            ranks = row.get("progress", [])
            if len(ranks) == 1 and ranks[0]["rate"]:
                break
            assert time.monotonic() < deadline, row
            time.sleep(1)
        (r,) = row["progress"]
        assert r["rank"] == 0 and r["total"] == 100000 and 0 < r["step"] < 100000 and r["metrics"] == {"loss": 0.5}
        assert 0 <= r["lastReportAgeSeconds"] < 60 and r["endsAt"] > 0
        shown = _dispatch(tmp_path, "show", job).stdout
        assert "progress (as read now):" in shown and "rank 0: step " in shown and "loss=0.5" in shown
        table = _dispatch(tmp_path, "status", job).stdout
        # any step and percentage: the rank goes on stepping between the reads (1% after about 50 s at ~19/s)
        assert "PROGRESS" in table.splitlines()[0] and re.search(r" \d+/100000 \(\d+%\)", table), table
    finally:
        assert _dispatch(tmp_path, "stop", job).returncode == 0


def _snake(settings: dict[str, Any]) -> dict[str, Any]:
    names = {"sgeRoot": "sge_root", "sgeCell": "sge_cell", "stateDir": "state_dir", "outputDir": "output_dir"}
    return {names.get(k, k): v for k, v in settings.items()}


# Submission 1 reports a few steps and then hangs without a word; submission 2 reports to its end.
HANGING = (
    "import time\n"
    "from dispatch import job\n"
    "hang = job.context().submission == 1\n"
    "for step in range(1, 31):\n"
    "    job.progress(step, total=30)\n"
    "    if hang and step == 5:\n"
    "        while True:\n"
    "            time.sleep(1)\n"
    "    time.sleep(0.1)\n"
)
BOUND = 5.0
POLL = 1.0


@pytest.mark.gridengine
def test_a_silent_rank_is_ended_as_stalled_its_host_blamed_and_the_job_resubmitted(tmp_path: Path) -> None:
    clock = SystemClock()
    records = SQLiteRecords(tmp_path / "records.db")
    backend = GridEngineBackend(GridEngineSettings(**_snake(_settings(tmp_path))), clock)
    cluster = Cluster("sge", backend, records, clock)
    rules = {
        "unmatched": "close",
        "rules": [{"cause": ["stalled"], "stalledAfter": f"{BOUND:g}s", "action": "resubmit", "limit": 1}],
    }
    sup = Supervisor(backend, records, clock=clock, poll=POLL, lease_ttl=30.0, cluster="sge")
    spec = JobSpec(
        command=(sys.executable, "-c", HANGING),
        env={"DISPATCH_PROGRESS_INTERVAL": "0", "PYTHONPATH": SRC},
        time_limit=600,  # the cell ends it if this test cannot
    )
    job_id = cluster.operator.submit(spec, rules)
    try:
        deadline = time.monotonic() + 300
        while not records.get(job_id).closed:
            assert time.monotonic() < deadline, records.get(job_id).to_json()
            sup.cycle()
            time.sleep(POLL)
    finally:
        for sub in records.get(job_id).submissions:
            if sub.scheduler_id:
                subprocess.run(["qdel", sub.scheduler_id], env=_cell_env(), capture_output=True, timeout=60)
    job = records.get(job_id)
    assert job.state is State.SUCCEEDED and [s.n for s in job.submissions] == [1, 2], job.to_json()
    first = job.submissions[0]
    assert first.outcome is not None and (first.outcome.state, first.outcome.cause) == (State.FAILED, Cause.STALLED)
    (stop,) = [i for i in job.intents if i.action is Action.STOP]
    assert stop.args["stalled"] == first.executions[-1].identity and stop.args["ranks"] == [0]
    # never before the bound; within a cycle of it, plus the cycle's own qstat calls on a loaded machine
    assert BOUND < float(stop.args["silentFor"]) <= BOUND + POLL + 30, stop.args
    host = description()["host"]
    blames = records.node_blames("sge", 0.0)
    assert [(b.node, b.job_id, b.cause) for b in blames] == [(host, job_id, Cause.STALLED)], blames
    records.close()


def _cell_env() -> dict[str, str]:
    d = description()
    return dict(os.environ, SGE_ROOT=d["sge_root"], SGE_CELL=d["sge_cell"])
