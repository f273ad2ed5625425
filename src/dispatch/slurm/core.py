"""The Slurm backend's plumbing: its state, preflight at open, and running one script with its errors mapped.

:class:`SlurmCore` is what every part of :class:`~dispatch.slurm.backend.SlurmBackend` is given (submission,
gates and holds, observation, finding, output): the settings, the cluster's facts read at open, the clock offset,
and :meth:`SlurmCore.run` (a transport failure is Unavailable when the script never started and, for writes,
OutcomeUnknown once it may have run).
"""

from __future__ import annotations

import posixpath
import re

from dispatch.adapterkit.holds import InstanceBook, encode_instance
from dispatch.adapterkit.storage import storage_answer
from dispatch.capabilities import Capability
from dispatch.clock import Clock, SystemClock
from dispatch.errors import NotFound, OutcomeUnknown, ReadOnly, Unavailable
from dispatch.outcome import Evidence
from dispatch.slurm import errors as slurm_errors
from dispatch.slurm import preflight, progress, submit
from dispatch.slurm.arrayids import is_scheduler_id
from dispatch.slurm.arrayids import split as split_id
from dispatch.slurm.parse import ParseError, dialect_of, expand_hostlist
from dispatch.slurm.scripts import CallOutput, Script, ScriptOutput, parse_output
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.transport.base import Executor, TransportFailure

NAME = "slurm"


class SlurmCore:
    """One Slurm cluster's plumbing, shared by the parts of :class:`~dispatch.slurm.backend.SlurmBackend`."""

    def __init__(
        self, settings: SlurmSettings, executor: Executor, clock: Clock | None = None, *, read_only: bool = False
    ) -> None:
        self.settings = settings
        self.executor = executor
        self.clock = clock or SystemClock()
        self.read_only = read_only
        self.offset = 0.0
        self.uncertainty = 0.0
        self.scripts_run = 0
        self.book = InstanceBook()  # the names of holds this backend placed (for non-canonical instances)
        self.facts = preflight.run_preflight(settings, self.run, self.clock, read_only=read_only)
        self.offset = self.facts.offset
        self.uncertainty = self.facts.uncertainty
        self.caps = preflight.capabilities_of(self.facts).with_answer(
            Capability.SHARED_STORAGE, storage_answer(settings.shared_storage)
        )
        self.decl = preflight.declarations_of(settings, self.facts)
        self.slurm_release = self.facts.version
        self.dialect = dialect_of(self.facts.version)
        self.default_output_dir = posixpath.join(self.facts.home or "/tmp", "dispatch-output")

    def script(self) -> Script:
        s = Script(call_timeout=self.settings.timeouts.call, env=self.settings.env)
        s.deadline = self.clock.now() + self.offset + self.settings.timeouts.script
        return s

    def run(self, script: Script, write: bool, *, partial: bool = False) -> ScriptOutput:
        """Run one script. Transport failures: Unavailable if it never started (or it only read), else
        OutcomeUnknown; with ``partial``, a write script cut after it started returns what it reported (each
        call then answers for itself: those with no status are unknown)."""
        self.scripts_run += 1
        try:
            result = self.executor.run(script.render(), self.settings.timeouts.script + 10)
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

    def need(self, out: ScriptOutput, index: int, what: str, *, write: bool) -> CallOutput:
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

    def writable(self) -> None:
        if self.read_only:
            raise ReadOnly("this Slurm backend was opened read-only")

    def evidence(self, source: str) -> Evidence:
        return Evidence(source, self.clock.now())

    def pointer(self, jid: str) -> str:
        cluster = re.sub(r"[^A-Za-z0-9_.-]", "_", self.facts.cluster_name) or "slurm"
        return submit.pointer_path(self.settings.output.dir or self.default_output_dir, cluster, jid)

    def progress_root(self) -> str:
        """The cluster's progress directory (:func:`dispatch.slurm.progress.root`)."""
        cluster = re.sub(r"[^A-Za-z0-9_.-]", "_", self.facts.cluster_name) or "slurm"
        return progress.root(self.settings.output.dir or self.default_output_dir, cluster)

    def hold_name(self, canonical: str) -> str:
        return self.book.name(encode_instance(canonical)) or canonical


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
