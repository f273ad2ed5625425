"""Records made by real runs for the dashboard's tests: local-adapter jobs (real processes, among them jobs named
and commanded with the hostile vectors) and memory-adapter jobs recovered by the real supervisor, in one SQLite
file; and the read-only :class:`~dispatch.ui.source.Source` over it."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from jinja2 import Environment, StrictUndefined

import dispatch
from dispatch.cli.observe import refresh
from dispatch.errors import ConfigError
from dispatch.records import SQLiteRecords
from dispatch.spec import JobSpec
from dispatch.ui import app as ui_app
from dispatch.ui import scenarios
from dispatch.ui.source import Source

from .hostile import HOSTILE, NAMES

ECHO = "import sys; print('\\n'.join(sys.argv[1:])); sys.exit(int(sys.argv[1]) if sys.argv[1:2] == ['3'] else 0)"


@dataclass
class Made:
    path: Path
    local_state: Path
    resubmitted: str
    held: str
    escalated: str
    story: str
    succeeded: list[str]
    failed: str
    hostile: list[str]
    suspended: str

    def source(self) -> Source:
        def open_cluster(name: str) -> dispatch.Cluster:
            if name == "local":
                cfg = dispatch.Config(adapter={"stateDir": str(self.local_state)}, read_only=True, name=name)
                return dispatch.open("local", cfg)
            if name == "sim":
                return dispatch.open("memory", dispatch.Config(read_only=True, name=name))
            raise ConfigError("cluster", f"no cluster named {name!r}")

        return Source(SQLiteRecords(self.path, read_only=True), open_cluster, str(self.path))


def wait_ended(records: SQLiteRecords, cluster: dispatch.Cluster, ids: list[str], timeout: float = 60) -> None:
    """Observe the jobs until they ended, writing what changed (what ``dispatch status`` does)."""
    deadline = time.monotonic() + timeout
    while True:
        jobs = refresh(records, cluster.backend, [records.get(i) for i in ids], time.time())
        if all(j.state.ended for j in jobs):
            return
        assert time.monotonic() < deadline, [(j.id, j.state) for j in jobs]
        time.sleep(0.2)


def make(root: Path) -> Made:
    path = root / "records.db"
    local_state = root / "local"
    records = SQLiteRecords(path)
    m = scenarios.memory(records)
    resubmitted = scenarios.preempted_then_resubmitted(m)
    held = scenarios.held_after_timeout(m)
    escalated = scenarios.escalated_after_limit(m)
    story = scenarios.preempted_then_resubmitted(m, name="train-llm-7b", preemptions=2)
    suspended = scenarios.suspended_by_an_operator(m)
    local = dispatch.open(
        "local", dispatch.Config(adapter={"stateDir": str(local_state)}, records=records, name="local")
    )
    ok = [local.submit(JobSpec((sys.executable, "-c", ECHO, "hello", "world"), name=f"ok-{k}")) for k in range(3)]
    failed = local.submit(JobSpec((sys.executable, "-c", ECHO, "3", "bye"), name="exits-3", working_dir=str(root)))
    hostile = [local.submit(JobSpec((sys.executable, "-c", ECHO, *HOSTILE), name=name)) for name in NAMES]
    wait_ended(records, local, [*ok, failed, *hostile])
    local.close()
    records.close()
    return Made(path, local_state, resubmitted, held, escalated, story, ok, failed, hostile, suspended)


@pytest.fixture(autouse=True)
def strict_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages render with StrictUndefined here: a template naming a field that does not exist fails the test
    instead of rendering nothing (the lenient default hid a misspelt field)."""
    lenient = ui_app._templates

    def strict() -> Environment:
        env = lenient()
        env.undefined = StrictUndefined
        return env

    monkeypatch.setattr(ui_app, "_templates", strict)


@pytest.fixture(scope="session")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    return make(tmp_path_factory.mktemp("ui-records"))


@pytest.fixture
def source(made: Made) -> Iterator[Source]:
    s = made.source()
    yield s
    s.close()
