"""``python train.py -m ... hydra/launcher=dispatch`` on the local adapter, run as a user runs it (a subprocess):
the sweep is one batched submission of one job per set of overrides, each job named after its overrides and
listed by ``dispatch status``, each value back in the launcher; a failed task fails its job and the run; a bad
launcher key or value is refused in one line before anything is recorded."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dispatch.outcome import State
from dispatch.resources import Resources
from dispatch.spi import new_backend

from .sweep import LAUNCHED, argv, environment, jobs, records_path, sweep

HYDRA_HINT = "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."
"""What Hydra prints after the one line of an error it shows without its traceback."""
LRS = ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6")


def _loss(lr: float, steps: int = 3) -> float:
    loss = 1.0
    for _ in range(steps):
        loss -= lr * loss
    return round(loss, 6)


def test_a_sweep_of_six_is_one_batched_submission_of_six_named_jobs(tmp_path: Path) -> None:
    done = sweep(
        tmp_path,
        f"lr={','.join(LRS)}",
        "hydra.launcher.cluster=local",
        "hydra.launcher.time_limit=10m",
        "hydra.launcher.resources.cpus_per_proc=1",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    found = jobs(tmp_path)
    assert len(found) == 6, [j.id for j in found]
    assert {(j.spec.time_limit, j.spec.resources) for j in found} == {(600.0, Resources(cpus_per_proc=1))}
    keys = {j.batch.key for j in found if j.batch is not None}
    assert len(keys) == 1 and [j.batch.index for j in found if j.batch] == list(range(6)), "one batched submission"
    assert [j.spec.name for j in found] == [f"train[{i}] lr={lr}" for i, lr in enumerate(LRS)]
    assert all(j.state is State.SUCCEEDED for j in found), [(j.id, j.state) for j in found]

    closing = {int(m.group(1)): m for m in LAUNCHED.finditer(done.stdout)}
    assert sorted(closing) == list(range(6)), done.stdout[-3000:]
    for i, lr in enumerate(LRS):
        _, job_id, status, value = closing[i].groups()
        assert (job_id, status, float(value)) == (found[i].id, "COMPLETED", _loss(float(lr))), closing[i].group(0)

    # each job ran Hydra's run_job on the cluster: its own output directory, its own config, hydra.job.id its job
    for i, j in enumerate(found):
        hydra_yaml = (tmp_path / "multirun" / str(i) / ".hydra" / "hydra.yaml").read_text()
        assert f"id: {j.id}" in hydra_yaml and f"num: {i}" in hydra_yaml

    status = subprocess.run(
        [sys.executable, "-m", "dispatch.cli.main", "status", "--json"],
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = {row["id"]: row for row in json.loads(status.stdout)}
    assert {rows[j.id]["name"] for j in found} == {j.spec.name for j in found}


def test_a_task_that_raises_fails_its_job_and_the_run_with_its_traceback(tmp_path: Path) -> None:
    done = sweep(tmp_path, "lr=0.1,0.9", "fail_above=0.5")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ValueError: lr 0.9 diverges" in done.stderr
    assert 'raise ValueError(f"lr {cfg.lr} diverges")' in done.stderr, "the traceback on the cluster"
    first, second = jobs(tmp_path)
    assert (first.state, second.state) == (State.SUCCEEDED, State.FAILED)
    assert second.outcome is not None and second.outcome.exit_code == 1
    closing = {int(m.group(1)): m.group(3, 4) for m in LAUNCHED.finditer(done.stdout)}
    assert closing == {0: ("COMPLETED", str(_loss(0.1))), 1: ("FAILED", "the task raised ValueError: lr 0.9 diverges")}


def test_the_launchers_rules_resubmit_a_failed_job_and_its_second_submission_answers(tmp_path: Path) -> None:
    rules = "{rules:[{cause:exit,exitCodes:[1],action:resubmit,limit:1}]}"
    done = sweep(tmp_path, "lr=0.1,0.2", "flaky=true", f"hydra.launcher.rules={rules}", "hydra.launcher.nodes=2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = jobs(tmp_path)
    assert [[s.n for s in j.submissions] for j in found] == [[1, 2], [1, 2]]
    assert all(j.state is State.SUCCEEDED and j.spec.nodes == 2 for j in found)
    closing = {int(m.group(1)): m.group(3, 4) for m in LAUNCHED.finditer(done.stdout)}
    assert closing == {0: ("COMPLETED", str(_loss(0.1))), 1: ("COMPLETED", str(_loss(0.2)))}


def test_an_unknown_launcher_key_is_refused_and_nothing_is_submitted(tmp_path: Path) -> None:
    done = sweep(tmp_path, "lr=0.1,0.2", "hydra.launcher.nodez=2")
    assert done.returncode == 1
    assert "Could not override 'hydra.launcher.nodez'" in done.stderr.splitlines()[0], done.stderr
    assert not records_path(tmp_path).exists() and jobs(tmp_path) == []


def test_a_bad_launcher_value_is_one_line_naming_its_key_and_nothing_is_submitted(tmp_path: Path) -> None:
    for setting, line in (
        ("hydra.launcher.time_limit=soon", "hydra.launcher.time_limit: 'soon' is not a duration"),
        ("hydra.launcher.resources.mem_per_node=lots", "hydra.launcher.resources.mem_per_node: must be a memory"),
        ("hydra.launcher.cluster=nowhere", "hydra.launcher.cluster: "),
        ("hydra.launcher.poll=0", "hydra.launcher.poll: must be a positive number of seconds"),
    ):
        done = sweep(tmp_path, "lr=0.1,0.2", setting)
        assert done.returncode == 1, (setting, done.stdout[-2000:])
        first, *rest = done.stderr.strip().splitlines()
        assert first.startswith(line) and [r for r in rest if r] == [HYDRA_HINT], (setting, done.stderr)
        assert jobs(tmp_path) == [], setting


SLEEPER = """\
import time
import hydra

@hydra.main(version_base="1.3", config_path=None, config_name=None)
def sleep(cfg):
    time.sleep(float(cfg.seconds))

if __name__ == "__main__":
    sleep()
"""


def _sigint(ignored: bool) -> Callable[[], None]:
    disposition = signal.SIG_IGN if ignored else signal.SIG_DFL

    def set_it() -> None:
        signal.signal(signal.SIGINT, disposition)

    return set_it


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["foreground", "started-with-sigint-ignored"])
def test_ctrl_c_while_the_launcher_waits_stops_the_sweeps_jobs(tmp_path: Path, sigint_ignored: bool) -> None:
    """Also when the sweep started with SIGINT ignored, as a script's background job is (a test run started so
    passes that on): Python then installs no KeyboardInterrupt of its own, and the launcher's wait installs one."""
    app = tmp_path / "sleeper.py"
    app.write_text(textwrap.dedent(SLEEPER))
    launcher = subprocess.Popen(
        argv(tmp_path, "+seconds=300,301", app=app),
        cwd=tmp_path,
        env={**environment(tmp_path), "PYTHONFAULTHANDLER": "1"},  # SIGABRT prints every thread's stack
        preexec_fn=_sigint(sigint_ignored),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert launcher.stdout is not None
        lines = [launcher.stdout.readline() for _ in range(3)]  # "Launched 2 jobs", then one line per job
        assert "Launched 2 jobs" in lines[0], lines
        deadline = time.monotonic() + 60
        while [j.state for j in jobs(tmp_path)] != [State.RUNNING, State.RUNNING]:
            assert time.monotonic() < deadline, [(j.id, j.state) for j in jobs(tmp_path)]
            time.sleep(0.2)  # a poll interval: the records say when both run
        launcher.send_signal(signal.SIGINT)
        try:
            launcher.communicate(timeout=120)
        except subprocess.TimeoutExpired:  # once, in a full run under load: what every thread was doing
            launcher.send_signal(signal.SIGABRT)
            said, _ = launcher.communicate(timeout=30)
            raise AssertionError(f"the launcher did not end within 120 s of Ctrl-C:\n{said[-6000:]}") from None
    finally:
        launcher.kill()
    assert launcher.returncode != 0
    found = jobs(tmp_path)
    assert len(found) == 2 and all(j.stop_requested and j.closed for j in found), [j.to_json() for j in found]
    backend = new_backend("local", {"stateDir": str(tmp_path / "state" / "dispatch" / "local")})
    sids = [str(j.submissions[0].scheduler_id) for j in found]
    deadline = time.monotonic() + 60
    while not all(backend.inspect(sid).outcome.state is State.CANCELLED for sid in sids):
        assert time.monotonic() < deadline, [backend.inspect(sid).outcome for sid in sids]
        time.sleep(0.5)  # the local adapter ends the ranks after the stop: its own evidence says when
