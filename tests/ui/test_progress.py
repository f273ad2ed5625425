"""The dashboard shows a running job's progress (step/total, rate, estimated end, how long ago each rank last
reported: :mod:`dispatch.progress`, the code ``dispatch show`` uses) read from the cluster at a bounded cost, and
each cluster's suspect nodes (what ``dispatch nodes`` lists). Over a real local job that reports progress."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from markupsafe import escape
from starlette.testclient import TestClient

import dispatch
from dispatch.outcome import Cause
from dispatch.records import SQLiteRecords
from dispatch.records.nodes import NodeBlame, SuspectPolicy
from dispatch.spec import JobSpec
from dispatch.ui.app import create_app
from dispatch.ui.source import Source

from .conftest import Made
from .hostile import MARKUP

TRAIN = (
    "import os, sys, time\n"
    "from dispatch import job\n"
    "for step in range(10**9):\n"
    "    job.progress(step, total=100000, loss=0.5)\n"
    "    if os.path.exists(sys.argv[1]):\n"
    "        break\n"
    "    time.sleep(0.05)\n"
)
HOSTILE_NODE = MARKUP[1]
"""A node name as a hostile scheduler (or a typo in a config) could spell it."""


@dataclass
class Running:
    source: Source
    job_id: str
    other_id: str


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    """A 2-rank local job reporting progress every 0.2 s and one that ended; blames on cluster ``local`` that
    make two suspects (one with a hostile name) and one node blamed once; the read-only Source over them."""
    path, state, stop = tmp_path / "records.db", tmp_path / "local", tmp_path / "stop"
    records = SQLiteRecords(path)
    cluster = dispatch.open("local", dispatch.Config(adapter={"stateDir": str(state)}, records=records, name="local"))
    spec = JobSpec((sys.executable, "-c", TRAIN, str(stop)), nodes=2, env={"DISPATCH_PROGRESS_INTERVAL": "0.2"})
    job_id = cluster.submit(JobSpec(spec.command, nodes=2, env=spec.env, name="reports"))
    other_id = cluster.submit(JobSpec((sys.executable, "-c", "pass"), name="quiet"))
    now = time.time()
    records.add_node_blames(
        [
            NodeBlame("local", "node-a", "j1", "1.j1.0", Cause.NODE_LOST, now - 600),
            NodeBlame("local", "node-a", "j2", "1.j2.0", Cause.LAUNCH_FAILED, now - 60),
            NodeBlame("local", "node-c", "j6", "1.j6.0", Cause.STALLED, now - 60),  # stalls by the jobs' own
            NodeBlame("local", "node-c", "j7", "1.j7.0", Cause.STALLED, now - 50),  # bounds make no suspect
            NodeBlame("local", HOSTILE_NODE, "j3", "1.j3.0", Cause.LAUNCH_FAILED, now - 120),
            NodeBlame("local", HOSTILE_NODE, "j4", "1.j4.0", Cause.LAUNCH_FAILED, now - 100),
            NodeBlame("local", "node-b", "j5", "1.j5.0", Cause.NODE_LOST, now - 60),
        ]
    )

    def open_cluster(name: str) -> dispatch.Cluster:
        return dispatch.open("local", dispatch.Config(adapter={"stateDir": str(state)}, read_only=True, name=name))

    policy = SuspectPolicy(after=2, window=3600, ttl=7200)
    source = Source(SQLiteRecords(path, read_only=True), open_cluster, str(path), policy_of=lambda name: policy)
    try:
        yield Running(source, job_id, other_id)
    finally:
        source.close()
        stop.touch()
        for j in (job_id, other_id):
            sid = records.get(j).submissions[-1].scheduler_id or ""
            cluster.backend.wait_ended(sid, 60)  # type: ignore[attr-defined]
        cluster.close()
        records.close()


def wait_for(what: str, check, timeout: float = 90.0):  # type: ignore[no-untyped-def]
    """``check()`` once it is truthy, polled until ``timeout`` (generous: the machine may be loaded)."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.2)


def test_a_running_job_s_progress_is_shown_per_rank_and_in_the_table(running: Running) -> None:
    source = running.source
    source.readings.interval = 0.0  # read at every ask until both ranks have a rate
    with TestClient(create_app(source), base_url="http://127.0.0.1") as client:

        def two_ranks_with_a_rate() -> str | None:
            page = client.get(f"/jobs/{running.job_id}/live").text
            ranks = [f'<tr data-rank="{r}">' in page for r in (0, 1)]
            return page if all(ranks) and page.count("/s</td>") == 2 else None

        live = wait_for("both ranks report with a rate", two_ranks_with_a_rate)
        assert '<section class="card wide" id="progress">' in live
        assert "/100000 (" in live and " ago</td>" in live and "<i>loss</i> 0.5" in live
        assert len(re.findall(r'<td class="nowrap">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</td>', live)) == 2  # each rank's end
        page = client.get(f"/jobs/{running.job_id}").text
        assert 'id="progress"' in page
        rows = client.get("/jobs/rows").text
        assert "<th " in rows and ">progress</th>" in rows
        cell = rows.split(f'data-job="{running.job_id}"')[1].split('class="progress nowrap">')[1].split("</td>")[0]
        assert "/100000 (" in cell and "/s ends " in cell and cell.endswith(" ago")
        other = rows.split(f'data-job="{running.other_id}"')[1].split("</tr>")[0]
        assert 'class="progress nowrap">-</td>' in other  # reported nothing


def test_viewers_cost_the_cluster_one_reading_per_interval(running: Running) -> None:
    source = running.source
    source.readings.interval = 0.0
    with TestClient(create_app(source), base_url="http://127.0.0.1") as client:
        wait_for("a report", lambda: 'id="progress"' in client.get(f"/jobs/{running.job_id}/live").text)
        source.readings.interval = 3600.0  # from here, no reading is due again during the test
        before = source.readings.calls
        for _ in range(10):  # ten viewers polling the job and the table
            assert 'id="progress"' in client.get(f"/jobs/{running.job_id}/live").text
            assert ">progress</th>" in client.get("/jobs/rows").text
        assert source.readings.calls == before


def test_ended_jobs_are_not_read(source: Source, made: Made) -> None:
    jobs = source.records.get_many([*made.succeeded, made.failed, *made.hostile])
    assert jobs and all(j.state.ended for j in jobs)
    assert source.progress(jobs) == {} and source.readings.calls == 0


def test_suspect_nodes_on_the_cluster_page_and_the_overview(running: Running) -> None:
    with TestClient(create_app(running.source), base_url="http://127.0.0.1") as client:
        page = client.get("/clusters/local").text
        section = page.split('id="suspects"')[1].split("</section>")[0]
        assert '<td class="mono node">node-a</td>' in section and "node-b" not in section  # node-b: blamed once
        assert "node-c" not in section  # blamed by two jobs' stalls only
        assert f'<td class="mono node">{escape(HOSTILE_NODE)}</td>' in section and HOSTILE_NODE not in section
        row = section.split('<td class="mono node">node-a</td>')[1].split("</tr>")[0]
        assert "<td>2</td>" in row and "launch-failed, node-lost" in row and '<a href="/jobs/j1">j1</a>' in row
        assert "blamed by 2 distinct jobs within 1h" in section and "for 2h after" in section
        overview = client.get("/").text.split('id="suspects"')[1].split("</section>")[0]
        assert overview.count('<td class="mono node">') == 2 and 'href="/clusters/local#suspects"' in overview
        assert HOSTILE_NODE not in overview
