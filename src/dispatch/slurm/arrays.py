"""A batch of submissions as Slurm job arrays: one ``sbatch --array`` per group of jobs that can share one.

* Grouping: jobs share an array when sbatch's options for them are the same (resources, time limit, partition,
  working directory, exported names, ...): each is built as a task of one fresh array name and grouped by its
  argv (:func:`group`); the first array keeps that name, the others are rebuilt under names of their own. A
  group is cut into arrays of at most ``MaxArraySize`` tasks (``scontrol show config``) and at most
  :data:`MAX_SCRIPT` bytes of batch script (Slurm refuses a larger one by default).
* The array's batch script (:func:`compose`) holds every task's own script and runs the one of
  ``$SLURM_ARRAY_TASK_ID``: each task keeps its own command, environment, marker and execution identity
  ``<N>.<array>_<task>.<restart>``; its files are ``<dir>/<array name>.<array>_<task>.<restart>.out``.
* The array is submitted held (``--hold``: every task's start gate closed); a task's gate is opened once its id
  is recorded, the tasks opened together named in one expression (``scontrol release <array>_[0-999]``): Slurm
  then releases the tasks its array's record still holds as that one record, where a task named alone is first
  split off into a job record of its own.
* Finding a task by its marker: every task of an array carries the array's name, not its marker, so before
  sbatch runs the submitting script writes the array's markers, one line per task in task order, to
  ``<output root>/.jobs/arrays/<array name>`` (:data:`SUBMIT`); :data:`FIND` reads them back and asks squeue
  and sacct for the arrays they name. A crash after sbatch and before the ids were recorded therefore leaves
  every task findable by its marker, and its gate closed.
"""

from __future__ import annotations

import posixpath
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dispatch.adapterkit.programs import program
from dispatch.slurm import arrayids, trust
from dispatch.slurm.pruning import MAP_SLACK
from dispatch.slurm.submit import SbatchJob

PREFIX = "dspa-"
"""The start of every array's name (and of its marker map's)."""
NAME = re.compile(re.escape(PREFIX) + r"[A-Za-z0-9_.-]{1,64}")
"""The shape of an array's name (:func:`new_name` gives ``dspa-`` and 16 hex digits): the only map names
:func:`parse_find` reads, so a name it passes on to ``squeue --name`` never carries a ``,``."""
PROVISIONAL = "dspa-provisional"
"""An array name to build requests with for grouping alone (:func:`plan` rebuilds each under its array's name;
:meth:`~dispatch.slurm.backend.SlurmBackend.start_many` builds under a fresh name its first array keeps)."""
MAX_SCRIPT = 3 * 1024 * 1024
"""Most bytes of batch script per array: under Slurm's default ``max_script_size`` (4 MB)."""
MAPS = "arrays"
"""The directory, inside the pointers' directory, of the arrays' marker maps."""

SUBMIT = trust.TRUSTED + program("dispatch.slurm", "array-submit.sh")
"""``programs/array-submit.sh``: write the marker map ``$3`` (the markers ``$4``, one per line; exit 3 and no sbatch
when it cannot be written, or when the pointers' or the maps' directory is not the user's alone:
:mod:`dispatch.slurm.trust`), then ``sbatch "${@:6}"`` (the array's script on stdin), then each of the ``$5`` tasks'
pointer ``$1.<array>_<task>`` holding the files' prefix ``$2``. sbatch's stdout and status are the call's."""

FIND = trust.TRUSTED + program(
    "dispatch.slurm", "array-find.sh", map_slack=MAP_SLACK, prefix=PREFIX, map_max=trust.MAP_MAX
)
"""``programs/array-find.sh``: the array tasks carrying the markers ``$4...``: ``M <map>:<line>:<marker>`` per marker
found in a map under ``$2`` (only a map that is a regular file of the user's alone, at most
:data:`~dispatch.slurm.trust.MAP_MAX` bytes, in a directory of the user's alone, written after ``$3`` less
:data:`~dispatch.slurm.pruning.MAP_SLACK`; ``U <why>`` when the directory is not), then the arrays those maps name as
squeue lists them (``Q <id>|<name>|<submit>``, one per task) and, with ``$1`` = 1 (accounting), as sacct does since
``$3`` (``S <id>|<name>|<submit>``)."""


@dataclass(frozen=True)
class Task:
    """Request ``index`` of the batch as task ``task`` of an array."""

    index: int
    task: int
    marker: str


@dataclass(frozen=True)
class Array:
    """One ``sbatch --array``: its name, its tasks (task ids 0..n-1 in order) and the built jobs; ``throttle``:
    at most that many tasks running at once (None: no cap)."""

    name: str
    tasks: tuple[Task, ...]
    jobs: tuple[SbatchJob, ...]
    throttle: int | None = None

    def argv(self) -> tuple[str, ...]:
        """sbatch's options: the tasks' shared ones with ``--array=0-<n-1>`` (``%K`` with a throttle)."""
        cap = f"%{self.throttle}" if self.throttle is not None else ""
        return (*self.jobs[0].argv, f"--array=0-{len(self.tasks) - 1}{cap}")

    def script(self) -> str:
        return compose([j.batch for j in self.jobs])

    @property
    def base(self) -> str:
        return self.jobs[0].base

    @property
    def output_dir(self) -> str:
        return self.jobs[0].output_dir


def new_name() -> str:
    """A fresh array name: ``dspa-`` and 64 random bits (no marker's form, so never read as a submission)."""
    return f"{PREFIX}{secrets.token_hex(8)}"


def compose(scripts: Sequence[str]) -> str:
    """One batch script running ``scripts[$SLURM_ARRAY_TASK_ID]`` (each a whole script whose first line is its
    ``#!``); any other task id fails before running anything."""
    lines = ["#!/bin/bash", 'case "${SLURM_ARRAY_TASK_ID:-}" in']
    for i, text in enumerate(scripts):
        body = text.split("\n", 1)[1] if text.startswith("#!") else text
        lines.append(f"{i})")
        lines.append(body.rstrip("\n"))
        lines.append(";;")
    lines.append('*) echo "dispatch: this array has no task ${SLURM_ARRAY_TASK_ID:-(none)}" >&2; exit 1;;')
    lines.append("esac")
    return "\n".join(lines) + "\n"


def group(built: Sequence[tuple[int, SbatchJob]]) -> list[list[int]]:
    """The request indices that can share an array: those whose provisional argv is the same, in order of
    their first member."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, job in built:
        groups.setdefault(job.argv, []).append(i)
    return list(groups.values())


def chunks(sizes: Sequence[int], max_tasks: int, max_bytes: int = MAX_SCRIPT) -> list[range]:
    """Cut a group (the script size of each member, in order) into runs of at most ``max_tasks`` members and
    ``max_bytes`` bytes of script (a member larger than that alone is its own run)."""
    out: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (i - start >= max_tasks or total + size > max_bytes):
            out.append(range(start, i))
            start, total = i, 0
        total += size
    if start < len(sizes):
        out.append(range(start, len(sizes)))
    return out


def plan(
    built: Sequence[tuple[int, SbatchJob]],
    markers: Mapping[int, str],
    rebuild: Callable[[int, str], SbatchJob],
    max_tasks: int,
    *,
    built_as: str | None = None,
) -> tuple[list[Array], list[int]]:
    """The arrays of a batch: its groups (:func:`group`) cut at ``max_tasks`` and :data:`MAX_SCRIPT`, each task
    rebuilt under its array's fresh name by ``rebuild(index, name)``; and the indices of the groups of one,
    which need no array (a plain job each). ``built_as``: the fresh array name ``built`` was built under; the
    first array keeps it and its tasks as built (a batch that is one array is built once, not twice)."""
    arrays: list[Array] = []
    singles: list[int] = []
    by_index = dict(built)
    for members in group(built):
        if len(members) == 1:
            singles.extend(members)
            continue
        for run in chunks([len(by_index[i].batch) for i in members], max(1, max_tasks)):
            idx = [members[k] for k in run]
            tasks = tuple(Task(i, t, markers[i]) for t, i in enumerate(idx))
            if built_as is not None:
                arrays.append(Array(built_as, tasks, tuple(by_index[i] for i in idx)))
                built_as = None
                continue
            name = new_name()
            arrays.append(Array(name, tasks, tuple(rebuild(i, name) for i in idx)))
    return arrays, sorted(singles)


def map_path(pointer_prefix: str, name: str) -> str:
    """The marker map of array ``name``, beside the pointers (``<output root>/.jobs/arrays/<name>``)."""
    return posixpath.join(posixpath.dirname(pointer_prefix), MAPS, name)


@dataclass(frozen=True)
class FoundTask:
    marker: str
    scheduler_id: str
    created: float | None


def parse_find(stdout: str) -> list[FoundTask]:
    """The tasks :data:`FIND` printed: a marker is found when its map's array lists its task (squeue or sacct),
    created at the array's submit time (epoch seconds, on the cluster's clock)."""
    wanted: dict[str, tuple[str, int]] = {}
    arrays: dict[str, tuple[str, float | None, set[str]]] = {}
    for line in stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "M":
            path, _, tail = rest.partition(":")
            number, _, marker = tail.partition(":")
            name = posixpath.basename(path)
            if number.isdigit() and int(number) > 0 and NAME.fullmatch(name):
                wanted[marker] = (name, int(number) - 1)
        elif kind in ("Q", "S"):
            parts = rest.split("|")
            if len(parts) < 3:
                continue
            try:
                ids = arrayids.text_ids(parts[0].strip())
            except arrayids.ArrayIdError:
                continue
            name, submit = parts[1].strip(), parts[2].strip()
            for sid in ids:
                array, task = arrayids.split(sid)
                if task is None:
                    continue
                _, created, seen = arrays.setdefault(name, (array, float(submit) if submit.isdigit() else None, set()))
                seen.add(sid)
    found = []
    for marker, (name, task) in wanted.items():
        if name in arrays:
            array, created, seen = arrays[name]
            sid = arrayids.task_id(array, task)
            if sid in seen:
                found.append(FoundTask(marker, sid, created))
    return found
