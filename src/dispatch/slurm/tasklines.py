"""srun's lines about its tasks' ends: which rank failed first, where accounting keeps only the highest code.

Slurm records one exit code per step, the highest of its tasks'. With ``--kill-on-bad-exit`` the ranks that
did not fail are ended by SIGTERM, and a rank that answers the signal with a code of its own (a shell that ran
its program without ``exec`` exits 143) outranks the rank that failed. srun itself says, in the order it learns
of them, how each task ended, on the stderr of the execution (the file ``<marker>.<job id>.<restart>.err``)::

    srun: error: n2: task 1: Exited with exit code 3
    srun: error: n1: task 0: Terminated

The same words on 22.05, 24.11 and 26.05 (captured in tests/slurm/test_tasklines.py). The first such line that
reports an exit code is the first failure in time, which is what the local adapter reports
(:mod:`dispatch.adapterkit.rankends`). A first line that reports a signal leaves accounting's answer alone.

:data:`READ` prints those lines for several executions in one script (one round trip), reading each file's
srun lines only (``grep -m``), never its whole output back.
"""

from __future__ import annotations

import re

from dispatch.adapterkit.programs import program
from dispatch.slurm.trust import TRUSTED

LINES_KEPT = 64
"""srun lines read per execution: the first failure is among the first ones."""

READ = TRUSTED + program("dispatch.slurm", "task-lines.sh", lines_kept=LINES_KEPT)
"""``programs/task-lines.sh``: print ``<job id>:<restart> <srun line>`` for the executions ``$2...`` (each ``<job
id>:<restart>``); ``$1`` is the pointers' prefix (``<output root>/.jobs/<cluster>``). An execution without a pointer
or a file prints nothing, nor does one whose pointer, pointers' directory or file is not the user's alone
(:mod:`dispatch.slurm.trust`), or whose pointer holds no absolute normalised path."""

_LINE = re.compile(r"(\d+(?:_\d+)?):(\d+) srun: error: [^ :]+: tasks? [0-9,-]+: (.*)")
_EXITED = re.compile(r"Exited with exit code (\d{1,3})")


def first_exit_codes(stdout: str) -> dict[tuple[str, int], int | None]:
    """By (job id, restart): the code of the first task end :data:`READ` printed for that execution, or None
    when srun's first word on it was a signal (``Terminated``, ``Killed``, ``Out Of Memory``, ...). An
    execution with no task line is absent: srun said nothing (no file, or every task exited 0)."""
    out: dict[tuple[str, int], int | None] = {}
    for line in stdout.splitlines():
        m = _LINE.fullmatch(line)
        if m is None:
            continue
        key = (m.group(1), int(m.group(2)))
        if key in out:
            continue
        code = _EXITED.fullmatch(m.group(3))
        out[key] = int(code.group(1)) if code is not None else None
    return out
