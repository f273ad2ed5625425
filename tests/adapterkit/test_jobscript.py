import os
import subprocess
from pathlib import Path

from dispatch.actions import marker_for
from dispatch.adapterkit import render_job_script
from dispatch.adapterkit.jobscript import LAUNCH_FAILED_EXIT, launch_checks
from dispatch.extensions import SharedCheckpoint
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

ODD = ["it's", "a b", "$HOME", "`id`", "x\ny", ""]


def request(tmp_path: Path) -> StartRequest:
    spec = JobSpec(
        command=("python3", "-c", "import json, os, sys; print(json.dumps([sys.argv[1:], dict(os.environ)]))", *ODD),
        env={"GREETING": "hello 'world' $USER"},
        extensions=(SharedCheckpoint(str(tmp_path / "ckpt dir")),),
    )
    return StartRequest("j1", 2, marker_for("j1", 2), spec)


def test_the_script_runs_the_argv_byte_for_byte_with_dispatchs_environment(tmp_path: Path) -> None:
    import json

    script = render_job_script(
        request(tmp_path), scheduler_id='"$JOB_ID"', restart='"${RESTARTED:-0}"', prelude=["# $ -S /bin/bash"]
    )
    path = tmp_path / "job.sh"
    path.write_text(script)
    env = {"PATH": os.environ["PATH"], "JOB_ID": "4711", "RESTARTED": "1"}
    done = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env, check=True)
    argv, seen = json.loads(done.stdout)
    assert argv == ODD
    assert seen["DISPATCH_EXECUTION"] == "2.4711.1"
    assert seen["DISPATCH_JOB"] == "j1"
    assert seen["DISPATCH_SUBMISSION"] == "2"
    assert seen["DISPATCH_MARKER"] == "dsp-j1-2"
    assert seen["DISPATCH_CHECKPOINT_DIR"] == str(tmp_path / "ckpt dir")
    assert seen["GREETING"] == "hello 'world' $USER"
    assert script.splitlines()[1] == "# $ -S /bin/bash"


def test_launcher_words_come_first_and_restart_defaults_to_zero(tmp_path: Path) -> None:
    script = render_job_script(request(tmp_path), scheduler_id="7", launcher=["env", "--"])
    assert "export DISPATCH_EXECUTION=2.7.0" in script
    assert "\nexec env -- python3 -c " in script  # the argv holds a newline: the exec line is not the last


def test_adapter_exports_come_after_dispatchs_and_before_the_specs(tmp_path: Path) -> None:
    import pytest

    script = render_job_script(request(tmp_path), scheduler_id="7", exports={"SCHED_SIGNAL": "USR1 x"})
    lines = script.splitlines()
    at = lines.index("export SCHED_SIGNAL='USR1 x'")
    assert lines[at - 1].startswith("export DISPATCH_CHECKPOINT_DIR=") and lines[at + 1].startswith("export GREETING=")
    with pytest.raises(ValueError, match="not an environment variable name"):
        render_job_script(request(tmp_path), scheduler_id="7", exports={"A;B": "x"})


def _run_checked(tmp_path: Path, spec: JobSpec, working_dir: str | None = None) -> subprocess.CompletedProcess[str]:
    script = render_job_script(
        StartRequest("j1", 1, marker_for("j1", 1), spec),
        scheduler_id="7",
        checks=launch_checks(spec.command, working_dir),
    )
    env = {"PATH": "/usr/bin:/bin"}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)


def test_launch_checks_fail_the_launch_not_the_program(tmp_path: Path) -> None:
    plain = tmp_path / "not executable"
    plain.write_text("echo hi\n")
    for command, said in (
        (("/no/such/program",), "the program /no/such/program does not exist"),
        ((str(plain),), f"the program {plain} is not an executable file"),
        ((str(tmp_path),), f"the program {tmp_path} is not an executable file"),
        (("no-such-program-anywhere",), "the program no-such-program-anywhere is not found in PATH"),
    ):
        done = _run_checked(tmp_path, JobSpec(command=command))
        assert (done.returncode, done.stdout) == (LAUNCH_FAILED_EXIT, "")
        assert done.stderr == f"dispatch: launch failed: {said}\n"


def test_the_working_directory_is_entered_or_the_launch_fails(tmp_path: Path) -> None:
    odd = tmp_path / "it's $(touch pwned) `id`"
    done = _run_checked(tmp_path, JobSpec(command=("pwd",)), str(odd))
    assert done.returncode == LAUNCH_FAILED_EXIT
    assert done.stderr == f"dispatch: launch failed: the working directory {odd} cannot be entered\n"
    assert not (tmp_path / "pwned").exists()  # quoted: nothing of the path ran
    odd.mkdir()
    done = _run_checked(tmp_path, JobSpec(command=("pwd",)), str(odd))
    assert (done.returncode, done.stdout) == (0, f"{odd}\n")


def test_the_program_is_looked_up_with_the_jobs_own_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "my bin"
    bin_dir.mkdir()
    tool = bin_dir / "my-tool"
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    done = _run_checked(tmp_path, JobSpec(command=("my-tool",), env={"PATH": f"{bin_dir}:/usr/bin:/bin"}))
    assert (done.returncode, done.stdout) == (0, "tool ran\n")
    assert _run_checked(tmp_path, JobSpec(command=("my-tool",))).returncode == LAUNCH_FAILED_EXIT
