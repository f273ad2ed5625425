"""Job array task ids as Slurm prints them, read into dispatch's scheduler ids ``<array job id>_<task id>``.

Slurm keeps an array's tasks that have not been touched yet in one record, the array's own (its job id is the
array job id); a task leaves it with a record of its own (a new job id, the *raw* id) when it starts or is
updated alone (released, held, requeued). dispatch names every task ``<array>_<task>`` whichever record holds
it, so its id never changes:

* squeue's text (``-O JobArrayID`` with ``-r``): ``1574_2``, one line per task;
* squeue's JSON: ``array_job_id`` and ``array_task_id`` (plain numbers on 22.05, ``{"set", "number"}`` objects
  later; an unset task id on a record holding tasks), and ``array_task_string`` (``"0-1,3"``) on the record
  that still holds several;
* sacct's text (``JobID``): ``1574_2``, ``1574_2.batch`` for a step, ``1574_[0-1,3]`` for the array's record;
* sacct's JSON: ``array.job_id``, ``array.task_id`` and ``array.task``: a range list (``"0-1,3"``) or, on
  26.05, a hex bitmap of the tasks (``"0x1"``: bit i is task i).

A job that is no array task keeps its plain id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TASK_ID = re.compile(r"([0-9]+)_([0-9]+)")
_BRACKETED = re.compile(r"([0-9]+)_\[([0-9,:%x\-A-Fa-f]*)\]")
MAX_TASKS = 4_000_001
"""More tasks than any array can hold (Slurm caps MaxArraySize at 4000001): a larger expansion is refused."""


class ArrayIdError(ValueError):
    """A task list that is not one."""


def is_scheduler_id(text: str) -> bool:
    """Whether ``text`` is a Slurm job id dispatch can act on: ``<digits>`` or ``<digits>_<digits>``."""
    return text.isdigit() or _TASK_ID.fullmatch(text) is not None


def task_id(array_job: str, task: int) -> str:
    """The scheduler id of task ``task`` of array ``array_job``."""
    return f"{array_job}_{task}"


def split(scheduler_id: str) -> tuple[str, int | None]:
    """``(array job id, task)`` of an array task's id; ``(id, None)`` for a plain job id."""
    m = _TASK_ID.fullmatch(scheduler_id)
    if m is None:
        return scheduler_id, None
    return m.group(1), int(m.group(2))


def tasks(text: str) -> list[int]:
    """The task ids of a task list: ``"0-1,3"``, ``"0-10:2"`` (a step), an optional ``"%N"`` limit at the end
    (ignored), or a hex bitmap ``"0x1f"``. Raises ArrayIdError for anything else."""
    text = text.strip().split("%", 1)[0]
    if not text:
        return []
    if text.lower().startswith("0x"):
        try:
            bits = int(text, 16)
        except ValueError:
            raise ArrayIdError(f"not a task bitmap: {text!r}") from None
        return [i for i in range(bits.bit_length()) if bits >> i & 1]
    out: list[int] = []
    for part in text.split(","):
        lo, dash, rest = part.partition("-")
        hi, colon, step = rest.partition(":")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (colon and not step.isdigit()):
            raise ArrayIdError(f"not a task list: {text!r}")
        first, last, by = int(lo), int(hi) if dash else int(lo), int(step) if colon else 1
        if last < first or by < 1 or len(out) + (last - first) // by + 1 > MAX_TASKS:
            raise ArrayIdError(f"not a task list: {text!r}")
        out.extend(range(first, last + 1, by))
    return out


def text_ids(job_id: str) -> list[str]:
    """The scheduler ids a text ``JobID`` stands for: itself, or one per task of ``<array>_[<list>]``."""
    m = _BRACKETED.fullmatch(job_id)
    if m is None:
        return [job_id]
    array = m.group(1)
    return [f"{array}_{t}" for t in tasks(m.group(2))]  # task_id's form, without a call per task


def _number(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Mapping) and value.get("set") and not value.get("infinite"):
        n = value.get("number")
        return n if isinstance(n, int) else None
    return None


def json_ids(job_id: str, array_job: Any, array_task: Any, task_string: Any) -> list[str]:
    """The scheduler ids a JSON record stands for, from its job id and its array fields (either dialect). A
    record with a task id is that task; one without, whose array job id is its own job id and which lists
    tasks, is every task it lists; any other is the plain job."""
    array = _number(array_job)
    if not array:
        return [job_id]
    task = _number(array_task)
    if task is not None:
        return [task_id(str(array), task)]
    listed = tasks(str(task_string)) if isinstance(task_string, str) and task_string else []
    if listed:
        return [task_id(str(array), t) for t in listed]
    return [job_id]
