"""The identities a tracker continues a run by, on real processes: a job resubmitted by its rule sees the same
``run_id()`` in both submissions and a different ``execution_id()`` in each."""

from __future__ import annotations

import sys
from pathlib import Path

import dispatch
from dispatch.outcome import State
from dispatch.records import SQLiteRecords
from dispatch.spec import JobSpec

SRC = str(Path(__file__).resolve().parents[2] / "src")
SCRIPT = """\
import sys
from dispatch import job
with open(sys.argv[1], "a") as out:
    out.write(f"{job.run_id()} {job.execution_id()}\\n")
sys.exit(75 if job.context().submission == 1 else 0)
"""


def test_a_resubmitted_job_keeps_its_run_id_and_changes_its_execution_id(tmp_path: Path) -> None:
    seen = tmp_path / "seen.txt"
    rules = {"rules": [{"cause": "exit", "exitCodes": [75], "action": "resubmit", "limit": 1}]}
    spec = JobSpec(command=(sys.executable, "-c", SCRIPT, str(seen)), env={"PYTHONPATH": SRC})
    records = SQLiteRecords(str(tmp_path / "records.db"))
    with dispatch.open("local", adapter={"stateDir": str(tmp_path / "state")}, records=records) as cluster:
        job_id = cluster.submit(spec, rules)
        record = cluster.wait(job_id, timeout=60)
    assert record.state is State.SUCCEEDED and [s.n for s in record.submissions] == [1, 2]
    lines = [line.split() for line in seen.read_text().splitlines()]
    assert [run for run, _ in lines] == [job_id, job_id]
    executions = [execution for _, execution in lines]
    assert len(set(executions)) == 2 and [e.split(".")[0] for e in executions] == ["1", "2"], executions
