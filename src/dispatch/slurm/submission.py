"""Submission on Slurm: one job's ``sbatch`` (:data:`SUBMIT` writes its output pointer), a batch as job arrays
and plain jobs (:mod:`dispatch.slurm.arrays`), and the pruning of old pointers and maps on the way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import posixpath
import shlex
from collections.abc import Callable, Sequence

from dispatch.adapterkit.fanout import spread
from dispatch.adapterkit.programs import program
from dispatch.capabilities import Answer, Capability
from dispatch.errors import DispatchError, OutcomeUnknown, Rejected, Unavailable
from dispatch.extensions import CessationWarning, ExtensionPolicy, Image, Output, SharedCheckpoint
from dispatch.slurm import arrays, pruning, submit, trust
from dispatch.slurm.arrayids import task_id
from dispatch.slurm.core import NAME, SlurmCore
from dispatch.slurm.extensions import Placement, Resources
from dispatch.slurm.parse import ParseError, parse_sbatch_id
from dispatch.slurm.scripts import CallOutput, Script, ScriptOutput
from dispatch.spi import StartRequest

log = logging.getLogger("dispatch.slurm.backend")
BATCH = 100
"""Submissions per script in :meth:`Submission.start_many`."""
SUBMIT = trust.TRUSTED + program("dispatch.slurm", "submit.sh")
"""``sbatch "${@:3}"`` (the batch script on stdin), then the pointer: ``$2`` (the files' prefix) written to
``$1.<job id>`` (:func:`~dispatch.slurm.submit.pointer_path`). sbatch's stdout and status are the call's; a
pointer that could not be written leaves the files to be found through squeue/sacct as before. Exit 3, sbatch
not run, when the pointers' directory exists and is not the user's alone (:mod:`dispatch.slurm.trust`)."""
ACCEPTED = frozenset(
    {Placement.kind, Resources.kind, Output.kind, SharedCheckpoint.kind, CessationWarning.kind, Image.kind}
)


class Submission:
    """Building and submitting jobs (Backend.start, BatchStarter)."""

    def __init__(self, core: SlurmCore) -> None:
        self.core = core
        self._made_dirs: set[str] = set()  # output directories this backend already created
        self._next_prune = -math.inf  # when a submitting script next prunes old pointers and maps
        self._prune_call: int | None = None

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(accepted=ACCEPTED)

    def build(self, request: StartRequest, array: str | None = None) -> submit.SbatchJob:
        """What sbatch gets for ``request`` (with ``array``: as a task of the job array of that name). A
        ``dispatch.Image`` on a cluster answering ContainerImage no is Unsupported, naming the answer's reason."""
        self.extension_policy().check(request.spec.extensions, NAME)
        if request.spec.extension(Image) is not None and self.core.caps.answer(Capability.CONTAINER_IMAGE) is Answer.NO:
            self.core.caps.require(Capability.CONTAINER_IMAGE, "the dispatch.Image extension")
        return submit.build(
            request,
            self.core.settings,
            self.core.slurm_release,
            self.core.default_output_dir,
            self.default_workdir(),
            array=array,
            progress_root=self.core.progress_root(),
        )

    @property
    def max_array_size(self) -> int:
        """The cluster's ``MaxArraySize`` (an array's task ids are below it; 0 or 1: no arrays), Slurm's default
        1001 when ``scontrol show config`` did not say."""
        value = self.core.facts.config.get("MaxArraySize", "1001").strip()
        return int(value) if value.isdigit() else 1001

    def default_workdir(self) -> str:
        """Where a job without a working directory starts: with the local transport the current directory (this
        machine is the login node, its directories are the cluster's); over SSH (or any other transport) the
        login user's home directory there, since this machine's current directory need not exist on the cluster."""
        if self.core.settings.transport == "local":
            return os.getcwd()
        return self.core.facts.home

    def render(self, request: StartRequest) -> str:
        """The exact sbatch command and batch script :meth:`start` would submit (a dry run; nothing runs)."""
        job = self.build(request)
        words = " ".join(shlex.quote(a) for a in ("sbatch", *job.argv))
        return f"{words} <<'EOF'\n{job.batch}EOF\n"

    dry_run = render

    def start(self, request: StartRequest) -> str:
        self.core.writable()
        job = self.build(request)
        s = self.core.script()
        index = 0
        if job.output_dir not in self._made_dirs:
            s.shell(trust.PREPARE, posixpath.dirname(self.core.pointer("")), job.output_dir)
            index = 1
        self._submit(s, job, s.call)
        self._prune(s)
        out = self.core.run(s, True)
        self._pruned(out)
        _refused_before_sbatch(out.call(index))
        call = self.core.need(out, index, "sbatch", write=True)
        self._made_dirs.add(job.output_dir)
        try:
            return parse_sbatch_id(call.stdout)
        except ParseError as exc:
            raise OutcomeUnknown(str(exc)) from None

    def _submit(self, s: Script, job: submit.SbatchJob, add: Callable[..., int]) -> int:
        """Add the ``sbatch`` of ``job`` to ``s`` with ``add`` (a call, or a concurrent one), recording where its
        output files go (:data:`SUBMIT`)."""
        pointer = self.core.pointer("")
        return int(add(["bash", "-c", SUBMIT, "_", pointer[:-1], job.base, *job.argv], stdin=job.batch))

    def _prune(self, s: Script) -> None:
        """Add :data:`~dispatch.slurm.pruning.PRUNE` to a submitting script, at most every
        :data:`~dispatch.slurm.pruning.PRUNE_EVERY` seconds (the pointers and maps past their retention)."""
        self._prune_call = None  # this script's call, if any (never an earlier script's)
        now = self.core.clock.now()
        if now < self._next_prune:
            return
        self._next_prune = now + pruning.PRUNE_EVERY
        jobs = posixpath.dirname(self.core.pointer(""))
        keep = self.core.settings.output
        self._prune_call = s.shell(
            pruning.PRUNE,
            jobs,
            posixpath.basename(self.core.pointer(""))[:-1],
            posixpath.dirname(arrays.map_path(self.core.pointer(""), "_")),
            pruning.minutes(keep.keep_pointers),
            pruning.minutes(keep.keep_maps),
        )

    def _pruned(self, out: ScriptOutput) -> None:
        """Log what :meth:`_prune`'s call deleted (a failed prune changes nothing and is tried again later)."""
        if self._prune_call is None:
            return
        call, self._prune_call = out.call(self._prune_call), None
        if call is not None and call.stdout.strip():
            log.info("pruned %d pointer(s) and marker map(s) past their retention", len(call.stdout.splitlines()))

    def start_many(
        self, requests: Sequence[StartRequest], *, max_running: int | None = None
    ) -> list[str | DispatchError]:
        """Requests that can share a job array go as one ``sbatch --array`` per array (:mod:`dispatch.slurm.arrays`:
        grouped by sbatch options, cut at ``MaxArraySize``), each task answering ``<array>_<task>``; the others
        (alone in their group, or every request where the cluster allows no arrays) each get their own
        ``sbatch``, in one script per :data:`BATCH` requests (and one ``mkdir`` for new output directories), four
        at a time (:meth:`Script.call_concurrently`). Each answer is its own job's (see :meth:`start`); a failed
        ``sbatch --array`` is every task's answer.

        ``max_running``: the requests go as ONE array throttled with ``%K`` (Slurm runs at most K of its tasks at
        once); requests that would need more than one ``sbatch`` (different sbatch options, more than
        ``MaxArraySize``) are each Rejected, nothing submitted, since a throttle holds within one array only."""
        self.core.writable()
        answers: list[str | DispatchError | None] = [None] * len(requests)
        singles = list(range(len(requests)))
        if max_running is not None and self.max_array_size <= 1:
            why = f"max_running={max_running} needs a job array, and this cluster allows none (MaxArraySize <= 1)"
            return [Rejected(why) for _ in requests]
        if self.max_array_size > 1 and len(requests) > 1:
            fresh = arrays.new_name()
            provisional: list[tuple[int, submit.SbatchJob]] = []
            for i, request in enumerate(requests):
                try:
                    provisional.append((i, self.build(request, fresh)))
                except DispatchError as exc:
                    answers[i] = exc
            planned, singles = arrays.plan(
                provisional,
                {i: r.marker for i, r in enumerate(requests)},
                lambda i, name: self.build(requests[i], name),
                self.max_array_size,
                built_as=fresh,
            )
            if max_running is not None:
                refused = _unthrottled(planned, singles, max_running, self.max_array_size)
                if refused is not None:
                    return [a if a is not None else Rejected(refused) for a in answers]
                planned = [dataclasses.replace(a, throttle=max_running) for a in planned]
            for array in planned:
                for task, answer in zip(array.tasks, self._start_array(array), strict=True):
                    answers[task.index] = answer
        for first in range(0, len(singles), BATCH):
            chunk = singles[first : first + BATCH]
            for i, answer in zip(chunk, self._start_chunk([requests[i] for i in chunk]), strict=True):
                answers[i] = answer
        return [a if a is not None else Unavailable("not submitted") for a in answers]

    def _start_array(self, array: arrays.Array) -> list[str | DispatchError]:
        """One ``sbatch --array`` (:data:`dispatch.slurm.arrays.SUBMIT`): the tasks' ids, or the call's answer for
        every task (OutcomeUnknown when the array may exist: its tasks are found by their markers)."""
        n = len(array.tasks)
        s = self.core.script()
        index = 0
        if array.output_dir not in self._made_dirs:
            s.shell(trust.PREPARE, posixpath.dirname(self.core.pointer("")), array.output_dir)
            index = 1
        pointer = self.core.pointer("")
        markers = "\n".join(t.marker for t in array.tasks)
        where = arrays.map_path(pointer, array.name)
        argv = ["bash", "-c", arrays.SUBMIT, "_", pointer[:-1], array.base, where, markers, str(n), *array.argv()]
        s.call(argv, stdin=array.script())
        self._prune(s)
        try:
            out = self.core.run(s, True)
            self._pruned(out)
            call = out.call(index)
            if call is not None and call.status == 3:
                raise Unavailable(f"sbatch --array not run: {(call.stderr or call.stdout).strip()[:300]}")
            call = self.core.need(out, index, "sbatch --array", write=True)
            jid = parse_sbatch_id(call.stdout)
        except ParseError as exc:
            return list(spread(OutcomeUnknown(str(exc)), n))
        except DispatchError as exc:
            if call is not None and call.status not in (None, 0, 3) and not isinstance(exc, OutcomeUnknown):
                self._drop_map(where)  # sbatch certainly made no array: its map names nothing
            return list(spread(exc, n))
        self._made_dirs.add(array.output_dir)
        return [task_id(jid, t.task) for t in array.tasks]

    def _drop_map(self, path: str) -> None:
        """Remove the marker map of an array ``sbatch`` refused (best effort: a map left names no task, and
        ``find`` then finds nothing by it, as it should)."""
        s = self.core.script()
        s.call(["rm", "-f", "--", path])
        with contextlib.suppress(DispatchError):
            self.core.run(s, True)

    def _start_chunk(self, requests: Sequence[StartRequest]) -> list[str | DispatchError]:
        answers: list[str | DispatchError | None] = [None] * len(requests)
        built: list[tuple[int, submit.SbatchJob]] = []
        for i, request in enumerate(requests):
            try:
                built.append((i, self.build(request)))
            except DispatchError as exc:
                answers[i] = exc
        if built:
            s = self.core.script()
            dirs = sorted({job.output_dir for _, job in built} - self._made_dirs)
            if dirs:
                s.shell(trust.PREPARE, posixpath.dirname(self.core.pointer("")), *dirs)
            first = 1 if dirs else 0
            for _, job in built:  # a few at a time: the controller answers several clients at once
                self._submit(s, job, s.call_concurrently)
            self._prune(s)
            try:
                out = self.core.run(s, True, partial=True)
                self._pruned(out)
            except (Unavailable, OutcomeUnknown) as exc:
                for (i, _), each in zip(built, spread(exc, len(built)), strict=True):
                    answers[i] = each
                return [a for a in answers if a is not None]
            made = out.call(0)
            if dirs and made is not None and made.status == 0:
                self._made_dirs.update(dirs)
            for k, (i, _) in enumerate(built):
                try:
                    _refused_before_sbatch(out.call(first + k))
                    call = self.core.need(out, first + k, "sbatch", write=True)
                    answers[i] = parse_sbatch_id(call.stdout)
                except ParseError as exc:
                    answers[i] = OutcomeUnknown(str(exc))
                except DispatchError as exc:
                    answers[i] = exc
        return [a for a in answers if a is not None]


def _unthrottled(planned: Sequence[arrays.Array], singles: Sequence[int], cap: int, max_size: int) -> str | None:
    """Why a batch capped at ``cap`` running cannot keep the cap (None: it is one array, or one plain job): a
    throttle holds within one array, and these jobs need more than one ``sbatch``."""
    if len(planned) + len(singles) <= 1:
        return None
    groups = len({a.jobs[0].argv for a in planned}) + len(singles)
    why = (
        "different sbatch options (resources, time limit, working directory, ...)"
        if groups > 1
        else (f"more than MaxArraySize={max_size} tasks or {arrays.MAX_SCRIPT} bytes of script per array")
    )
    return (
        f"max_running={cap} is an array throttle (%{cap}), and these jobs need {len(planned) + len(singles)} sbatch"
        f" calls ({why}): submit them as batches that each fit one array; nothing was submitted"
    )


def _refused_before_sbatch(call: CallOutput | None) -> None:
    """Unavailable when :data:`SUBMIT` refused to run sbatch (exit 3: the pointers' directory is not the user's
    alone), naming why; nothing was submitted."""
    if call is not None and call.status == 3:
        raise Unavailable(f"sbatch not run: {(call.stderr or call.stdout).strip()[:300]}")
