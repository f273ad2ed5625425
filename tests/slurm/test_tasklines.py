"""srun's task lines: the first failing rank's code, parsed from real bytes and read by the real snippet."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dispatch.slurm import tasklines

# An execution's stderr file as each release wrote it (the test clusters, 2026-12-04): rank 1 exited 3 and srun
# ended rank 0 with SIGTERM. On 22.05 rank 0 was a shell that answered the signal with 143, which sacct's step
# kept (the highest code); 24.11 and 26.05 with a rank that died of the signal.
ERR_2205 = """rank 1 fails
srun: error: n2: task 1: Exited with exit code 3
srun: launch/slurm: _step_signal: Terminating StepId=6900.0
slurmstepd-n1: error: *** STEP 6900.0 ON n1 CANCELLED AT 2026-12-04T15:03:41 ***
Terminated
srun: error: n1: task 0: Exited with exit code 143
"""
ERR_2411 = """rank 1 fails
srun: error: node2: task 1: Exited with exit code 3
srun: Terminating StepId=3408.0
slurmstepd-node1: error: *** STEP 3408.0 ON node1 CANCELLED AT 2026-12-04T15:30:06 ***
srun: error: node1: task 0: Terminated
srun: Force Terminated StepId=3408.0
"""
ERR_2605 = """rank 1 fails
srun: error: node2: task 1: Exited with exit code 3
srun: Terminating StepId=3890.0
[2026-12-04T15:00:04.180] error: *** STEP 3890.0 ON node1 CANCELLED AT 2026-12-04T15:00:04 DUE TO TASK FAILURE ***
srun: error: node1: task 0: Terminated
srun: Force Terminated StepId=3890.0
"""
ERR_OOM = """srun: error: n1: task 0: Out Of Memory
srun: launch/slurm: _step_signal: Terminating StepId=8142.0
"""


def lines(key: str, err: str) -> str:
    return "".join(f"{key} {line}\n" for line in err.splitlines() if line.startswith("srun: error: "))


def test_the_first_task_line_gives_the_first_failing_ranks_code_on_each_release() -> None:
    out = lines("6900:0", ERR_2205) + lines("3408_2:1", ERR_2411) + lines("3890:0", ERR_2605)
    assert tasklines.first_exit_codes(out) == {("6900", 0): 3, ("3408_2", 1): 3, ("3890", 0): 3}


def test_a_first_line_that_names_a_signal_gives_no_code_and_other_lines_are_ignored() -> None:
    out = lines("8142:0", ERR_OOM) + "8143:0 srun: Force Terminated StepId=8143.0\nnot a line\n"
    out += "8144:0 srun: error: n1: tasks 0-1: Exited with exit code 2\n"
    assert tasklines.first_exit_codes(out) == {("8142", 0): None, ("8144", 0): 2}


def test_the_snippet_reads_each_executions_srun_lines_through_its_pointer(tmp_path: Path) -> None:
    """The real snippet under bash: a prefix with a space and a quote, a rank that prints a look-alike line
    that is not srun's (it does not start the line), an execution with no file and a job with no pointer."""
    out_dir = tmp_path / "it's out"
    out_dir.mkdir()
    (tmp_path / ".jobs").mkdir()
    (tmp_path / ".jobs" / "c.6900").write_text(f"{out_dir}/dsp-x-1\n")
    (out_dir / "dsp-x-1.6900.0.err").write_text("rank 0 says: srun: error: n9: task 7: Exited with exit code 9\n")
    (out_dir / "dsp-x-1.6900.1.err").write_text(ERR_2205)
    p = subprocess.run(
        ["bash", "-c", tasklines.READ, "_", str(tmp_path / ".jobs" / "c"), "6900:0", "6900:1", "6900:2", "7000:0"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert tasklines.first_exit_codes(p.stdout) == {("6900", 1): 3}
    assert p.stdout.splitlines() == lines("6900:1", ERR_2205).splitlines()
