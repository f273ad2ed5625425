"""The ``dispatch`` command end to end: real subprocesses over real local jobs, with XDG dirs in tmp_path."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
from pathlib import Path

import pytest

from dispatch.capabilities import Capability
from dispatch.cli.exitcodes import Exit

from .conftest import Env, wait_until

SUMMARY_KEYS = {
    "id",
    "cluster",
    "name",
    "state",
    "cause",
    "exitCode",
    "execution",
    "createdAt",
    "updatedAt",
    "observedAt",
    "closed",
    "version",
}


def one_line_error(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert lines[0].startswith("dispatch: error: ")
    return lines[0]


def test_run_two_nodes_shows_output_and_succeeds(cli: Env) -> None:
    p = cli.run("run", "--nodes", "2", "--name", "hello", "--", "sh", "-c", 'echo "hi from $RANK/$WORLD_SIZE"')
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[0] hi from 0/2", "[1] hi from 1/2"]
    assert "succeeded" in p.stderr
    (row,) = cli.json("status")
    assert set(row) == SUMMARY_KEYS
    assert (row["name"], row["state"], row["cause"], row["exitCode"], row["closed"]) == (
        "hello",
        "succeeded",
        "exit",
        0,
        True,
    )
    table = cli.run("status")
    assert table.returncode == 0
    header, line = table.stdout.splitlines()
    assert header.split() == ["JOB", "NAME", "STATE", "CAUSE", "EXECUTION", "AGE"]
    assert line.split()[:4] == [row["id"], "hello", "succeeded", "exit"]
    # logs: all ranks prefixed; one rank bare; prefix of the id works
    assert cli.run("logs", row["id"]).stdout.splitlines() == ["[0] hi from 0/2", "[1] hi from 1/2"]
    assert cli.run("logs", row["id"][:10], "--rank", "1").stdout == "hi from 1/2\n"
    chunks = [json.loads(x) for x in cli.run("logs", row["id"], "--json").stdout.splitlines()]
    assert [(c["rank"], c["stream"], c["text"]) for c in chunks] == [
        (0, "stdout", "hi from 0/2\n"),
        (1, "stdout", "hi from 1/2\n"),
    ]


def test_run_exit_code_comes_from_the_outcome(cli: Env) -> None:
    p = cli.run("run", "-N", "2", "--", "sh", "-c", "echo oops >&2; sleep 1; exit 3")
    assert p.returncode == Exit.JOB_FAILED
    assert "failed (exit code 3)" in p.stderr and "oops" in p.stderr
    (row,) = cli.json("status")
    assert (row["state"], row["cause"], row["exitCode"]) == ("failed", "exit", 3)
    assert cli.run("logs", row["id"], "--stderr").stdout.splitlines() == ["[0] oops", "[1] oops"]
    shown = cli.json("show", row["id"])
    assert set(shown) == {"job", "events"}
    assert shown["job"]["submissions"][0]["executions"][0]["outcome"]["exitCode"] == 3
    kinds = [e["kind"] for e in shown["events"]]
    assert kinds[0] == "submitted" and shown["job"]["closed"] is True
    text = cli.run("show", row["id"]).stdout
    assert "failed" in text and "events" in text and "1." in text


def test_run_json_prints_final_summary(cli: Env) -> None:
    p = cli.run("run", "--json", "--", "true")
    assert p.returncode == 0
    assert json.loads(p.stdout)["state"] == "succeeded"


def test_timeout_and_out_of_memory_causes(cli: Env) -> None:
    p = cli.run("run", "-N", "2", "--time-limit", "0.5", "--", "sleep", "30")
    assert p.returncode == Exit.JOB_FAILED and "timeout" in p.stderr
    p = cli.run(
        "run", "--memory-mb", "64", "--", sys.executable, "-c", "x = 'a' * (150 << 20); import time; time.sleep(30)"
    )
    assert p.returncode == Exit.JOB_FAILED and "out-of-memory" in p.stderr
    causes = [r["cause"] for r in cli.json("status")]
    assert causes == ["out-of-memory", "timeout"]


HOSTILE = [
    "a b",
    '"double"',
    "'single'",
    "$(touch pwned)",
    "`touch pwned2`",
    "line1\nline2",
    "*",
    "~",
    "$HOME",
    "héllo ü 日本語",
    "; rm -rf /",
    "",
    "--",
    "-x",
    "a\\b",
    "\t",
]
ECHO_ARGS = "import json, os, sys; print(json.dumps([os.fsencode(a).hex() for a in sys.argv[1:]]))"


def test_hostile_argv_reaches_the_job_byte_for_byte(cli: Env) -> None:
    args: list[str | bytes] = [*HOSTILE, b"\xff\xfe-not-utf8"]
    p = cli.run("run", "--", sys.executable, "-c", ECHO_ARGS, *args)
    assert p.returncode == 0, p.stderr
    want = [os.fsencode(a).hex() if isinstance(a, str) else a.hex() for a in args]
    assert json.loads(p.stdout) == want
    assert not (cli.home / "pwned").exists() and not (cli.home / "pwned2").exists()
    (row,) = cli.json("status")
    assert json.loads(cli.run("logs", row["id"]).stdout) == want


def test_dry_run_prints_the_plan_and_submits_nothing(cli: Env) -> None:
    p = cli.run("submit", "--dry-run", "-N", "2", "-e", "A=x y", "--", "python", "-c", "print('$(x)')")
    assert p.returncode == 0, p.stderr
    assert "nothing was started" in p.stdout and "RANK=1" in p.stdout and "A='x y'" in p.stdout
    assert "'print('\"'\"'$(x)'\"'\"')'" in p.stdout
    assert not cli.records.exists() or cli.json("status") == []
    assert not (cli.local_state / "jobs").exists() or not any((cli.local_state / "jobs").iterdir())
    assert cli.run("run", "--dry-run", "--", "true").returncode == 0


def test_submit_then_stop_sends_sigterm_then_sigkill(cli: Env) -> None:
    script = "trap 'echo got-term' TERM; echo ready; while :; do sleep 0.1; done"
    p = cli.run("submit", "--json", "-N", "2", "--", "sh", "-c", script)
    assert p.returncode == 0, p.stderr
    job = json.loads(p.stdout)["job"]
    wait_until(lambda: cli.run("logs", job).stdout.count("ready") == 2)
    assert cli.json("status", job)[0]["state"] == "running"
    p = cli.run("stop", job, "--wait")
    assert p.returncode == 0, p.stderr
    (row,) = cli.json("status", job)
    assert (row["state"], row["cause"]) == ("cancelled", "cancelled")
    execution = cli.json("show", job)["job"]["submissions"][0]["executions"][0]
    assert execution["outcome"]["signal"] == signal.SIGKILL  # it trapped SIGTERM, so SIGKILL after the grace
    assert cli.run("logs", job).stdout.count("got-term") == 2  # ... but SIGTERM came first


def test_hold_and_release_answers(cli: Env) -> None:
    # long enough to outlive any slow `status` under load: a job that ended first answers "ended", not "running"
    job = cli.run("submit", "--", "sleep", "3600").stdout.strip()
    wait_until(lambda: cli.json("status", job)[0]["state"] == "running")
    p = cli.run("hold", job)
    assert p.returncode == Exit.REFUSED
    assert "running" in one_line_error(p.stderr)
    p = cli.run("release", job)
    assert p.returncode == 0 and "no hold" in p.stderr
    assert cli.run("stop", job).returncode == 0


def test_ctrl_c_on_run_stops_the_job(cli: Env) -> None:
    proc = cli.popen("run", "--", "sh", "-c", "echo started; sleep 30")
    assert proc.stdout is not None
    assert proc.stdout.readline() == "started\n"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == Exit.JOB_FAILED, err
    assert "stopping job" in err
    assert cli.json("status")[0]["state"] == "cancelled"


def test_killed_dispatch_leaves_truth_for_a_new_process(cli: Env) -> None:
    # the ranks go on only once the test has seen the job running (a timed sleep raced a slow `status` under load)
    go = cli.home / "go"
    proc = cli.popen(
        "run",
        "-N",
        "2",
        "--",
        "sh",
        "-c",
        'echo started; while [ ! -e "$0" ]; do sleep 0.1; done; echo finished $RANK; '
        "[ $RANK = 0 ] && sleep 0.5 && exit 5; exit 0",
        str(go),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().endswith("started\n")
    proc.kill()
    proc.wait()
    (row,) = cli.json("status")
    assert row["state"] == "running"
    go.touch()
    wait_until(lambda: cli.json("status")[0]["state"] == "failed")
    (row,) = cli.json("status")
    assert (row["cause"], row["exitCode"]) == ("exit", 5)
    assert cli.run("logs", row["id"], "-r", "1").stdout == "started\nfinished 1\n"


def test_logs_per_execution_after_requeue(cli: Env) -> None:
    from dispatch.clock import SystemClock
    from dispatch.local import LocalBackend

    p = cli.run("run", "-N", "2", "--", "sh", "-c", "echo run-$DISPATCH_RESTART-$RANK")
    assert p.returncode == 0
    (row,) = cli.json("status")
    sid = row["execution"].split(".")[1]
    backend = LocalBackend(cli.local_state, SystemClock())
    backend.requeue(sid)
    wait_until(lambda: len(backend.inspect(sid).executions) == 2 and backend.inspect(sid).outcome.state.ended)
    assert cli.run("logs", row["id"], "--execution", "0").stdout.splitlines() == ["[0] run-0-0", "[1] run-0-1"]
    assert cli.run("logs", row["id"], "-e", f"1.{sid}.1", "-r", "0").stdout == "run-1-0\n"
    assert cli.run("logs", row["id"], "-e", "1", "-r", "1").stdout == "run-1-1\n"
    files = sorted(
        p.relative_to(cli.local_state / "jobs" / sid).as_posix()
        for p in (cli.local_state / "jobs" / sid).rglob("rank-*.out")
    )
    assert files == [
        "executions/0/rank-0.out",
        "executions/0/rank-1.out",
        "executions/1/rank-0.out",
        "executions/1/rank-1.out",
    ]
    p = cli.run("logs", row["id"], "-e", "7")
    assert p.returncode == Exit.NOT_FOUND
    one_line_error(p.stderr)


def test_status_when_no_jobs_yet(cli: Env) -> None:
    p = cli.run("status")
    assert p.returncode == 0 and "no jobs yet" in p.stderr
    assert cli.json("status") == []
    assert not cli.records.exists(), "a read command does not create the record store"


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (("-c", "nope", "status"), Exit.USAGE, "no cluster named 'nope'"),
        (("--config", "/nonexistent/config.toml", "status"), Exit.USAGE, "does not exist"),
        (("show", "f00f00f00f"), Exit.NOT_FOUND, "no job"),
        (("logs", "f00f00f00f"), Exit.NOT_FOUND, "no job"),
        (("stop", "f00f00f00f"), Exit.NOT_FOUND, "no job"),
        (("schema", "nope"), Exit.USAGE, "no adapter named 'nope'"),
        (("run", "--time-limit", "5x", "--", "true"), Exit.USAGE, "--time-limit"),
        (("run", "-e", "NOEQUALS", "--", "true"), Exit.USAGE, "NAME=VALUE"),
        (("submit", "-x", "no.Such={}", "--", "true"), Exit.USAGE, "unknown extension kind"),
        (("submit", "-x", 'dispatch.Image={"ref": "x"}', "--", "true"), Exit.REFUSED, "needs ContainerImage"),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(cli: Env, args: tuple[str, ...], code: int, words: str) -> None:
    p = cli.run(*args)
    assert p.returncode == code, (p.stdout, p.stderr)
    assert words in one_line_error(p.stderr)


def test_bad_rules_file(cli: Env, tmp_path: Path) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text('[[rules]]\ncause = "exit"\naction = "explode"\n')
    for cmd in (("supervise", "--rules", str(bad)), ("run", "--rules", str(bad), "--", "true")):
        p = cli.run(*cmd)
        assert p.returncode == Exit.USAGE
        assert "rules[0].action" in one_line_error(p.stderr)
    p = cli.run("supervise", "--rules", str(tmp_path / "missing.toml"))
    assert p.returncode == Exit.USAGE and "cannot read" in one_line_error(p.stderr)


def test_bad_config_file_names_the_key(cli: Env) -> None:
    cli.config.write_text('[clusters.hpc]\nadapter = "local"\nsettigns = {}\n')
    p = cli.run("status")
    assert p.returncode == Exit.USAGE and "clusters.hpc.settigns" in one_line_error(p.stderr)
    cli.config.write_text('[clusters.hpc]\nadapter = "local"\n[clusters.hpc.settings]\ngrace = "soon"\n')
    p = cli.run("-c", "hpc", "capabilities")
    assert p.returncode == Exit.USAGE and "clusters.hpc.settings.grace" in one_line_error(p.stderr)
    cli.config.write_text("not toml [")
    p = cli.run("status")
    assert p.returncode == Exit.USAGE and "not valid TOML" in one_line_error(p.stderr)


def test_debug_shows_the_traceback(cli: Env) -> None:
    p = cli.run("--debug", "show", "f00f00f00f")
    assert p.returncode != 0 and "Traceback" in p.stderr


def test_named_cluster_and_records_path(cli: Env, tmp_path: Path) -> None:
    records = tmp_path / "elsewhere.db"
    cli.config.write_text(
        f'default = "box"\nrecords = "{records}"\n[clusters.box]\nadapter = "local"\n'
        f'[clusters.box.settings]\nstateDir = "{tmp_path / "boxstate"}"\ngrace = "1s"\n'
    )
    assert cli.run("run", "--", "true").returncode == 0
    (row,) = cli.json("status")
    assert row["cluster"] == "box"
    assert records.exists() and (tmp_path / "boxstate" / "jobs").is_dir()
    listed = cli.json("clusters")
    assert listed["default"] == "box" and {c["name"] for c in listed["clusters"]} == {"box", "local"}


def test_read_commands_have_json(cli: Env) -> None:

    caps = cli.json("capabilities")
    assert caps["adapter"] == "local" and set(caps["capabilities"]) == {str(c) for c in Capability}
    assert all(set(a) == {"answer", "reason", "provenance"} for a in caps["capabilities"].values())
    assert caps["declarations"]["polledLoss"]["state"] == "unbounded"
    assert "Holder" in caps["interfaces"]
    pre = cli.json("preflight")
    assert pre["ok"] is True and all(c["ok"] for c in pre["checks"])
    schema = json.loads(cli.run("schema", "local").stdout)
    assert set(schema["properties"]) == {"stateDir", "grace", "python", "gpus"}
    text = cli.run("capabilities").stdout
    assert "PreTerminationSignal  yes" in text and "SIGKILL" in text


def test_completion_and_help(cli: Env) -> None:
    p = cli.run("completion", "bash")
    assert p.returncode == 0 and "_DISPATCH_COMPLETE" in p.stdout
    p = cli.run("--help")
    assert p.returncode == 0 and "Exit codes" in p.stdout
    commands = [
        ln.split()[0] for ln in p.stdout.split("Commands:")[1].splitlines() if ln.startswith("  ") and ln.split()
    ]
    assert commands[:3] == ["run", "submit", "status"]


def test_supervise_without_supervisor_is_refused_clearly(cli: Env, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules]]\ncause = "preempted"\naction = "resubmit"\n')
    p = cli.run("supervise", "--rules", str(rules), "--once")
    try:
        import dispatch.supervise  # noqa: F401
    except ImportError:
        assert p.returncode == Exit.REFUSED and "supervisor" in one_line_error(p.stderr)
    else:
        assert p.returncode == 0, p.stderr


def test_records_file_is_private(cli: Env) -> None:
    assert cli.run("run", "--", "true").returncode == 0
    assert (cli.records.stat().st_mode & 0o777) == 0o600
    with sqlite3.connect(cli.records) as db:
        assert db.execute("SELECT count(*) FROM jobs").fetchone()[0] == 1


def test_no_configuration_at_all_uses_local_and_xdg_records(cli: Env) -> None:
    cli.config.unlink()
    p = cli.run("run", "-N", "2", "--", "true")
    assert p.returncode == 0, p.stderr
    assert cli.records.exists() and (cli.local_state / "jobs").is_dir()
    assert cli.json("status")[0]["cluster"] == "local"
    assert cli.json("clusters")["config"] is None


def test_logs_follow_until_the_end(cli: Env) -> None:
    job = cli.run("submit", "-N", "2", "--", "sh", "-c", "for i in 1 2 3; do echo tick$i; sleep 0.3; done").stdout
    p = cli.run("logs", job.strip(), "--follow")
    assert p.returncode == 0
    assert sorted(p.stdout.splitlines()) == sorted(f"[{r}] tick{i}" for r in (0, 1) for i in (1, 2, 3))


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "started-with-sigint-ignored"])
def test_status_watch_refreshes_until_interrupted(cli: Env, sigint_ignored: bool) -> None:
    """Ctrl-C ends the watch, also when the command started with SIGINT ignored (a script's background job):
    the watch installs its own handler rather than relying on Python's default KeyboardInterrupt."""
    assert cli.run("run", "--", "true").returncode == 0
    proc = cli.popen("status", "--watch", "--interval", "0.3", sigint_ignored=sigint_ignored)
    assert proc.stdout is not None
    headers = 0
    while headers < 2:
        line = proc.stdout.readline()
        headers += line.startswith("JOB ")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=10)
    assert proc.returncode == 0


def test_supervise_applies_a_jobs_rules(cli: Env, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text(
        'unmatched = "close"\n[[rules]]\ncause = "exit"\nexitCodes = [75]\naction = "requeue"\nlimit = 2\n'
    )
    script = '[ "$DISPATCH_RESTART" = 0 ] && exit 75; echo recovered $DISPATCH_EXECUTION'
    job = cli.run("submit", "--rules", str(rules), "-N", "2", "--", "sh", "-c", script).stdout.strip()
    sup = cli.popen("supervise", "--rules", str(rules), "--poll", "0.5")
    try:
        wait_until(lambda: cli.json("status", job)[0]["state"] == "succeeded", timeout=30)
    finally:
        sup.send_signal(signal.SIGINT)
        sup.communicate(timeout=10)
    assert sup.returncode == 0
    record = cli.json("show", job)["job"]
    assert [e["restart"] for e in record["submissions"][0]["executions"]] == [0, 1]
    assert record["decisions"][0]["action"] == "requeue"
    assert cli.run("logs", job, "-e", "0", "-r", "0").stdout == ""
    assert cli.run("logs", job, "-r", "1").stdout.startswith("recovered 1.")
    text = cli.run("show", job).stdout
    assert "-> requeue" in text and "rule rules[0]" in text
