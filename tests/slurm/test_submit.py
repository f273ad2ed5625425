import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.adapterkit.jobscript import LAUNCH_FAILED_EXIT
from dispatch.errors import SpecError
from dispatch.extensions import CessationWarning, Image, Output, SharedCheckpoint
from dispatch.settings import decode
from dispatch.slurm.extensions import Placement, Resources
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.submit import build
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

S = decode(SlurmSettings, {"defaults": {"partition": "normal", "account": "acct"}})
_arg = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=30
)


def req(spec: JobSpec, marker: str = "dsp-abc-1") -> StartRequest:
    return StartRequest("abc", 1, marker, spec)


def test_gate_marker_norequeue_and_placement() -> None:
    spec = JobSpec(
        ("python", "train.py"),
        nodes=2,
        procs_per_node=4,
        working_dir="/scratch/x",
        time_limit=90,
        extensions=(
            Placement(partition="gpu", qos="high"),
            Resources(gpus_per_node=8, gpu_type="h100", cpus_per_task=8, exclusive=True),
        ),
    )
    job = build(req(spec), S, "26.05.5", "/home/ada/dispatch-output")
    a = job.argv
    for opt in ("--hold", "--no-requeue", "--parsable", "--job-name=dsp-abc-1", "--nodes=2", "--ntasks-per-node=4",
                "--partition=gpu", "--account=acct", "--qos=high", "--gpus-per-node=h100:8", "--cpus-per-task=8",
                "--exclusive", "--chdir=/scratch/x", "--time=2", "--export=PATH",
                "--output=/home/ada/dispatch-output/dsp-abc-1.%j.%r.out",
                "--error=/home/ada/dispatch-output/dsp-abc-1.%j.%r.err"):  # fmt: skip
        assert opt in a
    assert "exec srun --export=ALL" in job.batch
    assert 'DISPATCH_EXECUTION=1."$SLURM_JOB_ID"."${SLURM_RESTART_COUNT:-0}"' in job.batch


def test_2205_redirects_in_the_batch_script_and_uses_none() -> None:
    s = decode(SlurmSettings, {"environment": {"pass": []}})
    job = build(req(JobSpec(("true",)), "dsp-x-2"), s, "22.05.8", "/o")
    assert "--export=NONE" in job.argv
    assert "--output=/o/dsp-x-2.%j.slurm.out" in job.argv
    assert 'exec >/o/dsp-x-2."$SLURM_JOB_ID"."${SLURM_RESTART_COUNT:-0}".out' in job.batch
    job26 = build(req(JobSpec(("true",))), s, "26.05.5", "/o")
    assert "--export=NIL" in job26.argv


def test_output_extension_and_checkpoint() -> None:
    spec = JobSpec(("true",), extensions=(Output(dir="/shared/out"), SharedCheckpoint(path="/shared/ck")))
    job = build(req(spec), S, "25.11.7", "/home/x")
    assert "--output=/shared/out/dsp-abc-1.%j.%r.out" in job.argv
    assert "export DISPATCH_CHECKPOINT_DIR=/shared/ck" in job.batch


def test_image_runs_each_rank_through_apptainer_and_bad_marker_refused() -> None:
    job = build(req(JobSpec(("true",), extensions=(Image(ref="x:1"),))), S, "26.05.5", "/o", "/w")
    assert job.batch.endswith("dispatch-rank apptainer exec --bind /w --bind /o --pwd /w -- docker://x:1 true\n")
    with pytest.raises(SpecError):
        build(req(JobSpec(("true",)), "bad marker%"), S, "26.05.5", "/o")


@settings(max_examples=30, deadline=None)
@given(
    st.lists(_arg, min_size=1, max_size=5),
    st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True), _arg, max_size=2),
)
def test_argv_and_env_reach_the_ranks_byte_for_byte(argv: list[str], env: dict[str, str]) -> None:
    """Run the batch script with a fake srun that dumps its argv and environment NUL-separated."""
    spec = JobSpec(tuple(argv), env=env)
    job = build(req(spec), S, "26.05.5", "/o")
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "srun")
        with open(fake, "w") as f:
            # the words after the rank wrapper (which runs in each rank, tests/adapterkit/test_rankenv.py)
            f.write('#!/bin/bash\nwhile [ "$1" != "dispatch-rank" ]; do shift; done; shift\nprintf "%s\\0" "$@"\n')
        os.chmod(fake, 0o755)
        _program_named(d, argv[0])  # the launch checks look the program up where the script runs
        run_env = {"PATH": f"{d}:/usr/bin:/bin", "SLURM_JOB_ID": "77"}
        done = subprocess.run(["bash", "-s"], input=job.batch.encode(), capture_output=True, env=run_env)
        if shutil.which(argv[0], path=run_env["PATH"]) is None:  # a path to nothing: no srun, launch-failed
            assert (done.returncode, done.stdout) == (LAUNCH_FAILED_EXIT, b"")
            assert done.stderr.startswith(b"dispatch: launch failed: the program ")
            return
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.split(b"\0")[:-1] == [a.encode() for a in argv]
        probe = (
            job.batch.rsplit("exec srun", 1)[0]
            + 'printf "%s\\0" "$DISPATCH_EXECUTION"'
            + "".join(f' "${k}"' for k in sorted(env))
        )
        got = subprocess.run(["bash", "-s"], input=probe.encode(), capture_output=True, env=run_env, check=True).stdout
        assert got.split(b"\0")[:-1] == [b"1.77.0", *(env[k].encode() for k in sorted(env))]


def _program_named(directory: str, name: str) -> None:
    """An executable called ``name`` in ``directory``, where a file can have that name."""
    if "/" in name or name in ("", ".", ".."):
        return
    path = os.path.join(directory, name)
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(path, 0o755)


def test_launch_checks_end_the_batch_script_before_srun(tmp_path: Path) -> None:
    for spec, said in (
        (JobSpec(("/no/such/program",)), "the program /no/such/program does not exist"),
        (JobSpec(("true",), working_dir=str(tmp_path / "gone dir")), f"the working directory {tmp_path}/gone dir"),
    ):
        job = build(req(spec), S, "26.05.5", "/o")
        done = subprocess.run(["bash", "-s"], input=job.batch, capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == LAUNCH_FAILED_EXIT and said in done.stderr, done.stderr


def test_cessation_warning_renders_signal_and_exports_it() -> None:
    spec = JobSpec(("python", "train.py"), time_limit=600, extensions=(CessationWarning(seconds=29.5, signal="USR2"),))
    job = build(req(spec), S, "22.05.8", "/o")
    assert "--signal=USR2@30" in job.argv
    assert "export DISPATCH_CESSATION_SIGNAL=USR2\n" in job.batch
    assert "export DISPATCH_CESSATION_GRACE=30\n" in job.batch
    # each rank starts with the signal blocked (Slurm may send it early), and the same process runs the program
    assert '-- /bin/sh -c \'trap "" USR2; if env --block-signal=USR2 true' in job.batch
    assert job.batch.endswith('exec "$@"\' dispatch-rank python train.py\n')
    plain = build(req(JobSpec(("true",))), S, "22.05.8", "/o")
    assert not any(a.startswith("--signal") for a in plain.argv)  # opt-in: USR1's default action ends a process
    assert "DISPATCH_CESSATION" not in plain.batch
    assert "block-signal" not in plain.batch and "--kill-on-bad-exit=1 -- /bin/bash -c " in plain.batch


PROBE = "import signal as s, sys; print(sorted(x.name for x in s.pthread_sigmask(s.SIG_BLOCK, [])), sys.argv[1:])"


def _rank_words(tmp_path: Path) -> list[str]:
    """What srun runs for each rank (the words after ``--``) of a job whose program prints its blocked signals
    and its arguments; the program's name has a ``=``, which ``env`` alone would take for a variable."""
    program = tmp_path / "py=3"
    program.symlink_to(sys.executable)
    spec = JobSpec((str(program), "-c", PROBE, "a=b", "$HOME", "-n"), extensions=(CessationWarning(seconds=30),))
    batch = build(req(spec), S, "22.05.8", "/o").batch
    words = shlex.split(batch[batch.index("exec srun ") :])  # the srun line, with the rank prelude's lines
    return words[words.index("--") + 1 :]


def test_the_program_runs_under_the_callers_umask_and_the_batch_script_under_077(tmp_path: Path) -> None:
    """dispatch's own files (output, progress) are made under ``umask 077``; the user's program gets the umask of
    the process that submitted it, as under a bare ``sbatch``: the rank words, run here from a shell under 077
    (as srun starts them from the batch shell), start the program under the caller's 027."""
    probe = JobSpec((sys.executable, "-c", "import os; print(oct(os.umask(0)))"))
    old = os.umask(0o027)
    try:
        batch = build(req(probe), S, "22.05.8", "/o").batch
    finally:
        os.umask(old)
    assert batch.splitlines()[1] == "umask 077"
    words = shlex.split(batch[batch.index("exec srun ") :])
    ran = subprocess.run(
        words[words.index("--") + 1 :],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        preexec_fn=lambda: os.umask(0o077),
    )
    assert ran.stdout.strip() == "0o27"
    # a spec's own umask (recorded at submission) is the one a later submission uses, whoever submits it
    pinned = build(req(JobSpec(probe.command, umask=0o077)), S, "22.05.8", "/o").batch
    assert 'umask 0077\nexec "$@"' in pinned


def test_the_rank_wrapper_blocks_the_warning_and_passes_argv_byte_for_byte(tmp_path: Path) -> None:
    """Run here: the program starts with the warning signal blocked (pending, not lost, until dispatch.job
    unblocks it) and receives its argv unchanged."""
    out = subprocess.run(_rank_words(tmp_path), capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "['SIGUSR1'] ['a=b', '$HOME', '-n']"


def test_without_env_block_signal_the_rank_starts_with_the_warning_ignored(tmp_path: Path) -> None:
    """Nodes whose coreutils predate ``env --block-signal`` (RHEL 8): the program still starts, with the warning
    ignored (an early one is lost, not fatal), and its argv unchanged."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "env").write_text("#!/bin/sh\necho 'env: unrecognized option' >&2\nexit 125\n")
    (fake / "env").chmod(0o755)
    probe = PROBE.replace("print(", "print(s.getsignal(s.SIGUSR1) is s.SIG_IGN, ")
    words = [probe if w == PROBE else w for w in _rank_words(tmp_path)]
    path = f"{fake}:{os.environ['PATH']}"
    out = subprocess.run(words, capture_output=True, text=True, check=True, timeout=60, env={"PATH": path}).stdout
    assert out.strip() == "True [] ['a=b', '$HOME', '-n']"


@pytest.mark.parametrize(("fields", "path"), [({"seconds": 0}, "seconds"), ({"signal": "TERM"}, "signal")])
def test_cessation_warning_bad_fields_are_named(fields: dict[str, object], path: str) -> None:
    with pytest.raises(SpecError, match=path):
        CessationWarning(**fields)  # type: ignore[arg-type]


def test_pre_termination_reason_names_the_clusters_figures() -> None:
    from dispatch.slurm.preflight import pre_termination_reason

    r = pre_termination_reason({"PreemptMode": "REQUEUE", "PreemptParameters": "(null)"}, 5)
    assert "KillWait=5s" in r and "PreemptMode=REQUEUE): SIGTERM at once" in r and "--signal" in r
    r = pre_termination_reason({"PreemptMode": "REQUEUE", "PreemptParameters": "send_user_signal"}, 30)
    assert "the CessationWarning signal at once" in r
    assert "not configured" in pre_termination_reason({"PreemptMode": "OFF"}, 30)


def test_the_nodes_a_request_excludes_join_the_placements_in_one_exclude() -> None:
    plain = build(StartRequest("abc", 2, "dsp-abc-2", JobSpec(("true",)), ("n1", "gpu-07")), S, "22.05.8", "/o")
    assert "--exclude=n1,gpu-07" in plain.argv
    placed = JobSpec(("true",), extensions=(Placement(exclude="n[3-4]"),))
    both = build(StartRequest("abc", 2, "dsp-abc-2", placed, ("n1",)), S, "22.05.8", "/o")
    assert [a for a in both.argv if a.startswith("--exclude")] == ["--exclude=n[3-4],n1"]
    assert not [a for a in build(req(JobSpec(("true",))), S, "22.05.8", "/o").argv if a.startswith("--exclude")]


@pytest.mark.parametrize("bad", ["n1;reboot", "$(id)", "-w", "n 1", ""])
def test_an_excluded_name_that_is_no_node_name_is_refused(bad: str) -> None:
    with pytest.raises(SpecError, match="not a Slurm node name"):
        build(StartRequest("abc", 2, "dsp-abc-2", JobSpec(("true",)), (bad,)), S, "22.05.8", "/o")
