"""The backend against transcripts: preflight, gate, reads in each dialect, holds, requeue, failures."""

import os
import stat
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

import dispatch.slurm as slurm
from dispatch.capabilities import Answer
from dispatch.clock import FakeClock
from dispatch.cluster import checked
from dispatch.errors import NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable, Unsupported
from dispatch.extensions import Image
from dispatch.outcome import Cause, Outcome, State
from dispatch.slurm.holds import encode_hold
from dispatch.slurmtest import (
    RELEASE_2205,
    RELEASE_2605,
    RELEASES,
    Call,
    Exchange,
    Job,
    TranscriptExecutor,
    UnexpectedScript,
    absent,
    expired,
    fail,
    ok,
    ready_preflight,
    sacct_json,
    sacct_text,
    squeue_json,
    squeue_text,
    wrapped,
)
from dispatch.spec import JobSpec
from dispatch.spi import Gate, Holder, MultiFinder, OutputReader, Requeuer, StartRequest

NOW = 1_800_000_000.0


def backend(release: str = RELEASE_2605, *extra: Exchange, read_only: bool = False, **kw: object):
    ex = TranscriptExecutor([*ready_preflight(release, now=NOW, read_only=read_only, **kw), *extra])  # type: ignore[arg-type]
    b = slurm.new({}, executor=ex, clock=FakeClock(NOW), read_only=read_only)
    return b, ex


def req(marker: str = "dsp-j-1") -> StartRequest:
    return StartRequest("j", 1, marker, JobSpec(("echo", "hi")))


@pytest.mark.parametrize("release", RELEASES)
def test_preflight_capabilities_and_declarations(release: str) -> None:
    b, ex = backend(release)
    ex.assert_done()
    caps = b.capabilities()
    assert caps.answer(slurm_cap("Hold")) is Answer.YES
    assert caps.answer(slurm_cap("AccountingHistory")) is Answer.YES
    d = b.declarations()
    assert d.node_loss_window == 80.0
    assert d.polled_loss is not None and d.polled_loss.state == 15.0 and d.polled_loss.execution == float("inf")
    assert d.call_bound > 0
    assert (
        isinstance(b, Holder) and isinstance(b, Requeuer) and isinstance(b, MultiFinder) and isinstance(b, OutputReader)
    )


def slurm_cap(name: str):
    from dispatch.capabilities import Capability

    return Capability(name)


def test_no_landing_bound_hands_out_without_holder() -> None:
    b, _ = backend(RELEASE_2605, AuthType="auth/none")
    assert b.declarations().call_bound == 0
    view = checked(b)
    assert not isinstance(view, Holder) and not isinstance(view, Requeuer)


def test_read_only_probes_nothing_and_answers_unknown() -> None:
    b, ex = backend(RELEASE_2605, read_only=True)
    ex.assert_done()
    assert b.capabilities().answer(slurm_cap("Hold")) is Answer.UNKNOWN
    assert b.capabilities().answer(slurm_cap("AccountingHistory")) is Answer.UNKNOWN
    assert b.declarations().polled_loss.execution == 0  # type: ignore[union-attr]
    with pytest.raises(ReadOnly):
        b.start(req())
    ex.assert_done()


def test_preflight_cache_is_used_by_a_read_only_open(tmp_path) -> None:
    ex = TranscriptExecutor(ready_preflight(RELEASE_2605, now=NOW))
    slurm.new({"preflight": {"cacheDir": str(tmp_path)}}, executor=ex, clock=FakeClock(NOW))
    ex2 = TranscriptExecutor(ready_preflight(RELEASE_2605, now=NOW, read_only=True))
    b = slurm.new({"preflight": {"cacheDir": str(tmp_path)}}, executor=ex2, clock=FakeClock(NOW + 10), read_only=True)
    assert b.capabilities()[slurm_cap("Hold")].provenance.value == "cached"
    assert b.capabilities().answer(slurm_cap("Hold")) is Answer.YES


@pytest.mark.parametrize("forge", ["loose file", "loose directory", "link", "another user's"])
def test_a_preflight_cache_others_could_have_written_is_ignored(tmp_path, forge: str) -> None:
    """A cache another user could have written (or planted as a link) is not taken: its answers would say Hold
    yes on a cluster that has none. A read-only open then answers unknown, as with no cache."""
    ex = TranscriptExecutor(ready_preflight(RELEASE_2605, now=NOW))
    slurm.new({"preflight": {"cacheDir": str(tmp_path)}}, executor=ex, clock=FakeClock(NOW))
    (cache,) = tmp_path.glob("slurm-*.json")
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    if forge == "loose file":
        cache.chmod(0o666)
    elif forge == "loose directory":
        tmp_path.chmod(0o777)
    elif forge == "link":
        moved = tmp_path / "elsewhere.json"
        cache.rename(moved)
        cache.symlink_to(moved)
    else:
        os.chown(cache, 65534, 65534)
    ex2 = TranscriptExecutor(ready_preflight(RELEASE_2605, now=NOW, read_only=True))
    b = slurm.new({"preflight": {"cacheDir": str(tmp_path)}}, executor=ex2, clock=FakeClock(NOW + 10), read_only=True)
    assert b.capabilities().answer(slurm_cap("Hold")) is Answer.UNKNOWN


def test_missing_command_refuses_open() -> None:
    ex = TranscriptExecutor([Exchange("scontrol show config", wrapped(ok("sacct\n"), ok("1\n"), ok(""), ok("")))])
    with pytest.raises(Unavailable, match="sacct"):
        slurm.new({}, executor=ex, clock=FakeClock(NOW))


def test_start_submits_held_and_returns_id() -> None:
    b, ex = backend(RELEASE_2605, Exchange("--hold", wrapped(ok(), ok("4242\n"))))
    assert b.start(req()) == "4242"
    script = ex.scripts[-1]
    assert "--job-name=dsp-j-1" in script and "--no-requeue" in script and "END_" in script


def test_start_refuses_image_before_any_script_where_apptainer_is_missing() -> None:
    b, ex = backend()
    with pytest.raises(Unsupported, match="needs ContainerImage, which is no here: apptainer is not found in PATH"):
        b.start(StartRequest("j", 1, "dsp-j-1", JobSpec(("x",), extensions=(Image(ref="a:b"),))))
    ex.assert_done()


def test_an_image_job_is_submitted_where_the_probe_started_a_container() -> None:
    b, ex = backend(RELEASE_2605, Exchange("--hold", wrapped(ok(), ok("4243\n"))), apptainer=True)
    answer = b.capabilities()[slurm_cap("ContainerImage")]
    assert answer.answer is Answer.YES and "apptainer version 1.4.5 at /usr/bin/apptainer" in answer.reason
    assert b.start(StartRequest("j", 1, "dsp-j-1", JobSpec(("x",), extensions=(Image(ref="/img/a.sif"),)))) == "4243"
    sent = ex.scripts[-1]
    assert f"dispatch-rank apptainer exec --bind {os.getcwd()} --bind /home/ada/dispatch-output --pwd" in sent
    assert "/img/a.sif x\n" in sent
    shown = b.render(StartRequest("j", 1, "dsp-j-1", JobSpec(("x",), extensions=(Image(ref="/img/a.sif"),))))
    assert "dispatch-rank apptainer exec --bind " in shown and "/img/a.sif x\n" in shown  # --dry-run's words


def test_start_rejected_by_sbatch() -> None:
    b, _ = backend(
        RELEASE_2605,
        Exchange(
            "--hold",
            wrapped(ok(), fail("sbatch: error: Batch job submission failed: Invalid partition name specified")),
        ),
    )
    with pytest.raises(Rejected, match="Invalid partition"):
        b.start(req())


def test_cut_connection_after_start_is_outcome_unknown() -> None:
    res = wrapped(ok(), ok(""), cut_after=1)
    b, _ = backend(RELEASE_2605, Exchange("--hold", res, fail="connection reset"))
    with pytest.raises(OutcomeUnknown):
        b.start(req())


def test_dead_master_before_start_is_unavailable() -> None:
    from dispatch.slurm.transport import Result

    b, _ = backend(RELEASE_2605, Exchange("--hold", Result("", "mux_client: master died", 255), fail="master died"))
    with pytest.raises(Unavailable):
        b.start(req())


def test_expired_sbatch_is_outcome_unknown() -> None:
    b, _ = backend(RELEASE_2605, Exchange("--hold", wrapped(ok(), expired())))
    with pytest.raises(OutcomeUnknown):
        b.start(req())


OPERATOR = ok("Operator\n")
"""``sacctmgr``'s answer, in the first opening's script: the caller is an Operator in the accounting database, whom
Slurm lets lift an administrator's hold."""


def test_open_releases_our_gate_only() -> None:
    b, ex = backend(
        RELEASE_2605,
        Exchange("scontrol release", wrapped(OPERATOR, ok("7 release\n"))),
        Exchange("scontrol release", wrapped(ok("7 admin\n"))),
        Exchange("scontrol release", wrapped(ok("7 open\n"))),
    )
    b.open("7")
    assert "JobHeldUser) rel=" in ex.scripts[-1]
    with pytest.raises(Rejected, match="administrator"):
        b.open("7")
    b.open("7")  # already open: nothing to do


def test_open_of_a_purged_job_is_not_found() -> None:
    b, _ = backend(RELEASE_2605, Exchange("scontrol release", wrapped(OPERATOR, ok(""))))
    with pytest.raises(NotFound):
        b.open("7")


def test_open_many_is_one_squeue_and_one_release() -> None:
    out = "7 release\n8 admin\n10 release\n"
    b, ex = backend(
        RELEASE_2605,
        Exchange(
            "scontrol release",
            wrapped(OPERATOR, fail("Job is no longer pending execution for job 10", 2, stdout=out)),
        ),
    )
    got = b.open_many(["7", "8", "9", "10"])
    assert ex.scripts[-1].count("_dsp_call ") == 2 and "7,8,9,10" in ex.scripts[-1]  # sacctmgr, then the opening
    assert got[0] is None and isinstance(got[1], Rejected) and isinstance(got[2], NotFound)
    assert isinstance(got[3], Rejected)


def test_a_caller_who_cannot_lift_an_admin_hold_opens_with_the_release_alone() -> None:
    """Slurm refuses an ordinary user's release of an administrator's hold, so no squeue reads the holds first:
    Slurm's answers (26.05's words, captured) say which job carried one, which had ended and which is unknown.
    The caller's admin level is asked once, in the first opening's script (which reads the holds first)."""
    stderr = (
        "7,8,9,10 Access/permission denied for job 8\n"
        "7,8,9,10 Invalid job id specified for job 9\n"
        "7,8,9,10 Job has already finished for job 10\n"
        "7,8,9,10 slurm_suspend error:Access/permission denied\n"
    )
    b, ex = backend(
        RELEASE_2605,
        Exchange("adminlevel", wrapped(ok("None\n"), ok("6 release\n"))),
        Exchange("scontrol release", wrapped(fail(stderr, 2))),
        Exchange("scontrol release", wrapped(ok())),
    )
    b.open("6")
    assert "JobHeldUser) rel=" in ex.scripts[-1]  # not known yet: read the holds first
    got = b.open_many(["7", "8", "9", "10"])
    assert "squeue" not in ex.scripts[-1] and "7,8,9,10" in ex.scripts[-1]
    assert got[0] is None and got[3] is None
    assert isinstance(got[1], Rejected) and "administrator" in str(got[1]) and isinstance(got[2], NotFound)
    b.open("11")
    ex.assert_done()


def test_a_caller_whom_accounting_made_an_operator_meanwhile_reads_the_holds_first_again() -> None:
    """The database's "None" holds for ADMIN_LEVEL_TTL seconds: past it the next opening asks again, and a
    caller an administrator has made an Operator since (Slurm now lets them lift an administrator's hold)
    reads the holds first, so job 9's administrator's hold stays."""
    from dispatch.slurm.gates import ADMIN_LEVEL_TTL

    b, ex = backend(
        RELEASE_2605,
        Exchange("adminlevel", wrapped(ok("None\n"), ok("6 release\n"))),
        Exchange("scontrol release", wrapped(ok())),
        Exchange("adminlevel", wrapped(ok("Operator\n"), ok("8 release\n9 admin\n"))),
        Exchange("JobHeldUser) rel=", wrapped(ok("10 release\n"))),
    )
    b.open("6")
    b.open("7")
    assert "squeue" not in ex.scripts[-1]  # within the TTL: the release alone
    clock = b._gates.core.clock
    assert isinstance(clock, FakeClock)
    clock.advance(ADMIN_LEVEL_TTL + 1)
    got = b.open_many(["8", "9"])
    assert "adminlevel" in ex.scripts[-1] and "JobHeldUser) rel=" in ex.scripts[-1]
    assert got[0] is None and isinstance(got[1], Rejected)
    clock.advance(ADMIN_LEVEL_TTL + 1)
    b.open("10")  # an Operator's answer is not asked again
    assert "adminlevel" not in ex.scripts[-1]
    ex.assert_done()


@pytest.mark.parametrize(("user", "accounting"), [("root", True), ("slurm", True), ("ada", False)])
def test_whether_a_caller_can_lift_an_admin_hold_needs_no_question_for_root_the_slurm_user_or_no_accounting(
    user: str, accounting: bool
) -> None:
    b, ex = backend(RELEASE_2605, Exchange("scontrol release", wrapped(ok("7 release\n"))))
    gates = b.unrestricted._gates if hasattr(b, "unrestricted") else b._gates
    gates.core.facts.user = user
    gates.core.facts.config["SlurmUser"] = "slurm(64030)"  # as `scontrol show config` prints it
    if not accounting:
        gates.core.facts.config["AccountingStorageType"] = "accounting_storage/none"
    assert gates.lifts_admin_holds() is (user != "ada")
    b.open("7")
    assert ("squeue" in ex.scripts[-1]) is (user != "ada")


def _open_gates_on_bash(listing: str, scontrol: str, ids: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """OPEN_GATES run by a real bash against stand-in squeue and scontrol commands: its result and the scontrol
    calls it made."""
    from dispatch.slurm.backend import OPEN_GATES, RANGES

    with tempfile.TemporaryDirectory() as d:
        for cmd, body in (("squeue", listing), ("scontrol", f'echo "$@" >> "$LOG"\n{scontrol}')):
            with open(os.path.join(d, cmd), "w") as f:
                f.write(f"#!/bin/sh\n{body}\n")
            os.chmod(os.path.join(d, cmd), 0o755)
        log = os.path.join(d, "log")
        env = dict(os.environ, PATH=f"{d}:{os.environ['PATH']}", LOG=log)
        p = subprocess.run(["bash", "-c", OPEN_GATES, "_", ids, RANGES], env=env, capture_output=True, text=True, cwd=d)
        calls = Path(log).read_text().splitlines() if os.path.exists(log) else []
    return p, calls


def test_open_gates_script_on_bash() -> None:
    """The batched open: one release per array (its tasks as ranges, so Slurm releases the array's own record
    as one) and one for the plain jobs; a file named like an expression in the working directory changes
    nothing (no glob)."""
    listing = (
        'printf "7 JobHeldUser\\n8 JobHeldAdmin\\n9 None\\n11 JobHeldUser\\n40_2 JobHeldUser\\n40_0 JobHeldUser\\n'
        '40_1 JobHeldUser\\n40_4 JobHeldUser\\n40_3 None\\n41_3 JobHeldUser\\n"'
    )
    p, calls = _open_gates_on_bash(listing, "touch 41_3", "7,8,9,11,40_0,40_1,40_2,40_3,40_4,41_3")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:4] == ["7 release", "8 admin", "9 open", "11 release"]
    assert calls == ["release 40_[0-2,4]", "release 41_[3]", "release 7,11"]


def test_open_gates_reports_each_failed_release_with_the_jobs_it_named() -> None:
    from dispatch.slurm.backend import _release_failures

    listing = 'printf "5 JobHeldUser\\n40_0 JobHeldUser\\n40_1 JobHeldUser\\n"'
    fail = 'case "$2" in 40_*) echo "slurm_suspend error: Access/permission denied" >&2; exit 1;; esac'
    p, calls = _open_gates_on_bash(listing, fail, "5,40_0,40_1")
    assert p.returncode == 2 and calls == ["release 40_[0-1]", "release 5"]
    failed = _release_failures(p.stderr)
    assert set(failed) == {"40_0", "40_1"} and "Access/permission denied" in failed["40_0"]
    named = _release_failures("7,40_[0-1] Job is no longer pending execution for job 40_1")
    assert set(named) == {"40_1"}, "a message naming its job fails that job alone"


def test_open_many_keeps_an_arrays_tasks_in_one_script() -> None:
    from dispatch.slurm.backend import _open_chunks

    ids = ["1", "9_0", "2", "9_1", "8_0", "9_2", "3"]
    assert _open_chunks(ids, 4) == [[1, 3, 5, 4], [0, 2, 6]]
    assert _open_chunks(ids, 3) == [[1, 3, 5], [4, 0, 2], [6]]
    assert _open_chunks([f"5_{t}" for t in range(5)], 2) == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("release", RELEASES)
def test_inspect_gated_and_held(release: str) -> None:
    gated = Job(7, "dsp-j-1", "PENDING", reason="JobHeldUser", priority=0)
    held = Job(8, "dsp-j-2", "PENDING", reason="BeginTime", eligible=encode_hold("h00c0ffee"))
    b, ex = backend(release, Exchange("JobArrayID:|,State", wrapped(ok(squeue_text(gated, held, Job(9, "other"))))))
    got = b.inspect_many(["7", "8"])
    ex.assert_done()  # the text listing settles both: no JSON, no sacct
    assert set(got) == {"7", "8"}
    assert got["7"].gate is Gate.CLOSED and got["7"].outcome.cause is Cause.GATED
    assert got["8"].holds == ("h00c0ffee",) and got["8"].outcome.state is State.HELD
    assert got["8"].executions[0].identity == "2.8.0"


def test_inspect_requeued_reads_history_2605() -> None:
    live = Job(4, "dsp-j-1", "RUNNING", restarts=2, start=NOW - 5)
    hist = sacct_json(
        RELEASE_2605,
        Job(4, "dsp-j-1", "PENDING", ("REQUEUED",), restarts=0, start=NOW - 60, end=NOW - 50),
                      Job(4, "dsp-j-1", "PREEMPTED", restarts=1, start=NOW - 40, end=NOW - 30),
                      Job(4, "dsp-j-1", "RUNNING", restarts=2, start=NOW - 5))  # fmt: skip
    b, _ = backend(
        RELEASE_2605,
        Exchange("JobArrayID:|,State", wrapped(ok(squeue_text(live)))),
        Exchange("squeue --json", wrapped(ok(squeue_json(RELEASE_2605, live)))),
        Exchange("sacct --json -D", wrapped(ok(hist))),
    )
    ev = b.inspect("4")
    assert [e.identity for e in ev.executions] == ["1.4.0", "1.4.1", "1.4.2"]
    assert ev.executions[1].outcome.cause is Cause.PREEMPTED
    assert ev.outcome.state is State.RUNNING


def test_gone_from_squeue_with_accounting_2205_uses_text_exit_codes() -> None:
    b, _ = backend(
        RELEASE_2205,
        Exchange("JobArrayID:|,State", wrapped(ok(""))),
        Exchange("sacct -D -P", wrapped(ok(sacct_text(Job(9, "dsp-j-1", "FAILED", exit_code=3, end=int(NOW)))))),
    )
    ev = b.inspect("9")
    assert ev.outcome.state is State.FAILED and ev.outcome.cause is Cause.EXIT and ev.outcome.exit_code == 3
    assert ev.outcome.evidence.source == "sacct"


def test_gone_without_accounting_is_not_found_never_success() -> None:
    b, _ = backend(RELEASE_2605, Exchange("JobArrayID:|,State", wrapped(absent())), accounting=False)
    with pytest.raises(NotFound):
        b.inspect("9")


def test_failed_poll_is_unavailable() -> None:
    b, _ = backend(
        RELEASE_2605,
        Exchange("JobArrayID:|,State", wrapped(fail("Unable to contact slurm controller (connect failure)"))),
    )
    with pytest.raises(Unavailable):
        b.inspect("9")


def test_hold_on_running_is_rejected_and_release_by_instance() -> None:
    other = str(encode_hold("h00000002"))
    b, ex = backend(
        RELEASE_2605,
        Exchange('StartTime="uts$2"', wrapped(fail("", 4, stdout="RUNNING\n"))),
        Exchange("StartTime=now", wrapped(fail("", 5, stdout=other + "\n"))),
        Exchange("StartTime=now", wrapped(ok())),
    )
    with pytest.raises(Rejected, match="running"):
        b.hold("5", "h00000001")
    with pytest.raises(Rejected, match="h00000002"):
        b.release("6", "h00000001")
    b.release("6", "h00000002")
    ex.assert_done()
    assert all(x.count("_dsp_call ") == 1 for x in ex.scripts[-3:]), "read and update: one call, one script"


def test_hold_sets_encoded_start_time() -> None:
    b, ex = backend(RELEASE_2605, Exchange('StartTime="uts$2"', wrapped(ok())))
    b.hold("7", "h0000abcd")
    assert str(encode_hold("h0000abcd")) in ex.scripts[-1]


def test_hold_script_reads_and_updates_in_one_round_trip_on_bash() -> None:
    """The hold script's decisions, run by a real bash against stand-in squeue and scontrol commands."""
    import os
    import subprocess
    import tempfile

    from dispatch.slurm.backend import HOLD_SCRIPT
    from dispatch.slurm.holds import HOLD_BASE, HOLD_SPAN

    mine = encode_hold("h00000001")
    with tempfile.TemporaryDirectory() as d:
        for cmd, body in (("squeue", 'printf "%s\\n" "$LINE"'), ("scontrol", 'echo "$@" >> "$LOG"')):
            with open(os.path.join(d, cmd), "w") as f:
                f.write(f"#!/bin/sh\n{body}\n")
            os.chmod(os.path.join(d, cmd), 0o755)
        log = os.path.join(d, "log")
        args = ["7", str(mine), str(HOLD_BASE), str(HOLD_BASE + HOLD_SPAN)]

        def run(line: str) -> tuple[int, str]:
            env = dict(os.environ, PATH=f"{d}:{os.environ['PATH']}", LINE=line, LOG=log)
            p = subprocess.run(["bash", "-c", HOLD_SCRIPT, "_", *args], env=env, capture_output=True, text=True)
            return p.returncode, p.stdout.strip()

        assert run("RUNNING|1796000000|") == (4, "RUNNING")
        assert run(f"PENDING|{encode_hold('h00000009')}|") == (5, str(encode_hold("h00000009")))
        assert run("PENDING|N/A|")[0] == 0
        assert run(f"PENDING|{mine}|")[0] == 0
        with open(log) as f:
            assert f.read().splitlines() == [f"update JobId=7 StartTime=uts{mine}"] * 2


def test_requeue_two_steps_and_crash_between() -> None:
    b, _ = backend(
        RELEASE_2605,
        Exchange("Requeue=1", wrapped(ok(), ok(), ok())),
        Exchange("Requeue=1", wrapped(ok(), ok(), cut_after=1), fail="connection lost"),
        Exchange("Requeue=1", wrapped(ok(), fail("Job is pending execution for job 4"), ok())),
    )
    b.requeue("4")
    with pytest.raises(OutcomeUnknown):
        b.requeue("4")
    with pytest.raises(Rejected):
        b.requeue("4")


def test_a_requeue_rule_is_refused_at_load_naming_why() -> None:
    """Slurm requeues a running job only; the supervisor decides on ended ones, so the rule could never act."""
    from dispatch.errors import ConfigError
    from dispatch.rules import RuleSet

    b, _ = backend(RELEASE_2605)
    rules = RuleSet.from_data({"rules": [{"name": "again", "cause": "preempted", "action": "requeue"}]})
    with pytest.raises(ConfigError, match="again.*requeue is no.*--no-requeue.*use resubmit"):
        rules.check_against(b, b.capabilities())
    RuleSet.from_data({"rules": [{"cause": "preempted", "action": "resubmit"}]}).check_against(b, b.capabilities())


def test_find_many_one_script_2205_filters_client_side() -> None:
    a = Job(1, "dsp-a-1", "PENDING", submit=int(NOW))
    c = Job(2, "dsp-c-1", "RUNNING", submit=int(NOW))
    b, ex = backend(
        RELEASE_2205,
        Exchange(
            "sacct -X -D -P -n -o JobIDRaw,JobName,Submit",
            wrapped(ok(squeue_json(RELEASE_2205, a, c, Job(3, "zzz"))), ok(f"11|dsp-a-1|{int(NOW) - 5}\n"), ok()),
        ),
    )
    got = b.find_many(["dsp-a-1", "dsp-b-1"], NOW - 100)
    assert [f.scheduler_id for f in got["dsp-a-1"]] == ["1", "11"]
    assert got["dsp-b-1"] == []
    ex.assert_done()


def test_stop_job_bound_and_idempotent_not_found() -> None:
    b, _ = backend(
        RELEASE_2605,
        Exchange("scancel", wrapped(ok())),
        Exchange("scancel", wrapped(absent())),
        Exchange("sacct --json -D", wrapped(ok(sacct_json(RELEASE_2605)))),
    )
    assert b.stop_job("3") == 5 + 10 + 5
    with pytest.raises(NotFound):
        b.stop_job("3")


def test_unexpected_script_raises() -> None:
    b, _ = backend(RELEASE_2605, Exchange("scancel", wrapped(ok())))
    with pytest.raises(UnexpectedScript):
        b.inspect("3")


def test_cessation_contract() -> None:
    ex = TranscriptExecutor(
        [
            *ready_preflight(RELEASE_2605, now=NOW),
            Exchange("site-cease", wrapped(ok(f"3 {int(NOW)} maintenance window\n9 x bad\n"))),
        ]
    )
    b = slurm.new({"cessation": {"command": ["site-cease", "--json=no"]}}, executor=ex, clock=FakeClock(NOW))
    got = b.cessation(["3", "4"])
    assert set(got) == {"3"} and got["3"].reason == "maintenance window"


def test_output_reader_reads_per_execution_file() -> None:
    import base64

    live = Job(4, "dsp-j-1", "COMPLETED", restarts=1, stdout="/out/dsp-j-1.%j.%r.out")
    sq = squeue_json(RELEASE_2605, live)
    hist = sacct_json(
        RELEASE_2605,
        Job(4, "dsp-j-1", "PENDING", ("REQUEUED",), restarts=0),
        Job(4, "dsp-j-1", "COMPLETED", restarts=1),
    )
    b, _ = backend(
        RELEASE_2605,
        Exchange(".jobs/", wrapped(ok("NONE\n"))),  # submitted before pointers: squeue/sacct say where
        Exchange("squeue --json", wrapped(ok(sq))),
        Exchange("sacct --json", wrapped(ok(hist))),
        Exchange("/out/dsp-j-1.4.0.out", wrapped(ok(base64.b64encode(b"first\xff\n").decode()))),
    )
    assert b"".join(b.stdout("4", execution=0)) == b"first\xff\n"


def test_probe_that_cannot_read_back_the_hold_answers_no() -> None:
    ex = TranscriptExecutor(ready_preflight(RELEASE_2605, now=NOW, hold=False, accounting=False))
    b = slurm.new({}, executor=ex, clock=FakeClock(NOW))
    assert b.capabilities().answer(slurm_cap("Hold")) is Answer.NO
    assert b.capabilities().answer(slurm_cap("AccountingHistory")) is Answer.NO
    assert b.declarations().polled_loss.execution == 0  # type: ignore[union-attr]


def test_output_follow_reads_until_the_job_ends() -> None:
    import base64

    running = squeue_json(RELEASE_2605, Job(4, "dsp-j-1", "RUNNING", stdout="/out/dsp-j-1.%j.%r.out"))
    done = squeue_json(RELEASE_2605, Job(4, "dsp-j-1", "COMPLETED", stdout="/out/dsp-j-1.%j.%r.out"))
    b, ex = backend(
        RELEASE_2605,
        Exchange(".jobs/", wrapped(ok("NONE\n"))),
        Exchange("squeue --json", wrapped(ok(running))),
        Exchange("tail -c", wrapped(ok(base64.b64encode(b"one\n").decode()))),
        Exchange(".jobs/", wrapped(ok("NONE\n"))),
        Exchange("squeue --json", wrapped(ok(done))),
        Exchange("tail -c", wrapped(ok(base64.b64encode(b"two\n").decode()))),
    )
    assert list(b.stdout("4", follow=True)) == [b"one\n", b"two\n"]
    assert "'5'" in ex.scripts[-1] or " 5 " in ex.scripts[-1]  # the second read starts after the 4 bytes read
    ex.assert_done()


@pytest.mark.parametrize("release", [RELEASE_2205, RELEASE_2605])
def test_output_is_found_from_the_pointer_after_the_scheduler_forgot_the_job(release: str) -> None:
    """A read-only open without accounting, a job squeue no longer lists: the pointer written at submission
    names the files, and the highest execution with a file is the latest."""
    import base64

    pointer = "/out/dsp-j-1\n0.out\n1.out\n"
    b, ex = backend(
        release,
        Exchange(".jobs/testcluster.4", wrapped(ok(pointer))),
        Exchange("squeue -h -t all -j", wrapped(absent("4"))),
        Exchange(".jobs/testcluster.4", wrapped(ok(pointer))),  # which executions have files
        Exchange("/out/dsp-j-1.4.1.out", wrapped(ok(base64.b64encode(b"second\n").decode()))),
        Exchange("squeue -h -t all -j", wrapped(absent("4"))),  # the prefix is remembered
        Exchange(".jobs/testcluster.4", wrapped(ok(pointer))),
        Exchange("/out/dsp-j-1.4.0.err", wrapped(ok(base64.b64encode(b"oops\n").decode()))),
        Exchange("squeue -h -t all -j", wrapped(absent("4"))),
        Exchange(".jobs/testcluster.4", wrapped(ok(pointer))),
        read_only=True,
    )
    assert b.capabilities().answer(slurm_cap("AccountingHistory")) is not Answer.YES
    assert b"".join(b.stdout("4")) == b"second\n"
    assert b"".join(b.stderr("4", execution=0)) == b"oops\n"
    with pytest.raises(NotFound, match="no execution 2"):
        b"".join(b.stdout("4", execution=2))
    ex.assert_done()


def test_each_submission_records_where_its_output_goes() -> None:
    b, ex = backend(RELEASE_2605, Exchange("sbatch", wrapped(ok(), ok("77\n"))))
    assert b.start(req()) == "77"
    script = ex.scripts[-1]
    assert "/home/ada/dispatch-output/.jobs" in script  # made with the output directory
    assert " _ /home/ada/dispatch-output/.jobs/testcluster /home/ada/dispatch-output/dsp-j-1 --parsable" in script


def test_the_working_directory_is_always_sent_and_shown_by_a_dry_run() -> None:
    """Local transport: the current directory; SSH: the home directory on the cluster (this machine's current
    directory need not exist there); the spec's wins over both."""
    import os

    b, _ = backend(RELEASE_2605)
    assert f"--chdir={os.getcwd()}" in b.render(req())
    spec = JobSpec(("true",), working_dir="/scratch/run 1")
    assert "'--chdir=/scratch/run 1'" in b.render(StartRequest("j", 1, "dsp-j-1", spec))
    ex = TranscriptExecutor(ready_preflight(RELEASE_2605, now=NOW))
    ssh = slurm.new({"transport": "ssh", "ssh": {"host": "login"}}, executor=ex, clock=FakeClock(NOW))
    assert "--chdir=/home/ada " in ssh.render(req())


def test_the_submit_call_keeps_sbatchs_answer_and_writes_the_pointer(tmp_path: object) -> None:
    """The SUBMIT snippet under bash with a fake sbatch: stdout and status are sbatch's; the pointer names the
    files' prefix under the job id (the last line's, ``<id>;<cluster>`` too); a refusal writes none."""
    import os
    import subprocess

    from dispatch.slurm.backend import SUBMIT

    d = str(tmp_path)
    fake = os.path.join(d, "sbatch")
    with open(fake, "w") as f:
        f.write('#!/bin/bash\ncat >/dev/null\n[ "$1" = --bad ] && { echo "sbatch: error: no" >&2; exit 1; }\n')
        f.write('echo "note"; echo "42;clu"\n')
    os.chmod(fake, 0o755)
    env = {"PATH": f"{d}:/usr/bin:/bin"}
    argv = ["bash", "-c", SUBMIT, "_", f"{d}/p", "/o/dsp-j-1"]
    good = subprocess.run([*argv, "--parsable"], input="#!/bin/bash\n", capture_output=True, text=True, env=env)
    assert (good.returncode, good.stdout) == (0, "note\n42;clu\n")
    with open(f"{d}/p.42") as f:
        assert f.read() == "/o/dsp-j-1\n"
    bad = subprocess.run([*argv, "--bad"], input="", capture_output=True, text=True, env=env)
    assert (bad.returncode, bad.stderr) == (1, "sbatch: error: no\n")
    assert sorted(os.listdir(d)) == ["p.42", "sbatch"]


def test_a_failed_job_waits_for_accounting_to_record_its_ranks_code() -> None:
    """squeue says FAILED a moment before slurmdbd has the end (and the srun step's code): the job is read as
    running until sacct shows the end, so the one end reported carries rank 1's code 3, not the shell's 143;
    past the settle bound without it, the job's own code."""
    from dispatch.slurm.mapping import ACCOUNTING_SETTLE

    ended = Job(14, "dsp-j-1", "FAILED", exit_code=143, start=int(NOW) - 20, end=int(NOW) - 1)
    behind = sacct_text(Job(14, "dsp-j-1", "RUNNING", start=int(NOW) - 20))
    caught_up = (
        sacct_text(Job(14, "dsp-j-1", "FAILED", exit_code=15, start=int(NOW) - 20, end=int(NOW) - 1))
        + "14.batch|batch|FAILED|15:0|1|1|1|2|n1|\n14.0|bash|FAILED|3:0|1|1|1|2|n1,n2|\n"
    )
    late = replace(ended, end=int(NOW - ACCOUNTING_SETTLE) - 1)

    def read(squeued: Job, recorded: str):
        b, _ = backend(
            RELEASE_2205,
            Exchange("JobArrayID:|,State", wrapped(ok(squeue_text(squeued)))),
            Exchange("squeue --json", wrapped(ok(squeue_json(RELEASE_2205, squeued)))),
            Exchange("sacct -D -P", wrapped(ok(recorded))),
            *([Exchange(TASK_LINES, wrapped(ok("")))] if "|FAILED|3:0|" in recorded else []),
        )
        return b.inspect("14").outcome

    assert read(ended, behind).state is State.RUNNING
    got = read(ended, caught_up)
    assert (got.state, got.cause, got.exit_code) == (State.FAILED, Cause.EXIT, 3)
    got = read(late, behind)
    assert (got.state, got.cause, got.exit_code) == (State.FAILED, Cause.EXIT, 143)


TASK_LINES = "srun: error: [^ :]+"
"""A key of the script that reads srun's task lines (dispatch.slurm.tasklines.READ)."""
# srun's lines as the three releases write them (22.05 here; 24.11 and 26.05 write the same words): rank 1
# failed with 3, then rank 0, a shell, answered --kill-on-bad-exit's SIGTERM with 143
FIRST_RANK_1 = (
    "14:0 srun: error: n2: task 1: Exited with exit code 3\n14:0 srun: error: n1: task 0: Exited with exit code 143\n"
)


def read_failed(step: str, *task_lines: Exchange) -> tuple[Outcome, TranscriptExecutor]:
    """Job 14 FAILED in squeue and in sacct, its srun step's code ``step`` (Slurm's highest of its tasks)."""
    ended = Job(14, "dsp-j-1", "FAILED", exit_code=143, start=int(NOW) - 20, end=int(NOW) - 1)
    recorded = (
        sacct_text(Job(14, "dsp-j-1", "FAILED", exit_code=15, start=int(NOW) - 20, end=int(NOW) - 1))
        + f"14.batch|batch|FAILED|15:0|1|1|1|2|n1|\n14.0|bash|FAILED|{step}|1|1|1|2|n1,n2|\n"
    )
    b, ex = backend(
        RELEASE_2205,
        Exchange("JobArrayID:|,State", wrapped(ok(squeue_text(ended)))),
        Exchange("squeue --json", wrapped(ok(squeue_json(RELEASE_2205, ended)))),
        Exchange("sacct -D -P", wrapped(ok(recorded))),
        *task_lines,
    )
    return b.inspect("14").outcome, ex


def test_a_failed_job_reports_its_first_failing_rank_where_accounting_kept_a_higher_code() -> None:
    """Slurm keeps the highest code of a step's tasks: a rank that answered the SIGTERM with 143 after rank 1
    failed with 3 outranks it. srun's own lines say which rank failed first; the local adapter reports that
    one too."""
    got, ex = read_failed("143:0", Exchange(TASK_LINES, wrapped(ok(FIRST_RANK_1))))
    assert (got.state, got.cause, got.exit_code) == (State.FAILED, Cause.EXIT, 3)
    assert "14:0" in ex.scripts[-1]  # the execution asked by its job id and restart
    ex.assert_done()


@pytest.mark.parametrize(
    "answer",
    [ok("14:0 srun: error: n1: task 0: Terminated\n" + FIRST_RANK_1), ok(""), fail("grep: boom", 2)],
    ids=["first-a-signal", "no-lines", "read-failed"],
)
def test_accountings_step_code_stands_where_srun_names_no_first_exit(answer: Call) -> None:
    got, ex = read_failed("143:0", Exchange(TASK_LINES, wrapped(answer)))
    ex.assert_done()
    assert (got.state, got.cause, got.exit_code) == (State.FAILED, Cause.EXIT, 143)
