import os
import subprocess
from pathlib import Path

from dispatch.actions import marker_for
from dispatch.adapterkit import render_job_script
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
