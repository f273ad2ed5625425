"""SlurmBackend: the dispatch Backend over Slurm's commands, one script per operation.

Implements Backend, Holder, Requeuer, MultiFinder, ProgressScope, BatchStarter, CessationSignal, OutputReader,
OutputSlices and ShapeCheck (not Watcher: it is polled). Errors follow :mod:`dispatch.slurm.errors`; a transport
failure is Unavailable when the script never started and, for writes, OutcomeUnknown once it may have run.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import math
import os
import posixpath
import re
import shlex
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from dispatch.accelerators import Inventory
from dispatch.adapterkit.fanout import spread
from dispatch.adapterkit.holds import InstanceBook, encode_instance
from dispatch.adapterkit.identity import execution_identity, submission_of
from dispatch.adapterkit.programs import program
from dispatch.adapterkit.storage import storage_answer, storage_paths
from dispatch.capabilities import Answer, Capabilities, Capability, CapabilityAnswer, no
from dispatch.clock import Clock, SystemClock
from dispatch.declarations import Declarations
from dispatch.errors import DispatchError, NotFound, OutcomeUnknown, ReadOnly, Rejected, Unavailable, Unsupported
from dispatch.extensions import CessationWarning, ExtensionPolicy, Image, Output, SharedCheckpoint
from dispatch.outcome import Evidence, State
from dispatch.shapes import first_refusal
from dispatch.slurm import arrays, outputs, preflight, progress, pruning, submit, tasklines, trust
from dispatch.slurm import errors as slurm_errors
from dispatch.slurm.arrayids import ArrayIdError, is_scheduler_id, task_id, text_ids
from dispatch.slurm.arrayids import split as split_id
from dispatch.slurm.extensions import Placement, Resources
from dispatch.slurm.holds import HOLD_BASE, HOLD_SPAN, decode_hold, encode_hold
from dispatch.slurm.mapping import Reading, accounting_settling, outcome_of
from dispatch.slurm.nodeshapes import slurm_shape
from dispatch.slurm.parse import (
    SACCT_TEXT_FIELDS,
    SQUEUE_TEXT_FIELDS,
    ParseError,
    SlurmJob,
    config_seconds,
    dialect_of,
    expand_hostlist,
    filter_jobs,
    parse_sacct,
    parse_sacct_text,
    parse_sbatch_id,
    parse_squeue,
    parse_squeue_text,
    text_settles,
)
from dispatch.slurm.scripts import CallOutput, Script, ScriptOutput, parse_output
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.transport.base import Executor, TransportFailure
from dispatch.spec import JobSpec
from dispatch.spi import (
    Cessation,
    ExecutionEvidence,
    Found,
    Gate,
    JobEvidence,
    OutputPiece,
    OutputSlice,
    StartRequest,
    StoragePaths,
)

log = logging.getLogger("dispatch.slurm.backend")
NAME = "slurm"
ARRAY_PREFIX = "dspa-"
"""The start of a job array's name (:func:`dispatch.slurm.arrays.new_name`): its tasks' markers are in its map."""
BATCH = 100
"""Submissions per script in :meth:`SlurmBackend.start_many`."""
OPEN_BATCH = 1000
"""Gates per script in :meth:`SlurmBackend.open_many` (an array's tasks kept together where they fit)."""
PATHS_KEPT = 1024
"""Output paths :meth:`SlurmBackend.read_slices` keeps (per job, execution and stream; the oldest go first)."""
FIRST_CODES_KEPT = 1024
"""Executions whose first failing rank :meth:`SlurmBackend.inspect_many` keeps (all forgotten when full)."""
OPEN_GATES = program("dispatch.slurm", "open-gates.sh")
"""``programs/open-gates.sh``: opens dispatch's gate on the jobs ``$1`` (comma-separated) with one ``squeue`` and one
``scontrol release`` per job array (``<array>_[<tasks>]``, :data:`RANGES` ``$2``) and one for the plain jobs: prints
``<id> release|open|admin`` per job squeue knows (admin: an administrator's hold, never lifted); exit 2 when a
release failed (each line of its message on stderr after the ids it named). Slurm releases the tasks an array still
holds in its own record as that one record when one expression names them all; named one by one, each task would
first be split off into a job record of its own (the controller's cost of a submission, per task)."""
RANGES = program("dispatch.slurm", "ranges.awk")
"""``programs/ranges.awk``: awk over job ids sorted by array and task (``-F_``): one ``<array>_[<ranges>]`` per
array, then the plain ids comma-separated."""
_FOR_JOB = re.compile(r"for job (\d+(?:_\d+)?)")
_EXPRESSION = re.compile(r"[0-9_,\[\]-]+")
_READ_HOLD = program("dispatch.slurm", "read-hold.sh") + "\n"
HOLD_SCRIPT = _READ_HOLD + program("dispatch.slurm", "hold.sh")
"""Hold job ``$1`` with begin time ``$2`` (hold codes lie in [``$3``, ``$4``)): exit 4 not waiting (prints the
state), exit 5 another hold (prints its begin time)."""
RELEASE_SCRIPT = _READ_HOLD + program("dispatch.slurm", "release-hold.sh")
"""Lift hold ``$2`` from job ``$1`` if it carries it; exit 5 when it carries another."""
SUBMIT = trust.TRUSTED + program("dispatch.slurm", "submit.sh")
"""``sbatch "${@:3}"`` (the batch script on stdin), then the pointer: ``$2`` (the files' prefix) written to
``$1.<job id>`` (:func:`~dispatch.slurm.submit.pointer_path`). sbatch's stdout and status are the call's; a
pointer that could not be written leaves the files to be found through squeue/sacct as before. Exit 3, sbatch
not run, when the pointers' directory exists and is not the user's alone (:mod:`dispatch.slurm.trust`)."""
POINTED = trust.TRUSTED + program("dispatch.slurm", "pointed.sh", pointer_max=trust.POINTER_MAX)
"""The pointer ``$1`` of job ``$2``: ``NONE``; ``UNTRUSTED <why>`` when it or its directory is not the user's
alone (:mod:`dispatch.slurm.trust`) or it is too large; else its first line (the files' prefix) and then one
line ``<restart>.out`` per execution that has a stdout file (a regular file, not a link)."""
STOP = program("dispatch.slurm", "stop.sh")
"""Cancel job ``$1`` (exit 1 with squeue's message when squeue does not know it). An array task still inside its
array's record is first updated alone (a no-op update), which gives it its own record: Slurm cancels such a
task without a trace otherwise (neither squeue nor sacct would show it ended)."""
SACCT_NAMES = program("dispatch.slurm", "sacct-names.sh")
"""``programs/sacct-names.sh``: the jobs named ``$2`` that sacct has since ``$1`` (``<id>|<name>|<submit>``)."""
ACCEPTED = frozenset(
    {Placement.kind, Resources.kind, Output.kind, SharedCheckpoint.kind, CessationWarning.kind, Image.kind}
)


@dataclass(frozen=True)
class _Observed:
    """squeue's view of a job (None when gone) and sacct's executions (oldest first)."""

    live: SlurmJob | None
    history: tuple[SlurmJob, ...]
    progress: Mapping[int, str] | None = None
    """The raw progress reports by rank, read in the same script as squeue (None: not read)."""


class SlurmBackend:
    """One Slurm cluster. Built by :func:`dispatch.slurm.new`, which runs preflight."""

    def __init__(
        self, settings: SlurmSettings, executor: Executor, clock: Clock | None = None, *, read_only: bool = False
    ) -> None:
        self.settings = settings
        self._executor = executor
        self._clock = clock or SystemClock()
        self._read_only = read_only
        self._offset = 0.0
        self._uncertainty = 0.0
        self.scripts_run = 0
        self._paths: dict[tuple[str, int | None, str], str] = {}
        self._book = InstanceBook()  # the names of holds this backend placed (for non-canonical instances)
        self._bases: dict[str, str] = {}  # job id -> its output files' prefix, from its pointer (never changes)
        self._made_dirs: set[str] = set()  # output directories this backend already created
        self._first_codes: dict[tuple[str, int], int | None] = {}  # (job id, restart) -> srun's first task code
        self._next_prune = -math.inf  # when a submitting script next prunes old pointers and maps
        self._prune_call: int | None = None
        self.facts = preflight.run_preflight(settings, self._run, self._clock, read_only=read_only)
        self._offset = self.facts.offset
        self._uncertainty = self.facts.uncertainty
        self._caps = preflight.capabilities_of(self.facts).with_answer(
            Capability.SHARED_STORAGE, storage_answer(settings.shared_storage)
        )
        self._decl = preflight.declarations_of(settings, self.facts)
        self.slurm_release = self.facts.version
        self.dialect = dialect_of(self.facts.version)
        self.default_output_dir = posixpath.join(self.facts.home or "/tmp", "dispatch-output")

    # ---------------------------------------------------------------- plumbing
    def _script(self) -> Script:
        s = Script(call_timeout=self.settings.timeouts.call, env=self.settings.env)
        s.deadline = self._clock.now() + self._offset + self.settings.timeouts.script
        return s

    def _run(self, script: Script, write: bool, *, partial: bool = False) -> ScriptOutput:
        """Run one script. Transport failures: Unavailable if it never started (or it only read), else
        OutcomeUnknown; with ``partial``, a write script cut after it started returns what it reported (each
        call then answers for itself: those with no status are unknown)."""
        self.scripts_run += 1
        try:
            result = self._executor.run(script.render(), self.settings.timeouts.script + 10)
        except TransportFailure as exc:
            out = parse_output(script.nonce, exc.result.stdout)
            if write and out.started and partial:
                return out
            if write and out.started:
                raise OutcomeUnknown(f"the connection failed after the script started: {exc}") from None
            raise Unavailable(f"the cluster could not be reached: {exc}") from None
        out = parse_output(script.nonce, result.stdout)
        if not out.started:
            raise Unavailable(f"the script did not start (exit {result.returncode}): {result.stderr.strip()[:300]}")
        return out

    def _need(self, out: ScriptOutput, index: int, what: str, *, write: bool) -> CallOutput:
        """The call's output when it succeeded; otherwise the error its answer maps to."""
        call = out.call(index)
        if call is None or call.status is None:
            if call is not None and call.not_run:
                raise Unavailable(f"{what}: the script's deadline passed before the call ran")
            if write:
                raise OutcomeUnknown(f"{what}: the script was cut before the call reported")
            raise Unavailable(f"{what}: no answer")
        if call.status != 0:
            raise slurm_errors.error_for(what, call.stderr or call.stdout, write=write, status=call.status)
        return call

    def _writable(self) -> None:
        if self._read_only:
            raise ReadOnly("this Slurm backend was opened read-only")

    def _evidence(self, source: str) -> Evidence:
        return Evidence(source, self._clock.now())

    # ---------------------------------------------------------------- Backend
    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self._read_only

    def capabilities(self) -> Capabilities:
        return self._caps

    def declarations(self) -> Declarations:
        return self._decl

    def accelerators(self) -> Inventory | None:
        """The GPUs per partition, from ``sinfo`` at open."""
        return self.facts.accelerators

    def extension_policy(self) -> ExtensionPolicy:
        return ExtensionPolicy(accepted=ACCEPTED)

    def shared_storage(self) -> StoragePaths:
        return storage_paths(self.settings.shared_storage, NAME)

    def build(self, request: StartRequest, array: str | None = None) -> submit.SbatchJob:
        """What sbatch gets for ``request`` (with ``array``: as a task of the job array of that name). A
        ``dispatch.Image`` on a cluster answering ContainerImage no is Unsupported, naming the answer's reason."""
        self.extension_policy().check(request.spec.extensions, NAME)
        if request.spec.extension(Image) is not None and self._caps.answer(Capability.CONTAINER_IMAGE) is Answer.NO:
            self._caps.require(Capability.CONTAINER_IMAGE, "the dispatch.Image extension")
        return submit.build(
            request,
            self.settings,
            self.slurm_release,
            self.default_output_dir,
            self.default_workdir(),
            array=array,
            progress_root=self._progress_root(),
        )

    @property
    def max_array_size(self) -> int:
        """The cluster's ``MaxArraySize`` (an array's task ids are below it; 0 or 1: no arrays), Slurm's default
        1001 when ``scontrol show config`` did not say."""
        value = self.facts.config.get("MaxArraySize", "1001").strip()
        return int(value) if value.isdigit() else 1001

    def default_workdir(self) -> str:
        """Where a job without a working directory starts: with the local transport the current directory (this
        machine is the login node, its directories are the cluster's); over SSH (or any other transport) the
        login user's home directory there, since this machine's current directory need not exist on the cluster."""
        if self.settings.transport == "local":
            return os.getcwd()
        return self.facts.home

    def render(self, request: StartRequest) -> str:
        """The exact sbatch command and batch script :meth:`start` would submit (a dry run; nothing runs)."""
        job = self.build(request)
        words = " ".join(shlex.quote(a) for a in ("sbatch", *job.argv))
        return f"{words} <<'EOF'\n{job.batch}EOF\n"

    dry_run = render

    def start(self, request: StartRequest) -> str:
        self._writable()
        job = self.build(request)
        s = self._script()
        index = 0
        if job.output_dir not in self._made_dirs:
            s.shell(trust.PREPARE, posixpath.dirname(self._pointer("")), job.output_dir)
            index = 1
        self._submit(s, job, s.call)
        self._prune(s)
        out = self._run(s, True)
        self._pruned(out)
        _refused_before_sbatch(out.call(index))
        call = self._need(out, index, "sbatch", write=True)
        self._made_dirs.add(job.output_dir)
        try:
            return parse_sbatch_id(call.stdout)
        except ParseError as exc:
            raise OutcomeUnknown(str(exc)) from None

    def _pointer(self, jid: str) -> str:
        cluster = re.sub(r"[^A-Za-z0-9_.-]", "_", self.facts.cluster_name) or "slurm"
        return submit.pointer_path(self.settings.output.dir or self.default_output_dir, cluster, jid)

    def _progress_root(self) -> str:
        """The cluster's progress directory (:func:`dispatch.slurm.progress.root`)."""
        cluster = re.sub(r"[^A-Za-z0-9_.-]", "_", self.facts.cluster_name) or "slurm"
        return progress.root(self.settings.output.dir or self.default_output_dir, cluster)

    def _submit(self, s: Script, job: submit.SbatchJob, add: Callable[..., int]) -> int:
        """Add the ``sbatch`` of ``job`` to ``s`` with ``add`` (a call, or a concurrent one), recording where its
        output files go (:data:`SUBMIT`)."""
        pointer = self._pointer("")
        return int(add(["bash", "-c", SUBMIT, "_", pointer[:-1], job.base, *job.argv], stdin=job.batch))

    def _prune(self, s: Script) -> None:
        """Add :data:`~dispatch.slurm.pruning.PRUNE` to a submitting script, at most every
        :data:`~dispatch.slurm.pruning.PRUNE_EVERY` seconds (the pointers and maps past their retention)."""
        self._prune_call = None  # this script's call, if any (never an earlier script's)
        now = self._clock.now()
        if now < self._next_prune:
            return
        self._next_prune = now + pruning.PRUNE_EVERY
        jobs = posixpath.dirname(self._pointer(""))
        keep = self.settings.output
        self._prune_call = s.shell(
            pruning.PRUNE,
            jobs,
            posixpath.basename(self._pointer(""))[:-1],
            posixpath.dirname(arrays.map_path(self._pointer(""), "_")),
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

    def open(self, scheduler_id: str) -> None:
        error = self.open_many([scheduler_id])[0]
        if error is not None:
            raise error

    # ---------------------------------------------------------------- BatchStarter
    def start_many(self, requests: Sequence[StartRequest]) -> list[str | DispatchError]:
        """Requests that can share a job array go as one ``sbatch --array`` per array (:mod:`dispatch.slurm.arrays`:
        grouped by sbatch options, cut at ``MaxArraySize``), each task answering ``<array>_<task>``; the others
        (alone in their group, or every request where the cluster allows no arrays) each get their own
        ``sbatch``, in one script per :data:`BATCH` requests (and one ``mkdir`` for new output directories), four
        at a time (:meth:`Script.call_concurrently`). Each answer is its own job's (see :meth:`start`); a failed
        ``sbatch --array`` is every task's answer."""
        self._writable()
        answers: list[str | DispatchError | None] = [None] * len(requests)
        singles = list(range(len(requests)))
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
        s = self._script()
        index = 0
        if array.output_dir not in self._made_dirs:
            s.shell(trust.PREPARE, posixpath.dirname(self._pointer("")), array.output_dir)
            index = 1
        pointer = self._pointer("")
        markers = "\n".join(t.marker for t in array.tasks)
        where = arrays.map_path(pointer, array.name)
        argv = ["bash", "-c", arrays.SUBMIT, "_", pointer[:-1], array.base, where, markers, str(n), *array.argv()]
        s.call(argv, stdin=array.script())
        self._prune(s)
        try:
            out = self._run(s, True)
            self._pruned(out)
            call = out.call(index)
            if call is not None and call.status == 3:
                raise Unavailable(f"sbatch --array not run: {(call.stderr or call.stdout).strip()[:300]}")
            call = self._need(out, index, "sbatch --array", write=True)
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
        s = self._script()
        s.call(["rm", "-f", "--", path])
        with contextlib.suppress(DispatchError):
            self._run(s, True)

    def _start_chunk(self, requests: Sequence[StartRequest]) -> list[str | DispatchError]:
        answers: list[str | DispatchError | None] = [None] * len(requests)
        built: list[tuple[int, submit.SbatchJob]] = []
        for i, request in enumerate(requests):
            try:
                built.append((i, self.build(request)))
            except DispatchError as exc:
                answers[i] = exc
        if built:
            s = self._script()
            dirs = sorted({job.output_dir for _, job in built} - self._made_dirs)
            if dirs:
                s.shell(trust.PREPARE, posixpath.dirname(self._pointer("")), *dirs)
            first = 1 if dirs else 0
            for _, job in built:  # a few at a time: the controller answers several clients at once
                self._submit(s, job, s.call_concurrently)
            self._prune(s)
            try:
                out = self._run(s, True, partial=True)
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
                    call = self._need(out, first + k, "sbatch", write=True)
                    answers[i] = parse_sbatch_id(call.stdout)
                except ParseError as exc:
                    answers[i] = OutcomeUnknown(str(exc))
                except DispatchError as exc:
                    answers[i] = exc
        return [a for a in answers if a is not None]

    def open_many(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        """Open every gate with one ``squeue`` and one ``scontrol release`` per job array and one for the plain
        jobs, per :data:`OPEN_BATCH` ids (:data:`OPEN_GATES`; an array's tasks go in one script where they fit,
        so the tasks its record still holds are released as that one record): release a job held by its user
        (dispatch's gate), refuse one held by an administrator (Rejected), leave any other alone (already open);
        a job squeue no longer knows is NotFound."""
        self._writable()
        answers: list[DispatchError | None] = [None] * len(scheduler_ids)
        for chunk in _open_chunks(scheduler_ids, OPEN_BATCH):
            for k, answer in zip(chunk, self._open_chunk([scheduler_ids[k] for k in chunk]), strict=True):
                answers[k] = answer
        return answers

    def _open_chunk(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        jids: list[str | NotFound] = []
        for sid in scheduler_ids:
            try:
                jids.append(_job_id(sid))
            except NotFound as exc:
                jids.append(exc)
        valid = [j for j in jids if isinstance(j, str)]
        if not valid:
            return [j if isinstance(j, NotFound) else None for j in jids]
        s = self._script()
        s.shell(OPEN_GATES, ",".join(valid), RANGES)
        try:
            out = self._run(s, True, partial=True)
        except (Unavailable, OutcomeUnknown) as exc:
            return [j if isinstance(j, NotFound) else e for j, e in zip(jids, spread(exc, len(jids)), strict=True)]
        call = out.call(0)
        if call is not None and call.status not in (0, 2, None):
            err = slurm_errors.error_for("open", call.stderr or call.stdout, write=True, status=call.status)
            return [j if isinstance(j, NotFound) else e for j, e in zip(jids, spread(err, len(jids)), strict=True)]
        seen: dict[str, str] = {}
        for line in (call.stdout if call is not None else "").splitlines():
            parts = line.split()
            if len(parts) == 2:
                seen[parts[0]] = parts[1]
        failed = _release_failures(call.stderr if call is not None else "")
        answers: list[DispatchError | None] = []
        for jid in jids:
            if isinstance(jid, NotFound):
                answers.append(jid)
            elif call is None or call.status is None:  # cut: only what was printed is known
                what = seen.get(jid)
                answers.append(None if what == "open" else OutcomeUnknown(f"open {jid}: the script was cut"))
            elif jid not in seen:
                answers.append(NotFound(f"Slurm job {jid} is not in squeue"))
            elif seen[jid] == "admin":
                answers.append(
                    Rejected(f"job {jid} is held by an administrator (JobHeldAdmin); dispatch never releases it")
                )
            elif seen[jid] == "release" and jid in failed:
                answers.append(slurm_errors.error_for(f"open {jid}", failed[jid], write=True, status=1))
            else:
                answers.append(None)
        return answers

    def _observe(
        self, ids: Sequence[str], *, full: bool = False, progress_of: Collection[str] | None = ()
    ) -> dict[str, _Observed]:
        """squeue's and sacct's view of ``ids``. Cheap first: one text listing (:data:`SQUEUE_TEXT_FIELDS`)
        answers for every job it settles (:func:`text_settles`: running, or pending for a plain reason, in its
        first execution); JSON (and sacct) are asked only for the others, and sacct alone for the jobs the
        listing no longer shows. ``full``: JSON for every job (output paths, flags). ``progress_of``: the jobs
        whose progress to read with the listing, where they run and have reports (None: every job; the default
        none)."""
        try:
            jids = [_job_id(i) for i in ids]
            if not jids:
                return {}
            if full:
                return self._observe_json(jids)
            return self._observe_text_first(jids, progress_of)
        except ParseError as exc:  # unusable output: the read had no effect and tells nothing (never a crash)
            raise Unavailable(f"squeue/sacct: unusable output: {str(exc)[:300]}") from None

    def _observe_text_first(self, jids: list[str], progress_of: Collection[str] | None) -> dict[str, _Observed]:
        s = self._script()
        # one call: the listing, and the reports of the running jobs that have any (progress.OBSERVE)
        s.shell(progress.OBSERVE, ",".join(jids), SQUEUE_TEXT_FIELDS, self._progress_root(), progress.want(progress_of))
        out = self._run(s, False)
        call = out.call(0)
        listing, reports = progress.split(call.stdout) if call is not None else ("", "")
        raw = progress.parse_reports(reports)
        rows: list[SlurmJob] = []
        if call is not None and call.status == 0:
            rows = parse_squeue_text(listing, self.slurm_release)
        elif call is None or "Invalid job id" not in call.stderr:
            stderr = call.stderr if call else ""
            raise slurm_errors.error_for("squeue", stderr, write=False, status=call.status if call else None)
        wanted = set(jids)
        listed = {j.job_id: j for j in rows if j.job_id in wanted}
        result = {jid: _Observed(job, ()) for jid, job in listed.items() if text_settles(job)}
        unsettled = [j for j in jids if j in listed and j not in result]
        gone = [j for j in jids if j not in listed]
        if unsettled:
            result.update(self._observe_json(unsettled))
        if gone and self._caps[Capability.ACCOUNTING_HISTORY].yes:
            for jid, history in self._history(gone).items():
                if jid in wanted and history:
                    result[jid] = _Observed(None, tuple(history))
        return {j: replace(result[j], progress=raw[j]) if j in raw else result[j] for j in jids if j in result}

    def _observe_json(self, jids: list[str]) -> dict[str, _Observed]:
        s = self._script()
        if self.dialect == "v0.0.38":
            s.call(["squeue", "--json"])  # ignores filters: filtered here
        else:
            s.call(["squeue", "--json", "-t", "all", "-j", ",".join(jids)])
        out = self._run(s, False)
        call = out.call(0)
        live: dict[str, SlurmJob] = {}
        if call is not None and call.status == 0:
            _, jobs = parse_squeue(call.stdout)
            live = {j.job_id: j for j in filter_jobs(jobs, ids=jids)}
        elif call is None or "Invalid job id" not in call.stderr:
            # one purged id makes squeue fail with "Invalid job id" (no JSON): that alone means "not live"
            stderr = call.stderr if call else ""
            raise slurm_errors.error_for("squeue", stderr, write=False, status=call.status if call else None)
        need_history = [j for j in jids if j not in live or (live[j].restart_cnt or 0) > 0 or live[j].state == "FAILED"]
        history = self._history(need_history) if need_history and self._caps[Capability.ACCOUNTING_HISTORY].yes else {}
        return {j: _Observed(live.get(j), tuple(history.get(j, ()))) for j in jids if j in live or history.get(j)}

    def _history(self, jids: Sequence[str]) -> dict[str, list[SlurmJob]]:
        """sacct's executions of ``jids``. An array task is asked with its array (sacct names a task still held
        in the array's record only so), and one the array's accounting no longer holds at all, neither in the
        array's record nor in one of its own, reads as cancelled (:func:`_dropped_task`)."""
        arrays_asked = sorted({a for a, t in map(split_id, jids) if t is not None})
        asked = ",".join([*jids, *arrays_asked])
        s = self._script()
        if self.dialect == "v0.0.38":
            s.shell(program("dispatch.slurm", "sacct-text.sh"), asked, SACCT_TEXT_FIELDS)
        else:
            s.call(["sacct", "--json", "-D", "-j", asked])
        out = self._run(s, False)
        call = self._need(out, 0, "sacct", write=False)
        if self.dialect == "v0.0.38":
            jobs = parse_sacct_text(call.stdout, self.slurm_release)
        else:
            _, jobs = parse_sacct(call.stdout)
        by: dict[str, list[SlurmJob]] = {}
        for j in jobs:
            by.setdefault(j.job_id, []).append(j)
        for lst in by.values():
            lst.sort(key=lambda j: (j.restart_cnt or 0, j.submit_time or 0))
        for jid in jids:
            if jid not in by:
                dropped = _dropped_task(jid, jobs)
                if dropped is not None:
                    by[jid] = [dropped]
        return by

    def _evidence_of(
        self, jid: str, obs: _Observed, memo: dict[tuple[object, ...], Reading] | None = None
    ) -> JobEvidence:
        """The evidence of one job. ``memo`` shares readings between jobs whose records map alike within one
        observation (thousands of gated jobs are one reading)."""
        now = self._clock.now()
        marker_job = obs.live or obs.history[-1]
        submission = submission_of(marker_job.name)  # an array task's name is its array's: submission 1
        executions: list[ExecutionEvidence] = []
        seen: set[int] = set()
        for rec in obs.history:
            r = rec.restart_cnt or 0
            if obs.live is not None and r >= (obs.live.restart_cnt or 0):
                continue
            seen.add(r)
            executions.append(self._execution(jid, submission, rec, r, self._reading(rec, "sacct", now, memo)))
        current = obs.live or obs.history[-1]
        r = current.restart_cnt or 0
        same = [h for h in obs.history if (h.restart_cnt or 0) == r]
        if obs.live is not None and same and (same[-1].step_states or same[-1].step_exit_code):
            current = replace(current, step_states=same[-1].step_states, step_exit_code=same[-1].step_exit_code)
        if (
            obs.live is not None
            and self._caps[Capability.ACCOUNTING_HISTORY].yes
            and accounting_settling(obs.live, same[-1] if same else None, now)
        ):
            current = replace(current, state="", flags=current.flags | {"COMPLETING"})  # read as running
        source = "squeue" if obs.live is not None else "sacct"
        reading = self._reading(current, source, now, memo)
        if r not in seen:
            executions.append(self._execution(jid, submission, current, r, reading))
        executions.sort(key=lambda e: e.restart)
        if obs.progress and executions and executions[-1].outcome.state is State.RUNNING:
            cur = executions[-1]
            executions[-1] = replace(cur, progress=progress.reports_of(obs.progress, cur.identity, self._offset))
        return JobEvidence(
            scheduler_id=jid,
            marker=None if marker_job.name.startswith(ARRAY_PREFIX) else (marker_job.name or None),
            outcome=reading.outcome,
            gate=Gate.CLOSED if reading.gate_closed else Gate.OPEN,
            holds=(self._hold_name(reading.hold),) if reading.hold else (),
            foreign_holds=(reading.foreign_hold,) if reading.foreign_hold else (),
            executions=tuple(executions),
        )

    @staticmethod
    def _reading(rec: SlurmJob, source: str, now: float, memo: dict[tuple[object, ...], Reading] | None) -> Reading:
        if memo is None:
            return outcome_of(rec, Evidence(source, now))
        key = (source, rec.state, rec.flags, rec.reason, rec.description, rec.eligible_time, rec.restart_cnt,
               rec.start_time is None, rec.exit_code, rec.signal, rec.step_states, rec.step_exit_code)  # fmt: skip
        reading = memo.get(key)
        if reading is None:
            reading = memo[key] = outcome_of(rec, Evidence(source, now))
        return reading

    def _execution(self, jid: str, n: int, rec: SlurmJob, restart: int, reading: Reading) -> ExecutionEvidence:
        off = self._offset
        outcome = reading.outcome
        # Slurm fills start_time with an estimate while pending, and with the cancel time for a job cancelled
        # before it ran: only an execution that left the waiting states with nodes allocated has started. A
        # running job's end_time is Slurm's projection from its time limit: only an ended one has an end.
        ran = not outcome.state.waiting and bool(rec.nodes)
        if not ran:
            return ExecutionEvidence(execution_identity(n, jid, restart), restart, outcome)
        return ExecutionEvidence(
            identity=execution_identity(n, jid, restart),
            restart=restart,
            outcome=outcome,
            started_at=rec.start_time - off if rec.start_time and rec.start_time < 4e9 else None,
            ended_at=rec.end_time - off if outcome.state.ended and rec.end_time and rec.end_time < 4e9 else None,
            nodes=_node_names(rec.nodes),
        )

    def inspect(self, scheduler_id: str) -> JobEvidence:
        got = self.inspect_many([scheduler_id])
        jid = _job_id(scheduler_id)
        if jid not in got:
            raise NotFound(
                f"Slurm job {jid} is not in squeue"
                + ("" if self._caps[Capability.ACCOUNTING_HISTORY].yes else " and there is no accounting to ask")
            )
        return got[jid]

    def scopes_progress(self) -> bool:
        """True: :meth:`inspect_many` takes ``progress_of`` (:class:`~dispatch.spi.ProgressScope`)."""
        return True

    def inspect_many(
        self, scheduler_ids: Sequence[str], *, progress_of: Collection[str] | None = None
    ) -> Mapping[str, JobEvidence]:
        """The evidence of ``scheduler_ids`` in one script (more only for jobs the text listing does not settle).
        Progress is read where it can exist and is wanted: the running executions of ``progress_of`` (None: of
        every job) that have reports (:mod:`dispatch.slurm.progress`)."""
        memo: dict[tuple[object, ...], Reading] = {}
        observed = self._with_first_failures(self._observe(scheduler_ids, progress_of=progress_of))
        return {j: self._evidence_of(j, o, memo) for j, o in observed.items()}

    def _with_first_failures(self, observed: dict[str, _Observed]) -> dict[str, _Observed]:
        """Each execution whose srun step failed carries the code of its first failing rank, as srun logged it
        (:mod:`~dispatch.slurm.tasklines`), instead of accounting's highest one. One script reads the srun lines
        of every such execution not read before; an execution's lines are final once its step has ended, so each
        is read once. Only a FAILED execution is read (the mapping reports a step's code for no other). If the read
        fails, accounting's code stands (the fold keeps the first reading of an end)."""
        failed: set[tuple[str, int]] = set()
        for jid, obs in observed.items():
            records = (*obs.history, *((obs.live,) if obs.live is not None else ()))
            ended_failed = {rec.restart_cnt or 0 for rec in records if rec.state == "FAILED"}
            failed.update(
                (jid, r) for rec in records if rec.step_exit_code and (r := rec.restart_cnt or 0) in ended_failed
            )
        unread = sorted(failed - self._first_codes.keys())
        if unread:
            s = self._script()
            s.shell(tasklines.READ, self._pointer("")[:-1], *(f"{jid}:{r}" for jid, r in unread))
            try:
                call = self._need(self._run(s, False), 0, "read srun's task lines", write=False)
            except DispatchError as exc:
                log.info("srun's task lines not read (accounting's step codes stand): %s", exc)
            else:
                if len(self._first_codes) + len(unread) > FIRST_CODES_KEPT:
                    self._first_codes.clear()
                read = tasklines.first_exit_codes(call.stdout)
                self._first_codes.update({key: read.get(key) for key in unread})

        def first(jid: str, rec: SlurmJob) -> SlurmJob:
            key = (jid, rec.restart_cnt or 0)
            code = self._first_codes.get(key) if key in failed else None
            return replace(rec, step_exit_code=code) if code else rec

        if not failed:
            return observed
        touched = {jid for jid, _ in failed}
        return {
            jid: replace(
                obs,
                live=first(jid, obs.live) if obs.live is not None else None,
                history=tuple(first(jid, h) for h in obs.history),
            )
            if jid in touched
            else obs
            for jid, obs in observed.items()
        }

    def find(self, marker: str, since: float) -> list[Found]:
        return self.find_many([marker], since).get(marker, [])

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        try:
            return self._find_many_parsed(markers, since)
        except ParseError as exc:
            raise Unavailable(f"squeue/sacct: unusable output: {str(exc)[:300]}") from None

    def _find_many_parsed(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        wanted = list(dict.fromkeys(markers))
        if not wanted:
            return {}
        s = self._script()
        if self.dialect == "v0.0.38":
            s.call(["squeue", "--json"])
        else:
            s.call(["squeue", "--json", "-t", "all", "--name=" + ",".join(wanted)])
        acct = self._caps[Capability.ACCOUNTING_HISTORY].yes
        if acct:
            s.shell(
                SACCT_NAMES,
                str(max(0, int(since + self._offset) - 1)),  # sacct refuses a start before the epoch (find(m, 0))
                ",".join(wanted),
            )
        maps = posixpath.dirname(arrays.map_path(self._pointer(""), "_"))
        s.shell(arrays.FIND, "1" if acct else "0", maps, str(max(0, int(since + self._offset) - 1)), *wanted)
        out = self._run(s, False)
        found: dict[str, dict[str, Found]] = {m: {} for m in wanted}
        tasks = self._need(out, 2 if acct else 1, "find array tasks", write=False)
        array_tasks = arrays.parse_find(tasks.stdout)
        for line in tasks.stdout.splitlines():
            if line.startswith("U "):
                log.warning("array marker maps ignored: %s", line[2:])
        sq = self._need(out, 0, "squeue", write=False)
        _, jobs = parse_squeue(sq.stdout)
        for j in filter_jobs(jobs, names=wanted):
            created = (j.submit_time - self._offset) if j.submit_time else None
            if created is None or created >= since - self._uncertainty - 1:
                found[j.name].setdefault(j.job_id, Found(j.job_id, j.name, created))
        if acct:
            sa = self._need(out, 1, "sacct", write=False)
            for line in sa.stdout.splitlines():
                parts = line.split("|")
                if len(parts) >= 3 and parts[1] in found:
                    created = float(parts[2]) - self._offset if parts[2].isdigit() else None
                    found[parts[1]].setdefault(parts[0], Found(parts[0], parts[1], created))
        for task in array_tasks:
            created = task.created - self._offset if task.created is not None else None
            if task.marker in found and (created is None or created >= since - self._uncertainty - 1):
                found[task.marker].setdefault(task.scheduler_id, Found(task.scheduler_id, task.marker, created))
        return {m: sorted(v.values(), key=lambda f: _id_order(f.scheduler_id)) for m, v in found.items()}

    def stop_job(self, scheduler_id: str) -> float:
        self._writable()
        jid = _job_id(scheduler_id)
        s = self._script()
        s.shell(STOP, jid)
        out = self._run(s, True)
        call = out.call(0)
        if call is not None and call.status not in (0, None) and "Invalid job id" in call.stderr:
            if self._caps[Capability.ACCOUNTING_HISTORY].yes and self._history([jid]).get(jid):
                return 0.0  # already ended and purged: nothing left to stop
            raise NotFound(f"Slurm job {jid} is gone")
        self._need(out, 0, f"scancel {jid}", write=True)
        kill_wait = config_seconds(self.facts.config, "KillWait", 30.0)
        return kill_wait + config_seconds(self.facts.config, "MessageTimeout", 10.0) + 5.0

    def close(self) -> None:
        self._executor.close()

    # ---------------------------------------------------------------- Holder
    def hold(self, scheduler_id: str, instance: str) -> None:
        """One script reads the job (``squeue``) and, if it is waiting and carries no other hold, sets the
        hold's start time: the read and the update are one round trip apart no more (Slurm has no
        compare-and-set; what is left is the gap between two commands on the login node)."""
        self._writable()
        jid = _job_id(scheduler_id)
        s = self._script()
        s.shell(HOLD_SCRIPT, jid, str(encode_hold(instance)), str(HOLD_BASE), str(HOLD_BASE + HOLD_SPAN))
        self._hold_answer(s, jid, instance, "hold")
        self._book.remember(instance)

    def release(self, scheduler_id: str, instance: str) -> None:
        """One script: lift the hold if it is ``instance``'s (``StartTime=now``); no hold is a no-op, another
        instance's hold is Rejected."""
        self._writable()
        jid = _job_id(scheduler_id)
        s = self._script()
        s.shell(RELEASE_SCRIPT, jid, str(encode_hold(instance)), str(HOLD_BASE), str(HOLD_BASE + HOLD_SPAN))
        self._hold_answer(s, jid, instance, "release")

    def _hold_answer(self, s: Script, jid: str, instance: str, what: str) -> None:
        out = self._run(s, True)
        call = out.call(0)
        if call is not None and call.status == 4:
            state = call.stdout.strip().lower() or "not pending"
            raise Rejected(f"job {jid} is {state}: the job is no longer pending")
        if call is not None and call.status == 5:
            other = decode_hold(float(call.stdout.strip())) if call.stdout.strip().isdigit() else None
            shown = self._hold_name(other) if other else "another hold"
            verb = "already carries" if what == "hold" else "carries"
            raise Rejected(f"job {jid} {verb} hold {shown}" + ("" if what == "hold" else f", not {instance}"))
        self._need(out, 0, f"{what} {jid}", write=True)

    def _hold_name(self, canonical: str) -> str:
        return self._book.name(encode_instance(canonical)) or canonical

    # ---------------------------------------------------------------- Requeuer
    def requeue(self, scheduler_id: str) -> None:
        """Two steps in one script: enable requeue (``Requeue=1``), then ``scontrol requeue``; then disable it
        again for the next execution. A cut between the steps raises OutcomeUnknown: the restart count either
        moved or it did not, and a later requeue repeats both steps safely."""
        self._writable()
        jid = _job_id(scheduler_id)
        s = self._script()
        s.call(["scontrol", "update", f"JobId={jid}", "Requeue=1"])
        s.call(["scontrol", "requeue", jid])
        s.call(["scontrol", "update", f"JobId={jid}", "Requeue=0"])
        out = self._run(s, True)
        self._need(out, 0, f"enable requeue of {jid}", write=True)
        self._need(out, 1, f"requeue {jid}", write=True)

    def requeue_after_end(self) -> CapabilityAnswer:
        """No: an ended job cannot be requeued, so a requeue rule is refused at load (see :class:`Requeuer`)."""
        return no(
            "Slurm refuses to requeue a job that has ended when it was submitted with --no-requeue ('Job has "
            "already finished'), and dispatch submits every job so, so that Slurm never requeues one by itself; "
            "rules act on ended executions, so use resubmit (a running job can still be requeued)"
        )

    # ---------------------------------------------------------------- ShapeCheck
    def never_runs(self, spec: JobSpec) -> str | None:
        """Why no partition the spec may go to (the Placement's list, else the configured default, else the
        cluster's default partition) could ever run it, from the ``sinfo`` read at open
        (:mod:`dispatch.slurm.nodeshapes`); None when one could, or when sinfo was not read."""
        parts = self.facts.partitions
        if parts is None:
            return None
        placement = spec.extension(Placement) or Placement()
        named = placement.partition or self.settings.defaults.partition or parts.default
        if not named:
            return None
        pools = [parts.pools.get(n.strip()) for n in named.split(",") if n.strip()]
        if not pools or any(p is None for p in pools):
            return None  # a partition sinfo does not list (hidden, or a typo sbatch will name): Slurm decides
        return first_refusal([p for p in pools if p is not None], slurm_shape(spec))

    # ---------------------------------------------------------------- NodeInventory
    def schedulable_nodes(self, spec: JobSpec) -> frozenset[str] | None:
        """The nodes of the spec's partition (the Placement's, else the configured default; every partition's
        without one), in every state: ``sinfo --noheader --Node --format=%N``. A read; None when sinfo printed
        no node name."""
        placement = spec.extension(Placement) or Placement()
        partition = placement.partition or self.settings.defaults.partition
        s = self._script()
        s.call(["sinfo", "--noheader", "--Node", "--format=%N", *([f"--partition={partition}"] if partition else [])])
        call = self._need(self._run(s, False), 0, "sinfo", write=False)
        names: set[str] = set()
        for word in call.stdout.split():
            names.update(_node_names(word))
        return frozenset(names) or None

    # ---------------------------------------------------------------- CessationSignal
    def cessation(self, scheduler_ids: Sequence[str]) -> Mapping[str, Cessation]:
        """Runs the site's ``cessation.command`` with the job ids as arguments. Contract: exit 0 and print one
        line per ceasing job, ``<job id> <since epoch seconds> <reason...>``; jobs not printed are not ceasing.
        Without a command configured, no job is reported ceasing."""
        cmd = self.settings.cessation.command
        if not cmd or not scheduler_ids:
            return {}
        jids = [_job_id(i) for i in scheduler_ids]
        s = self._script()
        s.call([*cmd, *jids])
        call = self._need(self._run(s, False), 0, "cessation command", write=False)
        out: dict[str, Cessation] = {}
        for line in call.stdout.splitlines():
            parts = line.split(None, 2)
            if len(parts) >= 2 and parts[0] in jids:
                try:
                    since = float(parts[1]) - self._offset
                except ValueError:
                    continue
                out[parts[0]] = Cessation(parts[2] if len(parts) > 2 else "cessation", since)
        return out

    # ---------------------------------------------------------------- OutputReader
    def _output_path(self, scheduler_id: str, execution: int | None, stream: str) -> tuple[str, bool]:
        """The path of one execution's ``stream`` file and whether that execution has ended. The files' prefix
        comes from the pointer written at submission (:data:`SUBMIT`), so nothing depends on the scheduler
        still knowing the job; the scheduler is asked only which execution is current and whether it ended.
        Once neither squeue nor sacct has the job, it has ended, and its latest execution is the highest one
        with a file. A job submitted without a pointer is looked up in squeue/sacct (:meth:`_listed_path`)."""
        jid = _job_id(scheduler_id)
        base = self._bases.get(jid)
        if base is None:
            pointed = self._pointed(jid)
            if pointed is None:
                return self._listed_path(scheduler_id, execution, stream)
            base = self._bases[jid] = pointed[0]
        obs = self._observe([jid]).get(jid)
        if obs is not None:
            rec = obs.live or obs.history[-1]
            current = rec.restart_cnt or 0
            over = outcome_of(rec, self._evidence(rec.source)).outcome.state.ended
        else:
            restarts = (self._pointed(jid) or ("", []))[1]
            if not restarts:
                raise NotFound(f"Slurm job {jid} has no output file (it never ran, or its files were removed)")
            current, over = max(restarts), True
        r = current if execution is None else execution
        if r < 0 or r > current:
            raise NotFound(f"job {jid} has no execution {r}")
        out_path, err_path = submit.output_paths(posixpath.dirname(base), posixpath.basename(base), jid, r)
        return (out_path if stream == "stdout" else err_path), over or r < current

    def _pointed(self, jid: str) -> tuple[str, list[int]] | None:
        """The files' prefix the submission of ``jid`` recorded and the restarts that have a stdout file; None
        when there is no pointer."""
        s = self._script()
        path = self._pointer(jid)
        s.shell(POINTED, path, jid)
        call = self._need(self._run(s, False), 0, f"read the output pointer of job {jid}", write=False)
        lines = call.stdout.strip("\n").splitlines()
        if not lines or lines[0] == "NONE":
            return None
        base, why = (None, lines[0][10:]) if lines[0].startswith("UNTRUSTED ") else trust.pointed_base(lines[0])
        if base is None:
            log.warning("the output pointer %s of job %s is ignored: %s", path, jid, why)
            return None
        restarts = [int(x[: -len(".out")]) for x in lines[1:] if x.endswith(".out") and x[: -len(".out")].isdigit()]
        return base, restarts

    def _listed_path(self, scheduler_id: str, execution: int | None, stream: str) -> tuple[str, bool]:
        """The path as squeue/sacct show it (jobs submitted before submissions wrote pointers)."""
        ev_obs = self._observe([scheduler_id], full=True).get(_job_id(scheduler_id))
        if ev_obs is None:
            raise NotFound(f"Slurm job {scheduler_id} is gone")
        rec = ev_obs.live or ev_obs.history[-1]
        current = rec.restart_cnt or 0
        r = current if execution is None else execution
        if r < 0 or r > current:
            raise NotFound(f"job {rec.job_id} has no execution {r}")
        pattern = rec.stdout or (ev_obs.history[-1].stdout if ev_obs.history else "")
        out_dir = (
            posixpath.dirname(pattern)
            if pattern.startswith("/")
            else (self.settings.output.dir or self.default_output_dir)
        )
        out_path, err_path = submit.output_paths(out_dir, rec.name, rec.job_id, r)
        ended = outcome_of(rec, self._evidence("squeue")).outcome.state.ended or r < current
        return (out_path if stream == "stdout" else err_path), ended

    def _read(
        self, scheduler_id: str, execution: int | None, follow: bool, stream: str, offset: int = 0
    ) -> Iterator[bytes]:
        path, ended = self._output_path(scheduler_id, execution, stream)
        while True:
            s = self._script()
            s.shell(outputs.WHOLE, path, str(offset + 1))
            call = self._need(self._run(s, False), 0, f"read {path}", write=False)
            text = call.stdout.strip()
            if text == outputs.UNTRUSTED:
                raise Unavailable(f"{path} is not read: {outputs.UNTRUSTED_WHY}")
            if text != "MISSING" and text:
                data = base64.b64decode(text)
                offset += len(data)
                yield data
            if not follow or ended:
                return
            self._clock.sleep(1.0)
            path, ended = self._output_path(scheduler_id, execution, stream)

    def stdout(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        return self._read(scheduler_id, execution, follow, "stdout", max(0, offset))

    def stderr(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        return self._read(scheduler_id, execution, follow, "stderr", max(0, offset))

    # ---------------------------------------------------------------- OutputSlices
    def output_per_rank(self) -> bool:
        """No: every rank of an execution writes to the execution's one file (``%j.%x.<restart>.out``)."""
        return False

    def read_slices(self, slices: Sequence[OutputSlice]) -> list[OutputPiece | DispatchError]:
        """Every slice in one script: ``tail -c +OFFSET | head -c LIMIT`` of each file (one round trip for all
        of them). A file's path is looked up once per job, execution and stream and then kept, except for the
        current execution (None), whose path changes when the job is requeued."""
        answers: list[OutputPiece | DispatchError | None] = [None] * len(slices)
        s = self._script()
        calls: list[tuple[int, int, str]] = []
        for i, sl in enumerate(slices):
            try:
                if sl.rank is not None:
                    raise Unsupported("Slurm keeps one output file per execution, holding every rank's output")
                if sl.stream not in ("stdout", "stderr"):
                    raise Unsupported(f"the Slurm adapter has no stream {sl.stream!r}")
                path = self._slice_path(sl)
            except DispatchError as exc:
                answers[i] = exc
                continue
            calls.append((i, s.shell(outputs.SLICE, path, str(sl.offset), str(max(0, sl.limit))), path))
        if calls:
            out = self._run(s, False)
            for i, index, path in calls:
                try:
                    call = self._need(out, index, f"read {path}", write=False)
                    answers[i] = outputs.parse_slice(call.stdout, slices[i].offset)
                except DispatchError as exc:
                    answers[i] = exc
        return [a if a is not None else Unavailable("not read") for a in answers]

    def _slice_path(self, sl: OutputSlice) -> str:
        key = (sl.scheduler_id, sl.execution, sl.stream)
        path = self._paths.get(key)
        if path is None:
            path, _ = self._output_path(sl.scheduler_id, sl.execution, sl.stream)
            if sl.execution is not None:
                if len(self._paths) >= PATHS_KEPT:
                    self._paths.pop(next(iter(self._paths)))
                self._paths[key] = path
        return path

    def __repr__(self) -> str:
        return f"SlurmBackend({self.facts.cluster_name} {self.slurm_release}, transport={self.settings.transport})"


def _refused_before_sbatch(call: CallOutput | None) -> None:
    """Unavailable when :data:`SUBMIT` refused to run sbatch (exit 3: the pointers' directory is not the user's
    alone), naming why; nothing was submitted."""
    if call is not None and call.status == 3:
        raise Unavailable(f"sbatch not run: {(call.stderr or call.stdout).strip()[:300]}")


def _dropped_task(jid: str, accounted: Sequence[SlurmJob]) -> SlurmJob | None:
    """The reading of array task ``jid`` when sacct holds its array (``accounted``: every row of it, the tasks
    still in the array's record each named) but not the task: cancelled before it started. Slurm drops a task
    without a trace in no other way: one cancelled while it waits in the array's record leaves it, and on 24.11
    and 26.05 one cancelled while it waits in a record of its own never reaches accounting (squeue shows it
    CANCELLED for ``MinJobAge``, then forgets it), where a task that started has its own row. None for a plain
    job, or a task whose array sacct does not know (yet)."""
    array, task = split_id(jid)
    if task is None:
        return None
    rows = [j for j in accounted if split_id(j.job_id)[0] == array]
    if not rows:
        return None
    first = min(rows, key=lambda j: j.submit_time or 0)
    return SlurmJob(
        job_id=jid,
        name=first.name,
        state="CANCELLED",
        flags=frozenset(),
        description="cancelled before it started: its array's accounting holds no record of it",
        restart_cnt=0,
        submit_time=first.submit_time,
        source="sacct",
        release=first.release,
    )


def _open_chunks(scheduler_ids: Sequence[str], size: int) -> list[list[int]]:
    """The positions of ``scheduler_ids`` in scripts of at most ``size`` ids, each array's tasks together (in the
    order of their first), an array larger than ``size`` cut into runs of ``size``."""
    groups: dict[str, list[int]] = {}
    for k, sid in enumerate(scheduler_ids):
        array, task = split_id(str(sid).strip())
        groups.setdefault(array if task is not None else "", []).append(k)
    plain = groups.pop("", [])
    chunks: list[list[int]] = []
    current: list[int] = []
    for members in [*groups.values(), *[[k] for k in plain]]:
        for first in range(0, len(members), size):
            run = members[first : first + size]
            if current and len(current) + len(run) > size:
                chunks.append(current)
                current = []
            current.extend(run)
    if current:
        chunks.append(current)
    return chunks


def _release_failures(stderr: str) -> dict[str, str]:
    """The jobs whose release failed, from :data:`OPEN_GATES`'s stderr (``<expression> <message>`` per line):
    the job a message names (``... for job <id>``), else every job of its expression."""
    failed: dict[str, str] = {}
    for line in stderr.splitlines():
        expr, _, message = line.partition(" ")
        if not _EXPRESSION.fullmatch(expr):
            expr, message = "", line
        named = _FOR_JOB.search(message)
        if named is not None:
            failed[named.group(1)] = message
            continue
        for part in re.findall(r"\d+_\[[^\]]*\]|[^,]+", expr):
            try:
                ids = text_ids(part)
            except ArrayIdError:
                continue
            for jid in ids:
                failed.setdefault(jid, message)
    return failed


def _job_id(scheduler_id: str) -> str:
    """The id of a job (``<digits>``) or of a job array's task (``<array>_<task>``), checked."""
    jid = str(scheduler_id).strip()
    if not is_scheduler_id(jid):
        raise NotFound(f"{scheduler_id!r} is not a Slurm job id")
    return jid


def _id_order(scheduler_id: str) -> tuple[int, int]:
    array, task = split_id(scheduler_id)
    return int(array), -1 if task is None else task


def _node_names(hostlist: str) -> tuple[str, ...]:
    """The nodes of a job's NodeList, one name each (none when Slurm printed something else)."""
    try:
        return expand_hostlist(hostlist) if hostlist else ()
    except ParseError:
        return ()
