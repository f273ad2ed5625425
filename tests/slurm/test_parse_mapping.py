"""Every row of the state/cause table, read through each dialect's squeue JSON."""

from dataclasses import replace

import pytest

from dispatch.adapterkit.jobscript import LAUNCH_FAILED_EXIT
from dispatch.outcome import Cause, Evidence, State
from dispatch.slurm.holds import decode_hold, encode_hold
from dispatch.slurm.mapping import outcome_of
from dispatch.slurm.parse import (
    auth_ttl,
    config_seconds,
    decode_wait_status,
    dialect_of,
    filter_jobs,
    parse_config,
    parse_sacct,
    parse_sacct_text,
    parse_sbatch_id,
    parse_squeue,
)
from dispatch.slurmtest import RELEASES, Job, sacct_json, sacct_text, scontrol_config, squeue_json

EV = Evidence("squeue", 1.0)
HELD = encode_hold("h0badf00d")

ROWS = [
    # (job, state, cause, gate_closed, hold, foreign, exit_code)
    (Job(1, state="PENDING", reason="JobHeldUser", priority=0), State.PENDING, Cause.GATED, True, None, None, None),
    (
        Job(1, state="PENDING", reason="JobHeldAdmin", priority=0),
        State.HELD,
        Cause.ADMIN_HELD,
        False,
        None,
        "JobHeldAdmin",
        None,
    ),
    (
        Job(1, state="PENDING", reason="JobHeldUser", description="launch failed requeued held", priority=0),
        State.HELD,
        Cause.ADMIN_HELD,
        False,
        None,
        "launch failed requeued held",
        None,
    ),
    (Job(1, state="PENDING", reason="JobHoldMaxRequeue"), State.FAILED, Cause.LAUNCH_FAILED, False, None, None, None),
    # two reasons to wait at once: one cause by the kit's order (admin-held > held > gated), both readings kept
    (
        Job(1, state="PENDING", reason="JobHeldUser", eligible=HELD, priority=0),
        State.HELD,
        Cause.HELD,
        True,
        "h0badf00d",
        None,
        None,
    ),
    (
        Job(1, state="PENDING", reason="JobHeldAdmin", eligible=HELD, priority=0),
        State.HELD,
        Cause.ADMIN_HELD,
        False,
        "h0badf00d",
        "JobHeldAdmin",
        None,
    ),
    (
        Job(1, state="PENDING", reason="BeginTime", eligible=HELD),
        State.HELD,
        Cause.HELD,
        False,
        "h0badf00d",
        None,
        None,
    ),
    (
        Job(1, state="PENDING", reason="BeginTime", eligible=1_796_000_100),
        State.PENDING,
        Cause.QUEUED,
        False,
        None,
        None,
        None,
    ),
    (Job(1, state="PENDING", reason="Priority"), State.PENDING, Cause.QUEUED, False, None, None, None),
    (Job(1, state="PENDING", reason="Resources"), State.PENDING, Cause.QUEUED, False, None, None, None),
    (Job(1, state="PENDING", reason="Dependency"), State.PENDING, Cause.QUEUED, False, None, None, None),
    (Job(1, state="PENDING", reason="PartitionNodeLimit"), State.PENDING, Cause.NO_CAPACITY, False, None, None, None),
    (Job(1, state="PENDING", reason="BadConstraints"), State.PENDING, Cause.UNRUNNABLE, False, None, None, None),
    (Job(1, state="PENDING", reason="PartitionConfig"), State.PENDING, Cause.UNRUNNABLE, False, None, None, None),
    (Job(1, state="PENDING", reason="InvalidAccount"), State.PENDING, Cause.UNRUNNABLE, False, None, None, None),
    (
        Job(1, state="PENDING", reason="QOSMaxNodePerJobLimit"),
        State.PENDING,
        Cause.UNRUNNABLE,
        False,
        None,
        None,
        None,
    ),
    (
        Job(1, state="PENDING", reason="AssocMaxWallDurationPerJobLimit"),
        State.PENDING,
        Cause.UNRUNNABLE,
        False,
        None,
        None,
        None,
    ),
    (Job(1, state="PENDING", reason="AssocMaxJobsLimit"), State.PENDING, Cause.NO_CAPACITY, False, None, None, None),
    (
        Job(1, state="PENDING", reason="QOSMaxJobsPerUserLimit"),
        State.PENDING,
        Cause.NO_CAPACITY,
        False,
        None,
        None,
        None,
    ),
    (Job(1, state="PENDING", reason="AssocGrpCpuLimit"), State.PENDING, Cause.NO_CAPACITY, False, None, None, None),
    (
        Job(1, state="PENDING", reason="ReqNodeNotAvail, UnavailableNodes:n2"),
        State.PENDING,
        Cause.NO_CAPACITY,
        False,
        None,
        None,
        None,
    ),
    (Job(1, state="PENDING", reason="QOSGrpCpuLimit"), State.PENDING, Cause.NO_CAPACITY, False, None, None, None),
    (Job(1, state="PENDING", flags=("REQUEUED",), reason="None"), State.PENDING, Cause.QUEUED, False, None, None, None),
    (
        Job(1, state="PENDING", flags=("REQUEUE_HOLD",), reason="None"),
        State.HELD,
        Cause.ADMIN_HELD,
        False,
        None,
        "REQUEUE_HOLD",
        None,
    ),
    (Job(1, state="RUNNING"), State.RUNNING, None, False, None, None, None),
    (Job(1, state="RUNNING", flags=("COMPLETING",)), State.RUNNING, None, False, None, None, None),
    (Job(1, state="RUNNING", flags=("CONFIGURING",)), State.RUNNING, None, False, None, None, None),
    (Job(1, state="SUSPENDED"), State.RUNNING, Cause.SUSPENDED, False, None, None, None),
    (Job(1, state="COMPLETED", exit_code=0), State.SUCCEEDED, Cause.EXIT, False, None, None, 0),
    (Job(1, state="FAILED", reason="NonZeroExitCode", exit_code=3), State.FAILED, Cause.EXIT, False, None, None, 3),
    (
        Job(1, state="FAILED", reason="RaisedSignal", exit_code=None, signal=9),
        State.FAILED,
        Cause.EXIT,
        False,
        None,
        None,
        None,
    ),
    (
        Job(1, state="FAILED", reason="JobLaunchFailure", exit_code=1),
        State.FAILED,
        Cause.LAUNCH_FAILED,
        False,
        None,
        None,
        1,
    ),
    (
        Job(1, state="FAILED", flags=("LAUNCH_FAILED",), exit_code=1),
        State.FAILED,
        Cause.LAUNCH_FAILED,
        False,
        None,
        None,
        1,
    ),
    (Job(1, state="CANCELLED", reason="BeginTime"), State.CANCELLED, Cause.CANCELLED, False, None, None, None),
    (Job(1, state="TIMEOUT", reason="TimeLimit"), State.FAILED, Cause.TIMEOUT, False, None, None, None),
    (Job(1, state="DEADLINE", reason="DeadLine"), State.FAILED, Cause.TIMEOUT, False, None, None, None),
    (Job(1, state="NODE_FAIL", reason="NodeDown", exit_code=1), State.FAILED, Cause.NODE_LOST, False, None, None, None),
    (Job(1, state="BOOT_FAIL"), State.FAILED, Cause.NODE_LOST, False, None, None, None),
    (Job(1, state="PREEMPTED"), State.FAILED, Cause.PREEMPTED, False, None, None, None),
    (Job(1, state="OUT_OF_MEMORY", reason="OutOfMemory"), State.FAILED, Cause.OUT_OF_MEMORY, False, None, None, None),
]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("row", ROWS, ids=[f"{r[0].state}-{r[0].reason}-{'/'.join(r[0].flags)}" for r in ROWS])
def test_state_cause_table(release: str, row: tuple) -> None:
    job, state, cause, gate_closed, hold, foreign, code = row
    if release == "22.05.8" and "LAUNCH_FAILED" in job.flags:
        # 22.05's one-string state cannot carry this flag: the row exists from 23.02 on
        job = Job(1, state="FAILED", reason="JobLaunchFailure", exit_code=1)
    _, jobs = parse_squeue(squeue_json(release, job))
    reading = outcome_of(jobs[0], EV)
    assert reading.outcome.state is state
    assert reading.outcome.cause is cause
    assert reading.gate_closed is gate_closed
    assert reading.hold == hold
    assert reading.foreign_hold == foreign
    assert reading.outcome.exit_code == code
    assert reading.outcome.signal == (job.signal if cause in (Cause.EXIT, Cause.LAUNCH_FAILED) else None)


def test_2205_flag_replaces_base_state_reads_running() -> None:
    _, jobs = parse_squeue(squeue_json("22.05.8", Job(1, state="FAILED", flags=("COMPLETING",))))
    assert jobs[0].state == "" and "COMPLETING" in jobs[0].flags
    assert outcome_of(jobs[0], EV).outcome.state is State.RUNNING


def test_unknown_state_is_unknown_never_success() -> None:
    _, jobs = parse_squeue(squeue_json("26.05.5", Job(1, state="WEIRD")))
    out = outcome_of(jobs[0], EV).outcome
    assert out.state is State.UNKNOWN and out.cause is Cause.UNKNOWN


@pytest.mark.parametrize("release", RELEASES)
def test_dialect_detection_and_fields(release: str) -> None:
    rel, jobs = parse_squeue(
        squeue_json(release, Job(5, name="m", state="RUNNING", restarts=2, start=1_796_000_010, nodes="n[1-2]"))
    )
    assert rel == release
    j = jobs[0]
    assert (j.job_id, j.name, j.restart_cnt, j.start_time, j.nodes) == ("5", "m", 2, 1_796_000_010.0, "n[1-2]")
    assert dialect_of(release) == {"22.05.8": "v0.0.38", "25.11.7": "v0.0.44", "26.05.5": "v0.0.45"}[release]


def test_2205_wait_status() -> None:
    assert decode_wait_status(768) == (3, None)
    assert decode_wait_status(9) == (None, 9)
    assert decode_wait_status(0) == (0, None)


def test_2205_squeue_ignores_filters_so_we_filter() -> None:
    _, jobs = parse_squeue(squeue_json("22.05.8", Job(1, name="a"), Job(2, name="b")))
    assert [j.job_id for j in filter_jobs(jobs, ids=["2"])] == ["2"]
    assert [j.job_id for j in filter_jobs(jobs, names=["a"])] == ["1"]


def test_2205_sacct_json_loses_exit_codes_text_keeps_them() -> None:
    j = Job(7, state="FAILED", reason="NonZeroExitCode", exit_code=3)
    _, bad = parse_sacct(sacct_json("22.05.8", j))
    assert bad[0].exit_code == 0  # the upstream bug, reproduced by the renderer
    assert outcome_of(bad[0], EV).outcome.exit_code is None  # a FAILED 0 is not trusted
    good = parse_sacct_text(sacct_text(j, Job(7, state="COMPLETED")))
    assert good[0].exit_code == 3 and [g.restart_cnt for g in good] == [0, 1]


@pytest.mark.parametrize("release", ["25.11.7", "26.05.5"])
def test_sacct_json_executions(release: str) -> None:
    _, recs = parse_sacct(
        sacct_json(
            release,
            Job(4, state="PENDING", flags=("REQUEUED",), restarts=0),
            Job(4, state="PREEMPTED", restarts=1),
            Job(4, state="FAILED", exit_code=2, restarts=2),
        )
    )
    assert [r.restart_cnt for r in recs] == [0, 1, 2]
    assert recs[2].exit_code == 2
    assert outcome_of(recs[1], EV).outcome.cause is Cause.PREEMPTED


def test_config_and_ttl() -> None:
    cfg = parse_config(scontrol_config("26.05.5", AuthInfo="socket=/x,ttl=120"))
    assert cfg["SLURM_VERSION"] == "26.05.5"
    assert config_seconds(cfg, "MinJobAge", 300) == 15
    assert auth_ttl(cfg) == 120
    assert auth_ttl({"AuthType": "auth/munge"}) == 300
    assert auth_ttl({"AuthType": "auth/slurm"}) == 60
    assert auth_ttl({"AuthType": "auth/none"}) is None


def test_sbatch_id_and_hold_codec() -> None:
    assert parse_sbatch_id("42\n") == "42"
    assert parse_sbatch_id("42;cluster\n") == "42"
    assert decode_hold(encode_hold("h12345678")) == "h12345678"
    assert decode_hold(1_796_000_000) is None
    assert decode_hold(encode_hold("anything")) is not None


def test_oom_in_a_step_reads_out_of_memory() -> None:
    text = (
        sacct_text(Job(12, "m", "FAILED", exit_code=1))
        + "12.batch|batch|FAILED|1:0|1|1|1|2|n1|None\n12.0|tail|OUT_OF_MEMORY|0:125|1|1|1|2|n1|None\n"
    )
    recs = parse_sacct_text(text)
    assert len(recs) == 1 and recs[0].step_states == {"FAILED", "OUT_OF_MEMORY"}
    assert outcome_of(recs[0], EV).outcome.cause is Cause.OUT_OF_MEMORY


# ------------------------------------------------------------------ one rule for exit code and signal


def _meta_2302() -> dict:
    return {
        "plugin": {"type": "openapi/v0.0.39", "name": "Slurm OpenAPI v0.0.39", "data_parser": "data_parser/v0.0.39"},
        "Slurm": {"version": {"major": 23, "micro": 5, "minor": 2}, "release": "23.02.5"},
    }


@pytest.mark.parametrize(("status", "code", "sig"), [(256, 1, None), (9, None, 9), (0, 0, None)])
def test_2302_exit_code_object_holds_a_raw_wait_status(status: int, code: int | None, sig: int | None) -> None:
    import json

    doc = {
        "meta": _meta_2302(),
        "jobs": [
            {
                "job_id": 5,
                "name": "j",
                "job_state": ["FAILED" if status else "COMPLETED"],
                "exit_code": {"set": True, "infinite": False, "number": status},
            }
        ],
    }
    _, jobs = parse_squeue(json.dumps(doc))
    assert (jobs[0].exit_code, jobs[0].signal) == (code, sig)


def test_declared_dialect_wins_over_the_release() -> None:
    from dispatch.slurm.parse import declared_dialect, dialect_of_doc

    # a 26.05 release asked for an older data_parser: the output's declaration decides
    doc = {"meta": {"plugin": {"data_parser": "data_parser/v0.0.39"}, "slurm": {"release": "26.05.5"}}}
    assert declared_dialect(doc) == "v0.0.39"
    assert dialect_of_doc(doc, "26.05.5") == "v0.0.39"
    assert declared_dialect({"meta": {"plugin": {"type": "openapi/v0.0.38"}}}) == "v0.0.38"
    assert dialect_of_doc({"meta": {}}, "24.11.5") == "v0.0.42"
    assert [dialect_of(r) for r in ("22.05.8", "23.02.1", "23.11.1", "24.05.1", "24.11.5", "25.05.1", "25.11.7",
                                    "26.05.5")] == [f"v0.0.{n}" for n in range(38, 46)]  # fmt: skip


@pytest.mark.parametrize("release", RELEASES)
def test_signal_killed_job_reads_the_same_from_text_and_json(release: str) -> None:
    job = Job(8, "k", "FAILED", reason="RaisedSignal", signal=9)
    text = parse_sacct_text(sacct_text(job))[0]
    live = parse_squeue(squeue_json(release, job))[1][0]
    readings = [outcome_of(text, EV).outcome, outcome_of(live, EV).outcome]
    if release != "22.05.8":  # 22.05's sacct JSON is not read (it loses exit codes)
        readings.append(outcome_of(parse_sacct(sacct_json(release, job))[1][0], EV).outcome)
    assert {(o.state, o.cause, o.exit_code, o.signal) for o in readings} == {(State.FAILED, Cause.EXIT, None, 9)}


@pytest.mark.parametrize("state", ["TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "CANCELLED"])
def test_slurm_ended_executions_carry_no_exit_code_live_or_from_accounting(state: str) -> None:
    # squeue's raw 36608 (exit 143) live; sacct's job line 0:0 (or 1:0 after a node failure) afterwards
    live = parse_squeue(squeue_json("22.05.8", Job(9, "t", state, exit_code=143)))[1][0]
    acct = parse_sacct_text(sacct_text(Job(9, "t", state, exit_code=1 if state == "NODE_FAIL" else 0)))[0]
    for rec in (live, acct):
        o = outcome_of(rec, EV).outcome
        assert (o.exit_code, o.signal) == (None, None)


def test_2605_execution_ended_by_a_requeue_reads_ended_with_its_times() -> None:
    ran = Job(10, "r", "PENDING", flags=("REQUEUED",), start=1_800_000_010, end=1_800_000_020, nodes="node1")
    rec = parse_sacct(sacct_json("26.05.5", ran))[1][0]
    assert rec.state == "REQUEUED"
    o = outcome_of(rec, EV).outcome
    assert (o.state, o.cause) == (State.CANCELLED, Cause.CANCELLED)
    assert (rec.start_time, rec.end_time) == (1_800_000_010.0, 1_800_000_020.0)


def test_pending_job_whose_batch_step_runs_reads_running() -> None:
    rec = replace(parse_sacct_text(sacct_text(Job(11, "p", "PENDING")))[0], step_states=frozenset({"RUNNING"}))
    assert outcome_of(rec, EV).outcome.state is State.RUNNING


def test_2205_completing_right_after_a_requeue_reads_pending_not_running() -> None:
    _, jobs = parse_squeue(squeue_json("22.05.8", Job(12, "q", "PENDING", flags=("COMPLETING",), restarts=1)))
    assert jobs[0].start_time is None
    assert outcome_of(jobs[0], EV).outcome.state is State.PENDING
    _, jobs = parse_squeue(
        squeue_json("22.05.8", Job(12, "q", "RUNNING", flags=("COMPLETING",), restarts=1, start=1_800_000_000))
    )
    assert outcome_of(jobs[0], EV).outcome.state is State.RUNNING


def test_detail_never_shows_a_raw_none_reason() -> None:
    _, jobs = parse_squeue(squeue_json("22.05.8", Job(13, "c", "COMPLETED", reason="None")))
    assert outcome_of(jobs[0], EV).outcome.detail == "COMPLETED"


def test_a_failed_ranks_own_code_wins_over_the_batch_shells() -> None:
    """22.05's text for a 2-node job whose rank 1 exited 3 (the other ended by srun): job 15:0, step 3:0."""
    text = (
        sacct_text(Job(14, "m", "FAILED", exit_code=15))
        + "14.batch|batch|FAILED|15:0|1|1|1|2|n1|\n14.extern|extern|COMPLETED|0:0|1|1|1|2|n1,n2|\n"
        + "14.0|bash|FAILED|3:0|1|1|1|2|n1,n2|\n"
    )
    rec = parse_sacct_text(text)[0]
    assert rec.step_exit_code == 3
    outcome = outcome_of(rec, EV).outcome
    assert (outcome.state, outcome.cause, outcome.exit_code, outcome.signal) == (State.FAILED, Cause.EXIT, 3, None)
    # the same from JSON (26.05): the srun step's return code, not the batch step's
    import json

    doc = json.loads(sacct_json("26.05.5", Job(14, "m", "FAILED", exit_code=15)))
    code = {"status": ["ERROR"], "return_code": {"set": True, "infinite": False, "number": 3}}
    batch = {"status": ["ERROR"], "return_code": {"set": True, "infinite": False, "number": 15}}
    doc["jobs"][0]["steps"] = [
        {"step": {"id": "14.batch", "name": "batch"}, "state": ["FAILED"], "exit_code": batch},
        {"step": {"id": "14.0", "name": "bash"}, "state": ["FAILED"], "exit_code": code},
    ]
    _, jobs = parse_sacct(json.dumps(doc))
    assert jobs[0].step_exit_code == 3 and outcome_of(jobs[0], EV).outcome.exit_code == 3
    # no srun step failed: the job's own code, as before
    plain = parse_sacct_text(
        sacct_text(Job(15, "m", "FAILED", exit_code=3)) + "15.batch|batch|FAILED|3:0|1|1|1|2|n1|\n"
    )
    assert plain[0].step_exit_code is None and outcome_of(plain[0], EV).outcome.exit_code == 3


def test_a_hostlist_expands_to_its_node_names() -> None:
    from dispatch.slurm.parse import ParseError, expand_hostlist

    assert expand_hostlist("n1") == ("n1",)
    assert expand_hostlist("n[1-3,07],gpu1") == ("n1", "n2", "n3", "n07", "gpu1")
    assert expand_hostlist("rack[1-2]-n[01-02]") == ("rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02")
    assert expand_hostlist("n1,n1") == ("n1",)
    for bad in ("n[1-", "n[a-b]", "n[3-1]", "n1;x"):
        with pytest.raises(ParseError):
            expand_hostlist(bad)


def test_the_launch_checks_exit_is_not_launchable_but_a_ranks_own_125_is_its_exit() -> None:
    """The batch script exits 125 before srun (its launch checks failed: the program, the working directory or
    the image does not exist): no srun step, not-launchable, the job's own failure that blames no node."""
    failed_checks = parse_sacct_text(
        sacct_text(Job(16, "m", "FAILED", exit_code=LAUNCH_FAILED_EXIT)) + "16.batch|batch|FAILED|125:0|1|1|1|2|n1|\n"
    )[0]
    out = outcome_of(failed_checks, EV).outcome
    assert (out.state, out.cause, out.exit_code) == (State.FAILED, Cause.NOT_LAUNCHABLE, LAUNCH_FAILED_EXIT)
    rank_exit = parse_sacct_text(
        sacct_text(Job(17, "m", "FAILED", exit_code=LAUNCH_FAILED_EXIT))
        + "17.batch|batch|FAILED|125:0|1|1|1|2|n1|\n17.0|bash|FAILED|125:0|1|1|1|2|n1|\n"
    )[0]
    out = outcome_of(rank_exit, EV).outcome
    assert (out.state, out.cause, out.exit_code) == (State.FAILED, Cause.EXIT, LAUNCH_FAILED_EXIT)


def test_the_text_listing_fills_each_field_of_every_task_a_row_stands_for() -> None:
    from dispatch.slurm.parse import SlurmJob, parse_squeue_text

    text = (
        "7_[0-2%2]|PENDING|JobHeldUser|0|1700|N/A||dspa-x\n"
        "8|RUNNING| None |2|1700|1800| n[1-2] |a|b\n"
        "9|COMPLETING|x|N/A|0|1|n1|c\n"
    )
    got = parse_squeue_text(text, "26.05.5")
    assert got == [
        *(SlurmJob(job_id=f"7_{t}", name="dspa-x", state="PENDING", flags=frozenset(), reason="JobHeldUser",
                   restart_cnt=0, eligible_time=1700.0, source="squeue", release="26.05.5") for t in range(3)),
        SlurmJob(job_id="8", name="a|b", state="RUNNING", flags=frozenset(), reason="None", restart_cnt=2,
                 eligible_time=1700.0, start_time=1800.0, nodes="n[1-2]", source="squeue", release="26.05.5"),
        SlurmJob(job_id="9", name="c", state="", flags=frozenset({"COMPLETING"}), reason="x", source="squeue",
                 release="26.05.5"),
    ]  # fmt: skip
