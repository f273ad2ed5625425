"""Integration scenarios shared by the two real clusters (test_integration_local.py / _sid.py run them)."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time

from dispatch.errors import NotFound, OutcomeUnknown, Unavailable
from dispatch.extensions import CessationWarning
from dispatch.outcome import Cause, State
from dispatch.slurm import SlurmBackend
from dispatch.slurm.harness import settings_for
from dispatch.slurm.transport.ssh import SSHExecutor
from dispatch.spec import JobSpec
from dispatch.spi import JobEvidence, StartRequest

from .clusters import admin, description, open_backend

HOSTILE = ["plain", "sp ace", "it's", 'dq"uote', "$(touch /tmp/pwned)", "`id`", "*", "?[a]", "new\nline",
           "tab\there", "été ✓ 日本", "\\back\\slash", "-n", "", "; rm -rf / #", "$HOME", "!!"]  # fmt: skip


def wait(b: SlurmBackend, sid: str, pred, what: str, timeout: float = 120.0) -> JobEvidence:
    end = time.time() + timeout
    while True:
        ev = b.inspect(sid)
        if pred(ev):
            return ev
        assert time.time() < end, f"{what}: not within {timeout}s; last {ev.outcome}"
        time.sleep(1.0)


def marker() -> str:
    return f"dsp-it{os.urandom(4).hex()}-1"


def run(b: SlurmBackend, spec: JobSpec) -> tuple[str, str]:
    m = marker()
    sid = b.start(StartRequest(m.split("-")[1], 1, m, spec))
    b.open(sid)
    return sid, m


HEX_ARGS = 'for a in "$@"; do printf %s "$a" | od -An -v -tx1 | tr -d " \\n"; printf ,; done; echo'
"""Each rank prints its argv hex-encoded on ONE line, so two ranks' output cannot interleave inside a value."""


def hostile_argv_byte_for_byte(name: str) -> None:
    b = open_backend(name)
    try:
        sid, _ = run(b, JobSpec(("bash", "-c", HEX_ARGS, "dispatch", *HOSTILE), nodes=2))
        ev = wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
        assert ev.outcome.state is State.SUCCEEDED, ev.outcome
        lines = b"".join(b.stdout(sid)).decode().splitlines()
        assert len(lines) == 2, lines  # one line per rank, one rank per node
        for line in lines:
            got = [bytes.fromhex(h) for h in line.split(",")[:-1]]
            assert got == [w.encode() for w in HOSTILE], got
        root = description(name).get("chroot") or ""  # the ranks' filesystem: the host's, or a chroot's
        assert not os.path.exists(root + "/tmp/pwned"), "a word of the argv ran as a command on the cluster"
    finally:
        b.close()


def output_per_execution_after_requeue(name: str) -> None:
    b = open_backend(name)
    try:
        sid, _ = run(
            b, JobSpec(("bash", "-c", 'echo "exec=$DISPATCH_EXECUTION"; echo "err=$DISPATCH_EXECUTION" >&2; sleep 300'))
        )
        wait(
            b,
            sid,
            lambda e: e.outcome.state is State.RUNNING and b"exec=" in b"".join(b.stdout(sid)),
            "the job runs and prints",
        )
        b.requeue(sid)
        ev = wait(
            b,
            sid,
            lambda e: e.outcome.state is State.RUNNING and (e.current is not None and e.current.restart == 1),
            "the requeued execution runs",
            90,
        )
        assert [x.identity for x in ev.executions] == [f"1.{sid}.0", f"1.{sid}.1"]
        wait(b, sid, lambda e: b"exec=" in b"".join(b.stdout(sid, 1)), "execution 1 prints")
        assert b"".join(b.stdout(sid, 0)).startswith(f"exec=1.{sid}.0\n".encode())
        assert b"".join(b.stdout(sid, 1)) == f"exec=1.{sid}.1\n".encode()
        assert b"".join(b.stderr(sid, 1)).startswith(f"err=1.{sid}.1\n".encode())
        b.stop_job(sid)
    finally:
        b.close()


def purged_with_and_without_accounting(name: str) -> None:
    b = open_backend(name)
    try:
        sid, _ = run(b, JobSpec(("bash", "-c", "exit 3")))
        wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
        # wait until the controller purged it (MinJobAge plus the purge period)
        end = time.time() + 150
        while True:
            r = admin(name, "squeue", "-h", "-t", "all", "-j", sid, check=False)
            if r.returncode != 0 or not r.stdout.strip():
                break
            assert time.time() < end, "the job was never purged from squeue"
            time.sleep(3)
        ev = b.inspect(sid)
        assert ev.outcome.evidence.source == "sacct"
        assert ev.outcome.state is State.FAILED and ev.outcome.cause is Cause.EXIT and ev.outcome.exit_code == 3
    finally:
        b.close()
    # without accounting (a read-only open without a preflight cache cannot use sacct): NotFound, never success
    desc = description(name)
    import dispatch.slurm as slurm

    ro = slurm.new({**settings_for(desc), "preflight": {}}, read_only=True)
    try:
        try:
            ro.inspect(sid)
        except NotFound:
            pass
        else:
            raise AssertionError("a purged job without accounting must be NotFound")
    finally:
        ro.close()


def wait_purged(name: str, sid: str, timeout: float = 150.0) -> None:
    """Until the controller forgot job ``sid`` (MinJobAge plus the purge period)."""
    end = time.time() + timeout
    while True:
        r = admin(name, "squeue", "-h", "-t", "all", "-j", sid, check=False)
        if r.returncode != 0 or not r.stdout.strip():
            return
        assert time.time() < end, "the job was never purged from squeue"
        time.sleep(3)


def output_after_the_scheduler_forgot(name: str) -> None:
    """Every execution's output stays readable after squeue forgot the job, even by a read-only open that
    has no accounting to ask (what ``dispatch logs`` opens): the files are found from the submission's pointer."""
    b = open_backend(name)
    script = (
        'echo "out=$DISPATCH_EXECUTION"; echo "err=$DISPATCH_EXECUTION" >&2; '
        'case "$DISPATCH_EXECUTION" in *.0) sleep 300;; esac'
    )
    try:
        sid, _ = run(b, JobSpec(("bash", "-c", script)))
        wait(b, sid, lambda e: e.outcome.state is State.RUNNING and b"out=" in b"".join(b.stdout(sid)), "it prints")
        b.requeue(sid)
        wait(b, sid, lambda e: e.outcome.state.ended, "the requeued execution ends", 120)
    finally:
        b.close()
    wait_purged(name, sid)
    desc = description(name)
    import dispatch.slurm as slurm

    ro = slurm.new({**settings_for(desc), "preflight": {}}, read_only=True)
    try:
        assert b"".join(ro.stdout(sid)) == f"out=1.{sid}.1\n".encode()
        assert b"".join(ro.stdout(sid, 0)) == f"out=1.{sid}.0\n".encode()
        assert b"".join(ro.stderr(sid, 0)).startswith(f"err=1.{sid}.0\n".encode())
        assert b"".join(ro.stderr(sid, 1, follow=True)) == f"err=1.{sid}.1\n".encode()  # ended: no waiting
    finally:
        ro.close()


def ssh_cut_mid_submission_leaves_one_job(name: str, cut_before_sbatch: bool) -> None:
    desc = description(name)
    import dispatch.slurm as slurm

    settings = settings_for(desc, timeouts={"call": 10, "script": 15})
    # a private master: killing it must not cut the shared one other tests use at the same time
    private = tempfile.mkdtemp(prefix="dsp-cut-", dir="/tmp")
    settings["ssh"] = {**settings["ssh"], "controlDir": private}
    b = slurm.new(settings)
    try:
        ex = b._executor
        assert isinstance(ex, SSHExecutor)
        real_run = ex.run

        def cutting_run(script: str, timeout: float) -> object:
            if "sbatch" in script and "--hold" in script:
                if cut_before_sbatch:
                    script = script.replace("out=$(sbatch ", "out=$(sleep 3; sbatch ", 1)  # in SUBMIT
                else:
                    script = script.replace("printf '\\n@@", "sleep 3; printf '\\n@@", 0)
                    script = script.rsplit("\nprintf '\\n@@", 1)
                    script = script[0] + "\nsleep 3\nprintf '\\n@@" + script[1]
                pid = ex.master_pid()
                assert pid is not None, "no ssh control master to cut"
                threading.Timer(1.5, lambda: os.kill(pid, signal.SIGKILL)).start()
            return real_run(script, timeout)

        ex.run = cutting_run  # type: ignore[method-assign]
        m = marker()
        since = time.time() - 5
        req = StartRequest(m.split("-")[1], 1, m, JobSpec(("true",)))
        try:
            b.start(req)
            outcome = "answered"
        except OutcomeUnknown:
            outcome = "unknown"
        except Unavailable:
            outcome = "unavailable"
        ex.run = real_run  # type: ignore[method-assign]
        assert outcome in ("unknown", "unavailable"), f"the cut was not noticed ({outcome})"
        if outcome == "unknown":
            time.sleep(b.declarations().call_bound)  # the landing bound: after it, find is the truth
        found = b.find(m, since)
        if not found:
            b.start(req)  # it did not land: submit again (the supervisor's recovery)
        found = b.find(m, since)
        assert len(found) == 1, f"expected exactly one job for {m}, found {found}"
        admin(name, "scancel", found[0].scheduler_id, check=False)
    finally:
        ex.exit_master()
        b.close()
        shutil.rmtree(private, ignore_errors=True)


_ = signal


def batch_submission_one_script_per_phase(name: str) -> None:
    """Operator.submit_many on the real cluster: every job its own Slurm job, marker and record, opened."""
    import dispatch
    from dispatch.records import MemoryRecords

    cluster = dispatch.open("slurm", adapter=settings_for(description(name)), records=MemoryRecords(), name=name)
    backend = getattr(cluster.backend, "unrestricted", cluster.backend)
    try:
        before = backend.scripts_run
        got = cluster.operator.submit_many([JobSpec(("true",)), JobSpec(("bash", "-c", "exit 3")), JobSpec(("true",))])
        assert backend.scripts_run - before == 2, "one script to create all, one to open all"
        assert all(g.ok for g in got), [g.error for g in got]
        jobs = [cluster.get(g.job_id) for g in got]
        sids = [j.current.scheduler_id for j in jobs if j.current is not None]
        assert len(set(sids)) == 3 and len({j.current.marker for j in jobs if j.current is not None}) == 3
        for sid, code in zip(sids, (0, 3, 0), strict=True):
            ev = wait(backend, str(sid), lambda e: e.outcome.state.ended, "the job ends")
            assert ev.outcome.exit_code == code
        markers = [j.current.marker for j in jobs if j.current is not None]
        found = backend.find_many(markers, 0.0)  # the jobs share one array: each task is found by its own marker
        assert [[f.scheduler_id for f in found[m]] for m in markers] == [[str(s)] for s in sids]
    finally:
        cluster.close()


SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "src")

LISTENER_PYTHON = (
    sys.executable,
    "-c",
    "from dispatch import job\n"
    "seen = []\n"
    "job.on_cessation(lambda n: seen.append(n.name))\n"
    "print('listening', *seen, flush=True)\n",
)
"""A rank program that listens through :mod:`dispatch.job` (needs the host's Python: the clusters on this host)."""

LISTENER_PERL = (
    "perl",
    "-MPOSIX",
    "-e",
    '$| = 1; my @seen; $SIG{USR1} = sub { push @seen, "SIGUSR1" }; '
    'sigprocmask(SIG_UNBLOCK, POSIX::SigSet->new(SIGUSR1)); print join(" ", "listening", @seen), "\\n";',
)
"""The same contract as dispatch.job (install the handler, then unblock the warning) in Perl, which every Debian
system has (perl-base is essential): for the chroot clusters, whose nodes have no Python."""


def warning_before_the_program_listens_is_delivered_once_it_does(name: str, listener: tuple[str, ...]) -> None:
    """Slurm may send a CessationWarning's ``--signal`` up to 60 s early, so it can reach a rank that has not
    installed its handler yet. The rank starts with the signal blocked: the warning is neither fatal (SIGUSR1's
    default action ends a process) nor lost: it stays pending across ``exec`` and reaches the handler as the
    program installs it. The rank waits for a file the test creates only after it sent the signal, so the
    signal always comes first. ``scancel --signal`` reaches the steps' tasks as the warning does."""
    root = description(name).get("chroot") or ""
    go_dir = tempfile.mkdtemp(prefix="dsp-warn-", dir=root + "/tmp")
    os.chmod(go_dir, 0o777)  # over SSH the job runs as the cluster's user
    go = os.path.join(go_dir, "go")
    wait_then_run = 'echo started; while [ ! -e "$1" ]; do sleep 0.2; done; shift; exec "$@"'
    b = open_backend(name)
    try:
        spec = JobSpec(
            ("bash", "-c", wait_then_run, "rank", go[len(root) :], *listener),
            time_limit=600,
            env={"PYTHONPATH": SRC},
            extensions=(CessationWarning(seconds=30),),
        )
        sid, _ = run(b, spec)
        wait(
            b,
            sid,
            lambda e: e.outcome.state is State.RUNNING and b"started" in b"".join(b.stdout(sid)),
            "the rank runs",
        )
        admin(name, "scancel", "--signal=USR1", sid)
        time.sleep(1.0)  # scancel returns once the controller took the request; the stepd signals soon after
        with open(go, "w"):
            pass
        ev = wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
        out = b"".join(b.stdout(sid)).decode()
        assert ev.outcome.state is State.SUCCEEDED, (ev.outcome, out)
        assert "listening SIGUSR1\n" in out, out
    finally:
        b.close()
        shutil.rmtree(go_dir, ignore_errors=True)


def output_slices_in_one_script(name: str) -> None:
    """Two viewers' slices of one running job's output, read in one script (one round trip): from an offset,
    the tail; a rank is refused (one file per execution, every rank in it)."""
    from dispatch.errors import Unsupported
    from dispatch.spi import OutputPiece, OutputSlice

    b = open_backend(name)
    try:
        sid, _ = run(b, JobSpec(("bash", "-c", "printf 'abcdefghij'; echo; sleep 300"), nodes=2))
        # both ranks print into the one file, one after the other: the slices below are of the whole of it
        wait(b, sid, lambda e: b"".join(b.stdout(sid)).count(b"abcdefghij") == 2, "both ranks print")
        whole = b"".join(b.stdout(sid, 0))
        assert b"".join(b.stdout(sid, 0, offset=3)) == whole[3:]
        asks = [OutputSlice(sid, execution=0, offset=3, limit=4), OutputSlice(sid, execution=0, offset=-3)]
        b.read_slices(asks)  # looks the path up once (one observation) and keeps it
        before = b.scripts_run
        got = b.read_slices([*asks, OutputSlice(sid, execution=0, rank=1)])
        assert b.scripts_run == before + 1  # every slice in one script
        assert got[0] == OutputPiece(whole[3:7], 3, len(whole))
        assert got[1] == OutputPiece(whole[-3:], len(whole) - 3, len(whole))
        assert isinstance(got[2], Unsupported) and not b.output_per_rank()
        b.stop_job(sid)
    finally:
        b.close()


def launch_checks_fail_before_srun(name: str) -> None:
    """A working directory that cannot be entered, and a program that does not exist: the batch script's launch
    checks end the job before srun, and it reads not-launchable (not the shell's exit, and not the node's
    launch-failed: it blames no node), with the reason in its error file."""
    b = open_backend(name)
    try:
        gone = f"/tmp/dispatch-it-{os.urandom(4).hex()} gone"
        cases = (
            (JobSpec(("true",), nodes=2, working_dir=gone), f"the working directory {gone} cannot be entered"),
            (JobSpec(("/no/such/program", "--x"), nodes=2), "the program /no/such/program does not exist"),
        )
        for spec, said in cases:
            sid, _ = run(b, spec)
            ev = wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
            assert (ev.outcome.state, ev.outcome.cause) == (State.FAILED, Cause.NOT_LAUNCHABLE), ev.outcome
            err = b"".join(b.stderr(sid)).decode()
            assert f"dispatch: launch failed: {said}" in err, err
    finally:
        b.close()


FIRST_FAILS_THEN_143 = (
    'if [ "$SLURM_PROCID" = 1 ]; then sleep 3; echo "rank 1 fails" >&2; exit 3; fi\n'
    "trap 'exit 143' TERM\n"
    "sleep 120 & wait"
)
"""Rank 1 fails with 3; rank 0, a shell, answers --kill-on-bad-exit's SIGTERM with 143 (as a shell that ran its
program without ``exec`` does), which Slurm keeps as the step's code (the highest of its tasks')."""


def first_failing_rank_outranks_a_higher_code(name: str) -> None:
    """The outcome carries the code of the rank that failed first (srun's task lines), as on the local adapter,
    not the higher code of the rank srun ended afterwards."""
    b = open_backend(name)
    try:
        sid, _ = run(b, JobSpec(("bash", "-c", FIRST_FAILS_THEN_143), nodes=2))
        ev = wait(b, sid, lambda e: e.outcome.state.ended, "the job ends")
        # srun's last line (task 0, ended by srun after task 1 failed) can reach the file after Slurm records the
        # end (slurmstepd's output thread; seen under load); the outcome reads the first line, written seconds
        # before it
        deadline = time.monotonic() + 15
        while True:
            err = b"".join(b.stderr(sid)).decode()
            if ": task 0: Exited with exit code 143" in err or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert ": task 0: Exited with exit code 143" in err, err  # so the step's code is 143
        assert (ev.outcome.state, ev.outcome.cause, ev.outcome.exit_code) == (State.FAILED, Cause.EXIT, 3), (
            ev.outcome,
            err,
        )
    finally:
        b.close()


def open_refuses_an_admin_hold_by_the_callers_privilege(name: str, lifts: bool) -> None:
    """Opening a gate never lifts an administrator's hold, whoever the caller is: a caller Slurm lets lift one
    (root on the local cluster) reads the hold first; an ordinary user (``ada`` on sid) releases at once and Slurm
    refuses. Either way the job stays held, and once the administrator lifts the hold the job runs."""
    from dispatch.errors import Rejected

    b = open_backend(name)
    try:
        run(b, JobSpec(("true",)))  # the first opening learns the caller's admin level
        assert b._gates.lifts_admin_holds() is lifts
        m = marker()
        sid = b.start(StartRequest(m.split("-")[1], 1, m, JobSpec(("true",))))
        admin(name, "scontrol", "hold", sid)
        try:
            b.open(sid)
            raise AssertionError("an administrator's hold was lifted")
        except Rejected as exc:
            assert "administrator" in str(exc)
        assert admin(name, "squeue", "-h", "-j", sid, "-o", "%r").stdout.strip() == "JobHeldAdmin"
        assert b.open_many([sid, "99999999"])[1].__class__ is NotFound
        admin(name, "scontrol", "release", sid)
        wait(b, sid, lambda ev: ev.outcome.state is State.SUCCEEDED, "the released job to succeed")
        b.open(sid)  # ended: nothing to open
    finally:
        b.close()
