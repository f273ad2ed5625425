"""One journey, every adapter: the same torchrun-style script and the same sequence of user commands, with the
same assertions on the local adapter, the three real Slurm releases, the Grid Engine cell, a MODEL of Kubeflow
(pytest id ``kubeflow-model``: dispatch_kubetest's in-process API server and controllers, with a thread as kubelet
running each pod's command as a local process; no Kubernetes and no real pod) and Kubeflow on real pods (pytest id
``kubeflow-realpods``: the real control plane, Trainer, JobSet and two real kubelets; see
tests/journey/adapters.py).

The sequence is what a new user does after the quick start: ``run`` (the rank environment, the output, the
outcome), ``submit`` then ``status``, ``show`` and ``logs`` while it runs, ``stop --wait`` and a second ``stop``,
a rank exiting 3 (the program's own code is the answer), a time limit with a rule that resubmits once (``logs
--submission 1`` reads the earlier attempt), and ``logs`` again once the scheduler has forgotten the jobs. The
differences allowed between adapters are listed in tests/journey/adapters.py; where an adapter cannot (Grid
Engine runs one-slot jobs), the journey asserts its clear refusal.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dispatch.cli.exitcodes import Exit
from tests.cli.conftest import Env
from tests.journey.adapters import ADAPTERS, Adapter, config_toml

SCRIPT = r"""
echo "env rank=${RANK-unset} world=${WORLD_SIZE-unset} local=${LOCAL_RANK-unset}" \
  "addr=${MASTER_ADDR-unset} port=${MASTER_PORT-unset}"
case "$1" in
  ok) ;;
  work) echo working; exec sleep 600 ;;
  fail) if [ "${RANK-}" = "$((WORLD_SIZE - 1))" ]; then echo "rank $RANK fails" >&2; sleep 1; exit 3; fi
        exec sleep 3 ;;
  attempt) echo "attempt ${DISPATCH_SUBMISSION-unset}"; exec sleep 600 ;;
esac
"""
"""A torchrun-style program: reads the standard variables; ``$1`` says what it does. The ranks that do not fail
``exec`` their sleep, so that the SIGTERM that ends them kills them, as it kills a Python program. (A shell left
waiting for a child the signal reached first exits 143, which Slurm keeps as the step's code, the highest of its
tasks'; the Slurm adapter then takes the failing rank's code from srun's task lines, which
tests/slurm/integration.py proves on each release.) The failing rank waits a second after its last line: srun
forwards a remote rank's output through its own connection, and once in five full runs on 22.05 the task's exit
reached srun first, --kill-on-bad-exit ended the step and the line never reached the file."""

ENV_LINE = re.compile(r"env rank=(\d+) world=(\d+) local=(\d+) addr=(\S+) port=(\d+)$")


def script(mode: str) -> tuple[str, ...]:
    return ("bash", "-c", SCRIPT, "journey", mode)


def until(pred: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g}s"
        time.sleep(0.5)


class Journey:
    """The user's shell: ``dispatch`` commands against one configured cluster, each checked for its exit code."""

    def __init__(self, env: Env, adapter: Adapter) -> None:
        self.env = env
        self.a = adapter
        env.config.write_text(config_toml(adapter))

    def cmd(self, *args: str, code: int = 0, timeout: float | None = None) -> Any:
        p = self.env.run(*args, timeout=timeout or 4 * self.a.patience)
        assert p.returncode == code, f"dispatch {' '.join(args[:3])}...: exit {p.returncode}, not {code}\n{p.stderr}"
        return p

    def row(self, job: str) -> dict[str, Any]:
        (row,) = json.loads(self.cmd("status", job, "--json").stdout)
        return dict(row)

    def record(self, job: str) -> dict[str, Any]:
        return dict(json.loads(self.cmd("show", job, "--json").stdout)["job"])

    def scheduler_ids(self, job: str) -> list[str]:
        return [s["schedulerId"] for s in self.record(job)["submissions"] if s.get("schedulerId")]


def rank_env(stdout: str, ranks: int) -> dict[int, tuple[int, int, str, str]]:
    """Each rank's (WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) from the script's ``env`` lines; the
    output shows ranks 0 to ``ranks`` - 1."""
    found = {}
    for line in stdout.splitlines():
        m = ENV_LINE.search(line)
        assert m is not None or "env rank=" not in line, f"a rank lacks a variable: {line!r}"
        if m:
            found[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4), m.group(5))
    assert sorted(found) == list(range(ranks)), stdout
    return found


@pytest.fixture(params=ADAPTERS)
def journey(request: pytest.FixtureRequest, cli: Env, tmp_path: Path) -> Iterator[Journey]:
    j = Journey(cli, request.param(tmp_path))
    try:
        yield j
    finally:
        for row in json.loads(cli.run("status", "--all", "--json", "--no-refresh").stdout or "[]"):
            if not row["closed"]:  # what a failed journey left running on a shared cluster
                cli.run("stop", row["id"])
        if j.a.close is not None:
            j.a.close()


def test_one_journey(journey: Journey) -> None:
    j, a = journey, journey.a
    n = str(a.nodes)
    shown = a.nodes if a.every_rank_logged else 1  # the ranks whose output dispatch shows
    x = a.extensions

    # run: the rank environment torchrun gives, every rank's output, the outcome as the exit code
    p = j.cmd("run", "-N", n, "--name", "journey", *x, "--", *script("ok"))
    end = p.stderr.strip().splitlines()[-1]
    assert " succeeded" in end and "--stderr" not in end, end
    ok = j.row(re.findall(r"job (\w+) succeeded", end)[0])
    ranks = rank_env(p.stdout if a.read_files is None else output(j, ok["id"]), shown)
    assert {(w, local) for w, local, _, _ in ranks.values()} == {(a.nodes, 0)}  # one rank per node
    assert len({(addr, port) for _, _, addr, port in ranks.values()}) == 1, ranks  # one rendezvous for all
    assert (ok["state"], ok["cause"], ok["exitCode"], ok["closed"]) == ("succeeded", "exit", 0, True)
    assert "succeeded" in j.cmd("show", ok["id"]).stdout
    if a.nodes == 1:  # a one-slot cluster refuses more, clearly, before anything is recorded; nothing runs
        p = j.cmd("run", "-N", "2", *x, "--", *script("ok"), code=Exit.REFUSED)
        assert "refused: " in p.stderr and "one-slot" in p.stderr and "Traceback" not in p.stderr
        newest = json.loads(j.cmd("status", "--json").stdout)[0]
        assert newest["id"] == ok["id"], newest

    # submit; status, show and logs while it runs; stop --wait; a second stop
    work = j.cmd("submit", "-N", n, *x, "--", *script("work")).stdout.strip()
    until(lambda: j.row(work)["state"] == "running", "the submitted job runs", a.patience)
    until(lambda: output(j, work).count("working") == shown, "the ranks' output", a.patience)
    assert work in j.cmd("status").stdout
    assert "running" in j.cmd("show", work).stdout
    p = j.cmd("stop", work, "--wait", timeout=4 * a.patience)
    assert f"job {work} cancelled" in p.stderr
    assert (j.row(work)["state"], j.row(work)["cause"]) == ("cancelled", "cancelled")
    p = j.cmd("stop", work, code=Exit.REFUSED)
    assert f"job {work} is already closed" in p.stderr

    # a rank exits 3: the program's own code, of the rank that failed, on every adapter
    p = j.cmd("run", "-N", n, *x, "--", *script("fail"), code=Exit.JOB_FAILED)
    failed = j.row(re.findall(r"job (\w+) failed", p.stderr)[-1])
    assert (failed["state"], failed["cause"], failed["exitCode"]) == ("failed", "exit", 3), failed
    check_stderr(j, failed["id"])

    # a time limit, and a rule that resubmits once: two attempts, each one's output readable by submission
    rules = j.env.home / "timeout.yaml"
    rules.write_text("rules:\n  - cause: [timeout]\n    action: resubmit\n    limit: 1\n")
    p = j.cmd("run", "-t", a.time_limit, "--rules", str(rules), *x, "--", *script("attempt"), code=Exit.JOB_FAILED)
    timed = j.row(re.findall(r"job (\w+) failed", p.stderr)[-1])
    assert (timed["state"], timed["cause"]) == ("failed", "timeout"), timed
    assert [s["n"] for s in j.record(timed["id"])["submissions"]] == [1, 2]
    assert "attempt 1" in output(j, timed["id"], submission=1)
    assert "attempt 2" in output(j, timed["id"])

    # once the scheduler has forgotten them, every job's output is still readable
    if a.forgotten is not None:
        sids = [s for job in (ok["id"], failed["id"], timed["id"]) for s in j.scheduler_ids(job)]
        forgotten = a.forgotten
        until(lambda: all(forgotten(s) for s in sids), "the scheduler forgets the jobs", 120.0)
    assert rank_env(output(j, ok["id"]), shown) == ranks
    assert "attempt 1" in output(j, timed["id"], submission=1)
    check_stderr(j, failed["id"])


def output(j: Journey, job: str, *, submission: int | None = None, stderr: bool = False) -> str:
    """What ``dispatch logs`` shows of the job (of ``submission``; its stderr); where the cluster does not read
    output back (capability OutputRead no), its clear refusal, and the output from the files it leaves."""
    args = ["logs", job, *(["--submission", str(submission)] if submission else []), *(["--stderr"] if stderr else [])]
    if j.a.read_files is None:
        return str(j.cmd(*args).stdout)
    p = j.cmd(*args, code=Exit.REFUSED)
    assert "OutputRead" in p.stderr and "Traceback" not in p.stderr, p.stderr
    subs = j.record(job)["submissions"]
    return j.a.read_files(subs[(submission or len(subs)) - 1]["schedulerId"], "err" if stderr else "out")


def check_stderr(j: Journey, job: str) -> None:
    """The failing rank's stderr, where the cluster keeps stderr apart; else the clear refusal."""
    if j.a.separate_stderr:
        assert f"rank {j.a.nodes - 1} fails" in output(j, job, stderr=True)
    else:
        p = j.cmd("logs", job, "--stderr", code=Exit.REFUSED)
        assert "stderr is not separate" in p.stderr, p.stderr
