"""SlurmBackend: the dispatch Backend over Slurm's commands, one script per operation.

Implements Backend, Holder, Requeuer, MultiFinder, ProgressScope, BatchStarter, CessationSignal, OutputReader,
OutputSlices and ShapeCheck (not Watcher: it is polled). Errors follow :mod:`dispatch.slurm.errors`; a transport
failure is Unavailable when the script never started and, for writes, OutcomeUnknown once it may have run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from dispatch.accelerators import Inventory
from dispatch.adapterkit.programs import program
from dispatch.adapterkit.storage import storage_paths
from dispatch.capabilities import Capabilities, Capability, CapabilityAnswer
from dispatch.clock import Clock
from dispatch.declarations import Declarations
from dispatch.errors import DispatchError, NotFound
from dispatch.extensions import ExtensionPolicy
from dispatch.shapes import first_refusal
from dispatch.slurm import submit
from dispatch.slurm.core import NAME, SlurmCore, _job_id, _node_names
from dispatch.slurm.extensions import Placement
from dispatch.slurm.finding import SACCT_NAMES, Finding
from dispatch.slurm.gates import (
    HOLD_SCRIPT,
    OPEN_BATCH,
    OPEN_GATES,
    RANGES,
    RELEASE_SCRIPT,
    Gates,
    _open_chunks,
    _release_failures,
)
from dispatch.slurm.nodeshapes import slurm_shape
from dispatch.slurm.observation import ARRAY_PREFIX, FIRST_CODES_KEPT, Observation
from dispatch.slurm.outputs import PATHS_KEPT, POINTED, OutputReading
from dispatch.slurm.parse import config_seconds
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.submission import ACCEPTED, BATCH, SUBMIT, Submission
from dispatch.slurm.transport.base import Executor
from dispatch.spec import JobSpec
from dispatch.spi import Cessation, Found, JobEvidence, OutputPiece, OutputSlice, StartRequest, StoragePaths

# The names callers and tests import from here, wherever they now live.
__all__ = [
    "ACCEPTED",
    "ARRAY_PREFIX",
    "BATCH",
    "FIRST_CODES_KEPT",
    "HOLD_SCRIPT",
    "NAME",
    "OPEN_BATCH",
    "OPEN_GATES",
    "PATHS_KEPT",
    "POINTED",
    "RANGES",
    "RELEASE_SCRIPT",
    "SACCT_NAMES",
    "STOP",
    "SUBMIT",
    "SlurmBackend",
    "_open_chunks",
    "_release_failures",
]


STOP = program("dispatch.slurm", "stop.sh")
"""``programs/stop.sh``: cancel job ``$1`` (exit 1 with squeue's message when squeue does not know it). An array
task still inside its array's record is first updated alone (a no-op update), which gives it its own record: Slurm
cancels such a task without a trace otherwise (neither squeue nor sacct would show it ended)."""


class SlurmBackend:
    """One Slurm cluster. Built by :func:`dispatch.slurm.new`; preflight runs as it opens (:class:`SlurmCore`).

    The protocols' methods delegate to one part per responsibility, each over the same :class:`SlurmCore`:
    submission (:class:`~dispatch.slurm.submission.Submission`), gates, holds and requeue
    (:class:`~dispatch.slurm.gates.Gates`), observation and history (:class:`~dispatch.slurm.observation.Observation`),
    finding by marker (:class:`~dispatch.slurm.finding.Finding`) and output
    (:class:`~dispatch.slurm.outputs.OutputReading`); this class answers from the facts read at open and stops jobs,
    checks shapes and nodes and asks the cessation command itself."""

    def __init__(
        self, settings: SlurmSettings, executor: Executor, clock: Clock | None = None, *, read_only: bool = False
    ) -> None:
        self.core = SlurmCore(settings, executor, clock, read_only=read_only)
        self.settings = settings
        self.facts = self.core.facts
        self.slurm_release = self.core.slurm_release
        self.dialect = self.core.dialect
        self.default_output_dir = self.core.default_output_dir
        self._submission = Submission(self.core)
        self._gates = Gates(self.core)
        self._observation = Observation(self.core)
        self._finding = Finding(self.core)
        self._output = OutputReading(self.core, self._observation)

    @property
    def scripts_run(self) -> int:
        """Scripts run so far (one round trip each)."""
        return self.core.scripts_run

    @property
    def _executor(self) -> Executor:
        return self.core.executor

    def _pointer(self, jid: str) -> str:
        return self.core.pointer(jid)

    # ---------------------------------------------------------------- Submission, BatchStarter: Submission
    def extension_policy(self) -> ExtensionPolicy:
        return self._submission.extension_policy()

    def build(self, request: StartRequest, array: str | None = None) -> submit.SbatchJob:
        return self._submission.build(request, array)

    @property
    def max_array_size(self) -> int:
        return self._submission.max_array_size

    def default_workdir(self) -> str:
        return self._submission.default_workdir()

    def render(self, request: StartRequest) -> str:
        return self._submission.render(request)

    def start(self, request: StartRequest) -> str:
        return self._submission.start(request)

    def start_many(
        self, requests: Sequence[StartRequest], *, max_running: int | None = None
    ) -> list[str | DispatchError]:
        return self._submission.start_many(requests, max_running=max_running)

    dry_run = render

    # ---------------------------------------------------------------- Gate, Holder, Requeuer: Gates
    def open(self, scheduler_id: str) -> None:
        self._gates.open(scheduler_id)

    def open_many(self, scheduler_ids: Sequence[str]) -> list[DispatchError | None]:
        return self._gates.open_many(scheduler_ids)

    def hold(self, scheduler_id: str, instance: str) -> None:
        self._gates.hold(scheduler_id, instance)

    def release(self, scheduler_id: str, instance: str) -> None:
        self._gates.release(scheduler_id, instance)

    def requeue(self, scheduler_id: str) -> None:
        self._gates.requeue(scheduler_id)

    def requeue_after_end(self) -> CapabilityAnswer:
        return self._gates.requeue_after_end()

    # ---------------------------------------------------------------- Backend.inspect, ProgressScope: Observation
    def inspect(self, scheduler_id: str) -> JobEvidence:
        return self._observation.inspect(scheduler_id)

    def scopes_progress(self) -> bool:
        return self._observation.scopes_progress()

    def inspect_many(
        self, scheduler_ids: Sequence[str], *, progress_of: Collection[str] | None = None
    ) -> Mapping[str, JobEvidence]:
        return self._observation.inspect_many(scheduler_ids, progress_of=progress_of)

    # ---------------------------------------------------------------- Backend.find, MultiFinder: Finding
    def find(self, marker: str, since: float) -> list[Found]:
        return self._finding.find(marker, since)

    def find_many(self, markers: Sequence[str], since: float) -> Mapping[str, list[Found]]:
        return self._finding.find_many(markers, since)

    # ---------------------------------------------------------------- OutputReader, OutputSlices: OutputReading
    def stdout(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        return self._output.stdout(scheduler_id, execution, follow, offset)

    def stderr(
        self, scheduler_id: str, execution: int | None = None, follow: bool = False, offset: int = 0
    ) -> Iterator[bytes]:
        return self._output.stderr(scheduler_id, execution, follow, offset)

    def output_per_rank(self) -> bool:
        return self._output.output_per_rank()

    def read_slices(self, slices: Sequence[OutputSlice]) -> list[OutputPiece | DispatchError]:
        return self._output.read_slices(slices)

    # ---------------------------------------------------------------- the backend's own

    @property
    def name(self) -> str:
        return NAME

    @property
    def read_only(self) -> bool:
        return self.core.read_only

    def capabilities(self) -> Capabilities:
        return self.core.caps

    def declarations(self) -> Declarations:
        return self.core.decl

    def accelerators(self) -> Inventory | None:
        """The GPUs per partition, from ``sinfo`` at open."""
        return self.facts.accelerators

    def shared_storage(self) -> StoragePaths:
        return storage_paths(self.settings.shared_storage, NAME)

    def stop_job(self, scheduler_id: str) -> float:
        self.core.writable()
        jid = _job_id(scheduler_id)
        s = self.core.script()
        s.shell(STOP, jid)
        out = self.core.run(s, True)
        call = out.call(0)
        if call is not None and call.status not in (0, None) and "Invalid job id" in call.stderr:
            if self.core.caps[Capability.ACCOUNTING_HISTORY].yes and self._observation.history([jid]).get(jid):
                return 0.0  # already ended and purged: nothing left to stop
            raise NotFound(f"Slurm job {jid} is gone")
        self.core.need(out, 0, f"scancel {jid}", write=True)
        kill_wait = config_seconds(self.facts.config, "KillWait", 30.0)
        return kill_wait + config_seconds(self.facts.config, "MessageTimeout", 10.0) + 5.0

    def close(self) -> None:
        self.core.executor.close()

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

    def schedulable_nodes(self, spec: JobSpec) -> frozenset[str] | None:
        """The nodes of the spec's partition (the Placement's, else the configured default; every partition's
        without one), in every state: ``sinfo --noheader --Node --format=%N``. A read; None when sinfo printed
        no node name."""
        placement = spec.extension(Placement) or Placement()
        partition = placement.partition or self.settings.defaults.partition
        s = self.core.script()
        s.call(["sinfo", "--noheader", "--Node", "--format=%N", *([f"--partition={partition}"] if partition else [])])
        call = self.core.need(self.core.run(s, False), 0, "sinfo", write=False)
        names: set[str] = set()
        for word in call.stdout.split():
            names.update(_node_names(word))
        return frozenset(names) or None

    def cessation(self, scheduler_ids: Sequence[str]) -> Mapping[str, Cessation]:
        """Runs the site's ``cessation.command`` with the job ids as arguments. Contract: exit 0 and print one
        line per ceasing job, ``<job id> <since epoch seconds> <reason...>``; jobs not printed are not ceasing.
        Without a command configured, no job is reported ceasing."""
        cmd = self.settings.cessation.command
        if not cmd or not scheduler_ids:
            return {}
        jids = [_job_id(i) for i in scheduler_ids]
        s = self.core.script()
        s.call([*cmd, *jids])
        call = self.core.need(self.core.run(s, False), 0, "cessation command", write=False)
        out: dict[str, Cessation] = {}
        for line in call.stdout.splitlines():
            parts = line.split(None, 2)
            if len(parts) >= 2 and parts[0] in jids:
                try:
                    since = float(parts[1]) - self.core.offset
                except ValueError:
                    continue
                out[parts[0]] = Cessation(parts[2] if len(parts) > 2 else "cessation", since)
        return out

    def __repr__(self) -> str:
        return f"SlurmBackend({self.facts.cluster_name} {self.slurm_release}, transport={self.settings.transport})"
