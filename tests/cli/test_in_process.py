"""In-process tests of the CLI: click's CliRunner for cheap commands, and the pieces (config, tables, spec
options, folding evidence into records, the generated docs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dispatch.cli import config as cfg
from dispatch.cli import ui
from dispatch.cli.exitcodes import MEANING, Exit
from dispatch.cli.jobs import build_spec
from dispatch.cli.main import cli, main
from dispatch.cli.observe import observe, refresh
from dispatch.declarations import Declarations
from dispatch.errors import ConfigError, SpecError
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import JobRecord, MemoryRecords, Submission
from dispatch.records.model import GateState
from dispatch.spec import JobSpec
from dispatch.spi import ExecutionEvidence, Gate, JobEvidence

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"), "NO_COLOR": "1"}


def test_help_and_version(env: dict[str, str]) -> None:
    r = CliRunner().invoke(cli, ["--help"], env=env)
    assert r.exit_code == 0 and "dispatch run --nodes 2 -- python train.py" in r.output
    r = CliRunner().invoke(cli, ["--version"], env=env)
    assert r.exit_code == 0 and "dispatch" in r.output
    for name in cli.commands:
        r = CliRunner().invoke(cli, [name, "--help"], env=env)
        assert r.exit_code == 0, name


def test_cli_import_does_not_load_adapters() -> None:
    code = "import sys, dispatch.cli.main; print(sorted(m for m in sys.modules if m.startswith('dispatch.local')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(ROOT / "src")}
    ).stdout
    assert out.strip() == "[]"


def test_schema_clusters_and_empty_status(env: dict[str, str], tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["schema", "local"], env=env)
    assert r.exit_code == 0 and json.loads(r.output)["additionalProperties"] is False
    r = CliRunner().invoke(cli, ["clusters", "--json"], env=env)
    data = json.loads(r.output)
    assert data["config"] is None and data["default"] == "local"
    assert data["records"] == str(tmp_path / "s" / "dispatch" / "records.db")
    r = CliRunner().invoke(cli, ["status", "--json"], env=env)
    assert r.exit_code == 0 and json.loads(r.output) == []


def test_dry_run_in_process(env: dict[str, str]) -> None:
    r = CliRunner().invoke(cli, ["run", "--dry-run", "-N", "3", "-p", "2", "--", "echo", "a b"], env=env)
    assert r.exit_code == 0, r.output
    assert r.output.count(" RANK=") == 6 and "'a b'" in r.output


def test_main_maps_errors_to_codes(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert main(["show", "nosuchjob"]) == Exit.NOT_FOUND
    assert main(["--cluster", "x", "capabilities"]) == Exit.USAGE
    assert main(["status", "--bogus"]) == Exit.USAGE
    err = capsys.readouterr().err
    assert "Traceback" not in err and "no job 'nosuchjob'" in err


def test_exit_code_table_is_complete() -> None:
    assert set(MEANING) == set(Exit)


def test_generated_cli_docs_are_current() -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_cli_docs.py"), "--check"], capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr


def test_config_parse_strict(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    c = cfg.parse({"default": "a", "clusters": {"a": {"adapter": "memory", "settings": {"nodes": 2}}}}, path)
    assert c.cluster(None).settings == {"nodes": 2} and c.cluster("local").adapter == "local"
    with pytest.raises(ConfigError, match="clusters.a.adapter"):
        cfg.parse({"clusters": {"a": {}}}, path)
    with pytest.raises(ConfigError, match="default"):
        cfg.parse({"default": "zz"}, path)
    with pytest.raises(ConfigError, match="records"):
        cfg.parse({"records": "relative.db"}, path)
    with pytest.raises(ConfigError, match="no cluster named 'q'"):
        c.cluster("q")


def test_build_spec_options() -> None:
    spec = build_spec(
        command=("a",),
        nodes=2,
        procs_per_node=3,
        name="n",
        env=("A=1=2", "B="),
        workdir=None,
        time_limit="1m30s",
        memory_mb=128,
        extensions=(),
    )
    assert spec.env == {"A": "1=2", "B": ""} and spec.time_limit == 90.0 and spec.world_size == 6
    assert spec.extensions[0].to_json() == {"kind": "local.Limits", "memoryMb": 128}
    assert (
        build_spec(
            command=("a",),
            nodes=1,
            procs_per_node=1,
            name=None,
            env=(),
            workdir=None,
            time_limit="2.5",
            memory_mb=None,
            extensions=(),
        ).time_limit
        == 2.5
    )
    with pytest.raises(SpecError, match="NAME=VALUE"):
        build_spec(
            command=("a",),
            nodes=1,
            procs_per_node=1,
            name=None,
            env=("X",),
            workdir=None,
            time_limit=None,
            memory_mb=None,
            extensions=(),
        )


def test_table_aligns_wide_characters() -> None:
    text = ui.table(["A", "B"], [["日本", "x"], ["ab", "y"]])
    lines = text.splitlines()
    assert [ui.width(ln.split("  ")[0]) for ln in lines[1:]] == [4, 2]
    assert ui.width(lines[1][: lines[1].index("x")]) == ui.width(lines[2][: lines[2].index("y")]) == 6
    assert ui.cell("a\nb") == "a?b"


def _job(now: float, rules: bool = False) -> JobRecord:
    sub = Submission(1, "m", now, scheduler_id="s1", gate=GateState.OPEN)
    return JobRecord(
        id="j1",
        cluster="c",
        spec=JobSpec(command=("x",)),
        created_at=now,
        submissions=[sub],
        rules={"rules": []} if rules else None,
    )


def _evidence(state: State, cause: Cause | None, now: float, code: int | None = None) -> JobEvidence:
    out = Outcome(state, cause, Evidence("t", now), exit_code=code)
    return JobEvidence("s1", "m", out, Gate.OPEN, executions=(ExecutionEvidence("1.s1.0", 0, out, now),))


def test_observe_records_executions_and_closes_jobs_without_rules() -> None:
    job = _job(1.0)
    job, events = observe(job, _evidence(State.RUNNING, None, 2.0), 2.0, grace=60.0)
    assert [e.kind for e in events] == ["observed"] and not job.closed
    assert observe(job, _evidence(State.RUNNING, None, 3.0), 3.0, grace=60.0) == (job, [])
    job, events = observe(job, _evidence(State.FAILED, Cause.TIMEOUT, 4.0), 4.0, grace=60.0)
    assert job.closed and [e.kind for e in events] == ["observed", "closed"]
    assert job.current is not None and job.current.executions[0].outcome.cause is Cause.TIMEOUT
    ruled, _ = observe(_job(1.0, rules=True), _evidence(State.FAILED, Cause.EXIT, 2.0, 1), 2.0, grace=60.0)
    assert not ruled.closed, "a job with rules is left to its supervisor"
    gone, events = observe(_job(1.0), None, 2.0, grace=60.0)
    assert [e.kind for e in events] == ["vanished"] and not gone.closed, "unknown is not an ending before the bound"
    gone, events = observe(gone, None, 62.0, grace=60.0)
    assert [e.kind for e in events] == ["closed"] and gone.closed


def test_refresh_writes_only_changes() -> None:
    class Fake:
        calls = 0

        def declarations(self) -> Declarations:
            return Declarations(60.0, 30.0, None)

        def inspect_many(self, ids: list[str]) -> dict[str, JobEvidence]:
            Fake.calls += 1
            return {"s1": _evidence(State.SUCCEEDED, Cause.EXIT, 5.0, 0)}

    records = MemoryRecords()
    job = records.create(_job(1.0))
    (after,) = refresh(records, Fake(), [job], 5.0)  # type: ignore[arg-type]
    assert after.closed and after.state is State.SUCCEEDED and Fake.calls == 1
    writes = records.writes
    refresh(records, Fake(), [after], 6.0)  # type: ignore[arg-type]
    assert records.writes == writes and Fake.calls == 1, "a closed, ended job is not observed again"


def test_show_lists_executions_holds_escalations_and_decisions_with_their_events() -> None:
    from dispatch.cli.views import render_show
    from dispatch.records import Decision, Escalation, Event, ExecutionRecord, HoldRecord

    job = _job(100.0, rules=True)
    pre = Outcome(State.FAILED, Cause.PREEMPTED, Evidence("t", 110.0))
    ok = Outcome(State.SUCCEEDED, Cause.EXIT, Evidence("t", 130.0), exit_code=0)
    assert job.current is not None
    job.current.executions = [
        ExecutionRecord("1.s1.0", 0, pre, 101.0, 110.0),
        ExecutionRecord("1.s1.1", 1, ok, 120.0, 130.0),
    ]
    job.current.outcome = ok
    job.holds = [HoldRecord("h1", "supervisor:x", 1, 111.0, "held by a rule", released_at=115.0)]
    job.escalations = [Escalation(1, 112.0, Cause.ADMIN_HELD, "an administrator holds it")]
    job.decisions = [Decision(1, 111.0, 1, "1.s1.0", Cause.PREEMPTED, "requeue", "preemption", "rule matches", "sup")]
    events = [
        Event("j1", 110.0, "execution", {"execution": "1.s1.0", "state": "failed", "cause": "preempted"}, seq=1),
        Event("j1", 111.0, "decision", {"action": "requeue"}, seq=2),
    ]
    text = render_show(job, events, 200.0)
    for needle in (
        "1.s1.0",
        "1.s1.1",
        "preempted",
        "h1",
        "released",
        "an administrator holds it",
        "-> requeue",
        "rule preemption",
        "decisions (and the events that led to each)",
    ):
        assert needle in text, needle
    decision_part = text.split("decisions (and the events that led to each)")[1].split("\nevents")[0]
    assert "execution=1.s1.0" in decision_part, "the event that led to the decision is listed under it"


def test_refresh_shows_but_does_not_write_a_job_a_live_supervisor_owns() -> None:
    from dispatch.records import Lease

    class Fake:
        def declarations(self) -> Declarations:
            return Declarations(60.0, 30.0, None)

        def inspect_many(self, ids: list[str]) -> dict[str, JobEvidence]:
            return {"s1": _evidence(State.FAILED, Cause.TIMEOUT, 5.0)}

    records = MemoryRecords()
    job = _job(1.0)
    job.lease = Lease("supervisor:elsewhere", 1, expires_at=100.0)
    job = records.create(job)
    writes = records.writes
    (seen,) = refresh(records, Fake(), [job], 5.0)  # type: ignore[arg-type]
    assert seen.state is State.FAILED and seen.cause is Cause.TIMEOUT
    assert records.writes == writes and records.get("j1").state is State.PENDING
    (after_expiry,) = refresh(records, Fake(), [records.get("j1")], 101.0)  # type: ignore[arg-type]
    assert records.writes == writes + 1 and records.get("j1").cause is Cause.TIMEOUT and after_expiry.closed
