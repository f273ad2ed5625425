"""Job array scenarios on a real cluster (test_arrays_local.py / _sid.py run them): a batch becomes one array,
each task is its own job (outcome, cancel, requeue, hold), and a lost answer between sbatch and recording is
resolved by marker with no task run twice.

Every wait polls the condition itself with a generous bound (the machine is shared): no sleep synchronises.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from dispatch.cluster import Cluster
from dispatch.errors import OutcomeUnknown
from dispatch.records import MemoryRecords
from dispatch.records.model import Action, IntentStatus
from dispatch.slurm import SlurmBackend
from dispatch.slurm.arrayids import split
from dispatch.spec import JobSpec
from dispatch.spi import Gate, JobEvidence, StartRequest
from dispatch.supervise import Supervisor

from .clusters import admin, core_harness, open_backend

WAIT = 240.0
"""The bound of every wait: far above what an idle cluster needs (seconds), for a machine loaded by others."""


def _until(what: str, check: Callable[[], bool], timeout: float = WAIT) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, f"{what}: not within {timeout}s"
        time.sleep(1.0)  # a poll interval, not a synchronisation: the condition itself is what ends the wait


def _requests(specs: list[JobSpec]) -> list[StartRequest]:
    tag = os.urandom(4).hex()
    return [StartRequest(f"arr{tag}{i:03d}", 1, f"dsp-arr{tag}{i:03d}-1", spec) for i, spec in enumerate(specs)]


def _ended(b: SlurmBackend, sids: list[str]) -> dict[str, JobEvidence]:
    got: dict[str, JobEvidence] = {}

    def check() -> bool:
        got.update(
            {k: v for k, v in b.inspect_many([s for s in sids if s not in got]).items() if v.outcome.state.ended}
        )
        return len(got) == len(sids)

    _until(f"{len(sids)} array tasks ending", check)
    return got


def batch_of_20_is_one_array(name: str) -> None:
    """Operator.submit_many of 20 jobs: one sbatch --array (one script to create, one to open), 20 jobs each
    with its own task id, record, marker and outcome (exit code i % 4)."""
    import dispatch
    from dispatch.slurm.harness import settings_for

    from .clusters import description

    cluster = dispatch.open("slurm", adapter=settings_for(description(name)), records=MemoryRecords(), name=name)
    backend = getattr(cluster.backend, "unrestricted", cluster.backend)
    assert isinstance(backend, SlurmBackend)
    try:
        before = backend.scripts_run
        got = cluster.operator.submit_many([JobSpec(("bash", "-c", f"echo task {i}; exit {i % 4}")) for i in range(20)])
        assert backend.scripts_run - before == 2, "one script creates the array, one opens every task's gate"
        assert all(g.ok for g in got), [g.error for g in got]
        jobs = [cluster.get(g.job_id) for g in got]
        sids = [str(j.current.scheduler_id) for j in jobs if j.current is not None]
        arrays = {split(s)[0] for s in sids}
        assert len(arrays) == 1 and [split(s)[1] for s in sids] == list(range(20)), sids
        ended = _ended(backend, sids)
        for i, sid in enumerate(sids):
            ev = ended[sid]
            assert ev.outcome.exit_code == i % 4, (sid, ev.outcome)
            assert ev.executions[-1].identity == f"1.{sid}.0"
            assert b"".join(backend.stdout(sid)) == f"task {i}\n".encode()
        markers = [j.current.marker for j in jobs if j.current is not None]
        found = backend.find_many(markers, time.time() - 3600)
        assert [[f.scheduler_id for f in found[m]] for m in markers] == [[s] for s in sids]
    finally:
        cluster.close()


def throttled_batch_runs_at_most_k_at_once(name: str) -> None:
    """Operator.submit_many of 6 jobs with max_running=2: one ``sbatch --array=0-5%2``; squeue never lists more
    than 2 of its tasks running, and lists the waiting ones with Slurm's reason JobArrayTaskLimit while 2 run;
    sacct's start and end times show no moment with more than 2 running; every task succeeds."""
    import dispatch
    from dispatch.slurm.harness import settings_for

    from .clusters import description

    cluster = dispatch.open("slurm", adapter=settings_for(description(name)), records=MemoryRecords(), name=name)
    backend = getattr(cluster.backend, "unrestricted", cluster.backend)
    assert isinstance(backend, SlurmBackend)
    array = ""
    try:
        got = cluster.operator.submit_many([JobSpec(("sleep", "6"))] * 6, max_running=2)
        assert all(g.ok for g in got), [g.error for g in got]
        sids = [str(cluster.get(g.job_id).current.scheduler_id) for g in got]  # type: ignore[union-attr]
        (array,) = {split(s)[0] for s in sids}
        most, limited = 0, False

        def over() -> bool:
            nonlocal most, limited
            rows = admin(name, "squeue", "-h", "-r", "-j", array, "-o", "%i|%t|%r", check=False).stdout.split()
            states = [r.split("|") for r in rows]
            run = sum(1 for _, st, _ in states if st == "R")
            most = max(most, run)
            limited = limited or (run == 2 and any(why == "JobArrayTaskLimit" for _, st, why in states if st == "PD"))
            return not rows

        _until("the throttled array ending", over)
        assert 0 < most <= 2, f"squeue showed {most} tasks of array {array} running at once"
        assert limited, "squeue never showed a task waiting for the array's throttle (JobArrayTaskLimit)"
        ended = _ended(backend, sids)
        assert all(ev.outcome.state.name == "SUCCEEDED" for ev in ended.values()), ended
        fmt = "JobID,Start,End,State"
        lines = admin(name, "sacct", "-n", "-P", "-X", "-j", array, "-o", fmt, "--starttime", "now-1hour").stdout
        spans = []
        for line in lines.splitlines():
            _, start, end, state = line.split("|")
            if state.startswith("COMPLETED"):
                spans.append((start, end))
        assert len(spans) == 6, lines
        assert most_at_once(spans) <= 2, spans
    finally:
        if array:
            admin(name, "scancel", array, check=False)
        cluster.close()


def most_at_once(spans: list[tuple[str, str]]) -> int:
    """The most spans (ISO start, end; sacct's one-second resolution) open at one moment: a task that ends in
    the second another starts counts as ended first, as Slurm frees its place before starting the next."""
    events = sorted([(end, 0) for _, end in spans] + [(start, 1) for start, _ in spans])
    most = now = 0
    for _, kind in events:
        now += 1 if kind else -1
        most = max(most, now)
    return most


def one_task_cancelled_one_requeued_one_held_alone(name: str) -> None:
    """Four tasks of one array: a dispatch hold on task 3 keeps it waiting while the others run; task 0 is
    cancelled and task 1 requeued, each alone (task 2 runs on untouched); the hold's release lets task 3 run."""
    b = open_backend(name)
    sids: list[str] = []
    try:
        sids = [str(s) for s in b.start_many(_requests([JobSpec(("sleep", "600"))] * 4))]
        assert len({split(s)[0] for s in sids}) == 1, sids
        b.hold(sids[3], "h0000a11a")
        assert b.open_many(sids) == [None] * 4
        _until(
            "tasks 0-2 running",
            lambda: all(e.outcome.state.name == "RUNNING" for e in b.inspect_many(sids[:3]).values()),
        )
        held = b.inspect(sids[3])
        assert held.outcome.state.waiting and held.holds == ("h0000a11a",) and held.gate is Gate.OPEN
        b.stop_job(sids[0])
        b.requeue(sids[1])

        def settled() -> bool:
            ev = b.inspect_many(sids)
            return (
                ev[sids[0]].outcome.state.ended
                and len(ev[sids[1]].executions) == 2
                and ev[sids[1]].executions[-1].outcome.state.name == "RUNNING"
            )

        _until("task 0 cancelled and task 1 running again", settled)
        ev = b.inspect_many(sids)
        assert ev[sids[0]].outcome.state.name == "CANCELLED", ev[sids[0]].outcome
        assert [e.restart for e in ev[sids[1]].executions] == [0, 1]
        assert ev[sids[2]].outcome.state.name == "RUNNING" and len(ev[sids[2]].executions) == 1
        assert ev[sids[3]].outcome.state.waiting and ev[sids[3]].holds == ("h0000a11a",)
        b.stop_job(sids[1])  # frees a slot for task 3 on a small cluster
        b.release(sids[3], "h0000a11a")
        _until("task 3 running once released", lambda: b.inspect(sids[3]).outcome.state.name == "RUNNING")
    finally:
        if sids:
            admin(name, "scancel", split(sids[0])[0], check=False)
        b.close()


def lost_answer_after_sbatch_runs_no_task_twice(name: str) -> None:
    """``sbatch --array`` is carried out and its answer lost (as a crash between sbatch and recording looks to
    the supervisor): every job is recorded with its start in doubt and every task stays behind its closed gate;
    the supervisor finds each task by its marker, adopts it (one start intent, one object per marker), opens it,
    and every job succeeds once."""
    h = core_harness(name)
    assert h.inject is not None
    backend = h.base.backend()
    records = MemoryRecords()
    cluster = Cluster(name, backend, records, h.base.clock)
    sup = Supervisor(backend, records, clock=h.base.clock, owner="arrays-test", poll=5.0, cluster=name)
    sids: list[str] = []
    try:
        h.inject("start_many", "unknown", True)
        got = cluster.operator.submit_many([JobSpec(("bash", "-c", f"echo once {i}")) for i in range(5)])
        assert all(isinstance(g.error, OutcomeUnknown) for g in got), [g.error for g in got]
        jobs = [records.get(g.job_id) for g in got]
        markers = [j.submissions[0].marker for j in jobs]
        found = backend.find_many(markers, 0.0)
        sids = [f.scheduler_id for m in markers for f in found[m]]
        assert len(sids) == 5 and len({split(s)[0] for s in sids}) == 1, found
        for sid, ev in backend.inspect_many(sids).items():
            assert ev.gate is Gate.CLOSED and ev.outcome.state.waiting, f"{sid} left its gate before it was recorded"

        def closed() -> bool:
            sup.cycle()
            return all(records.get(j.id).closed for j in jobs)

        _until("the supervisor closing every job", closed)
        for j, sid in zip(jobs, sids, strict=True):
            job = records.get(j.id)
            starts = [i for i in job.intents if i.action is Action.START]
            assert len(starts) == 1 and starts[0].status is IntentStatus.DONE, starts
            assert job.current is not None and job.current.scheduler_id == sid
            assert job.state.name == "SUCCEEDED", job.state
            assert len(backend.inspect(sid).executions) == 1, "a task ran twice"
        again = backend.find_many(markers, 0.0)
        assert all(len(again[m]) == 1 for m in markers), again
    finally:
        if sids:
            admin(name, "scancel", split(sids[0])[0], check=False)
        backend.close()


def cancelled_before_it_started_reads_cancelled(name: str) -> None:
    """A task cancelled behind its gate: squeue shows it CANCELLED for MinJobAge, and once squeue forgot it
    (on 24.11 and 26.05 sacct never has a row of it) the adapter still reads it cancelled, from its array's
    accounting, never succeeded and never absent; its gated siblings read waiting all along."""
    b = open_backend(name)
    sids: list[str] = []
    try:
        sids = [str(s) for s in b.start_many(_requests([JobSpec(("sleep", "600"))] * 3))]
        b.stop_job(sids[2])
        seen: list[str] = []

        def forgotten_by_squeue() -> bool:
            ev = b.inspect_many(sids)
            assert sids[2] in ev, f"{sids[2]} has no evidence after {seen}"
            out = ev[sids[2]].outcome
            assert out.state.name == "CANCELLED", (out, seen)
            assert all(ev[s].outcome.state.waiting for s in sids[:2]), ev
            seen.append(out.evidence.source)
            return out.evidence.source == "sacct"

        _until("squeue forgetting the cancelled task", forgotten_by_squeue)
        again = b.inspect(sids[2])
        assert again.outcome.state.name == "CANCELLED" and again.outcome.cause.value == "cancelled", again.outcome
        assert not again.executions[-1].started_at, "it never ran"
    finally:
        if sids:
            admin(name, "scancel", split(sids[0])[0], check=False)
        b.close()
