"""SlurmBackend: the dispatch Backend over Slurm's commands, one script per operation.

Implements Backend, Holder, Requeuer, MultiFinder, ProgressScope, BatchStarter, CessationSignal, OutputReader,
OutputSlices and ShapeCheck (not Watcher: it is polled). Errors follow :mod:`dispatch.slurm.errors`; a transport
failure is Unavailable when the script never started and, for writes, OutcomeUnknown once it may have run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dispatch.accelerators import Inventory
from dispatch.adapterkit.programs import program
from dispatch.adapterkit.storage import storage_paths
from dispatch.capabilities import Capabilities, Capability
from dispatch.declarations import Declarations
from dispatch.errors import NotFound
from dispatch.shapes import first_refusal
from dispatch.slurm.core import NAME, _job_id, _node_names
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
from dispatch.slurm.parse import (
    config_seconds,
)
from dispatch.slurm.submission import ACCEPTED, BATCH, SUBMIT, Submission
from dispatch.spec import JobSpec
from dispatch.spi import (
    Cessation,
    StoragePaths,
)

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
"""Cancel job ``$1`` (exit 1 with squeue's message when squeue does not know it). An array task still inside its
array's record is first updated alone (a no-op update), which gives it its own record: Slurm cancels such a
task without a trace otherwise (neither squeue nor sacct would show it ended)."""


class SlurmBackend(Submission, Gates, Finding, OutputReading, Observation):
    """One Slurm cluster. Built by :func:`dispatch.slurm.new`, which runs preflight (:class:`SlurmCore`).

    Each protocol's methods live with their responsibility: submission (:mod:`dispatch.slurm.submission`), gates,
    holds and requeue (:mod:`dispatch.slurm.gates`), observation and history (:mod:`dispatch.slurm.observation`),
    finding by marker (:mod:`dispatch.slurm.finding`) and output (:mod:`dispatch.slurm.outputs`); this class adds
    the cluster's answers read at open, stop, the node and shape checks and the cessation command."""

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

    def shared_storage(self) -> StoragePaths:
        return storage_paths(self.settings.shared_storage, NAME)

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
        s = self._script()
        s.call(["sinfo", "--noheader", "--Node", "--format=%N", *([f"--partition={partition}"] if partition else [])])
        call = self._need(self._run(s, False), 0, "sinfo", write=False)
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

    def __repr__(self) -> str:
        return f"SlurmBackend({self.facts.cluster_name} {self.slurm_release}, transport={self.settings.transport})"
