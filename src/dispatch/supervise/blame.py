"""Bad nodes: which nodes an ending blames, and which nodes a resubmission avoids.

An execution that ended with a cause in :data:`BLAMING_CAUSES` blames the nodes it ran on
(``ExecutionRecord.nodes``, as the adapter reported them: Slurm's NodeList, the Kubeflow pods' nodeName, the
Grid Engine host). Where the scheduler does not say which of a multi-node execution's nodes failed, every node
of the execution is blamed.

A new submission (a ``resubmit`` or ``hold`` decision carried out) avoids, where the cluster's NodeExclusion
is yes:

* the nodes the job's own endings blamed, when the rule that decided says ``excludeBlamedNodes: true``;
* the cluster's suspects: nodes blamed by :attr:`SuspectPolicy.after` distinct jobs (at least two: one job's endings,
  however many, never make a suspect) within :attr:`SuspectPolicy.window`, for :attr:`SuspectPolicy.ttl` after the
  blame that made them suspect, unless a human cleared them (``dispatch nodes clear``).

The excluded nodes travel in the start intent's ``exclude`` argument (written before the call, so a retried or
resolved start keeps them) to :attr:`dispatch.spi.StartRequest.exclude`. When the exclusions leave fewer
nodes than the job needs among those that could run it (:class:`dispatch.spi.NodeInventory`), the decision is
escalated instead: a job that can never start is never submitted.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Iterable

from dispatch.capabilities import Capabilities, Capability
from dispatch.errors import DispatchError
from dispatch.outcome import Cause
from dispatch.records.model import Action, JobRecord
from dispatch.records.nodes import SUSPECT_CAUSES, NodeBlame, NodeBlames, Suspect, SuspectPolicy, suspects
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec
from dispatch.supervise.step import Step, StepKind

__all__ = [
    "BLAMING_CAUSES",
    "Exclusions",
    "Suspect",
    "SuspectPolicy",
    "blames_of",
    "exclusion_for",
    "newly_ended",
    "suspects",
]

log = logging.getLogger("dispatch.supervise.blame")
PRUNE_EVERY = 3600.0
"""Seconds between two prunes of a cluster's old node blames (:meth:`Exclusions.prune`)."""

BLAMING_CAUSES: frozenset[Cause] = frozenset({Cause.NODE_LOST, Cause.LAUNCH_FAILED, Cause.STALLED})
"""The causes whose ending blames the execution's nodes. Not ``not-launchable`` (the job's own program,
working directory or image does not exist: no node could have run it), nor an exit, a timeout or memory (the
job's own doing)."""


def blames_of(
    job: JobRecord,
    cluster: str,
    *,
    only: Iterable[str] | None = None,
    causes: frozenset[Cause] = BLAMING_CAUSES,
) -> list[NodeBlame]:
    """The blames ``job``'s ended executions make (of the executions named in ``only``, when given).
    ``causes``: the blaming causes (the product always uses :data:`BLAMING_CAUSES`; the simulator plants a
    wider set to prove it notices)."""
    wanted = None if only is None else set(only)
    out: list[NodeBlame] = []
    for sub in job.submissions:
        for ex in sub.executions:
            if wanted is not None and ex.identity not in wanted:
                continue
            cause = ex.outcome.cause
            if cause in causes and ex.outcome.ended and ex.nodes:
                at = ex.ended_at if ex.ended_at is not None else ex.outcome.evidence.observed_at
                assert cause is not None
                out += [NodeBlame(cluster, node, job.id, ex.identity, cause, at) for node in ex.nodes]
    return out


def newly_ended(before: JobRecord, after: JobRecord) -> list[str]:
    """Identities of executions that ``after`` shows ended and ``before`` did not."""
    ended = {ex.identity for s in before.submissions for ex in s.executions if ex.outcome.ended}
    return [
        ex.identity for s in after.submissions for ex in s.executions if ex.outcome.ended and ex.identity not in ended
    ]


def exclusion_for(
    job: JobRecord,
    step: Step,
    rules: RuleSet,
    *,
    suspect_nodes: Callable[[], frozenset[str]],
    schedulable: Callable[[JobSpec], frozenset[str] | None],
    cluster: str,
    causes: frozenset[Cause] = BLAMING_CAUSES,
) -> Step:
    """``step`` with the nodes its start must avoid (``args["exclude"]``), or an escalation when they leave the
    job nowhere to run. Only ``act start`` steps change:

    * a new submission (a decision carried out): the job's blamed nodes if the deciding rule says
      ``excludeBlamedNodes``, and the cluster's suspects;
    * a start made again for a submission without its object: the exclusion of the submission's last start.
    """
    if step.kind is not StepKind.ACT or step.action is not Action.START or step.submission is None:
        return step
    if not step.new_submission:
        for it in reversed(job.intents):
            if it.action is Action.START and it.submission == step.submission and it.args.get("exclude"):
                return dataclasses.replace(step, args={**step.args, "exclude": list(it.args["exclude"])})
        return step
    decision = next((d for d in job.decisions if d.seq == step.decision), None)
    rule = next((r for r in rules.rules if decision is not None and r.name == decision.rule), None)
    exclude = set(suspect_nodes())
    if rule is not None and rule.exclude_blamed_nodes:
        exclude |= {b.node for b in blames_of(job, cluster, causes=causes)}
    if not exclude:
        return step
    nodes = schedulable(job.spec)
    if nodes is not None and len(nodes - exclude) < job.spec.nodes:
        left = sorted(nodes - exclude)
        return Step(
            StepKind.ESCALATE,
            f"the resubmission would exclude {', '.join(sorted(exclude))} and leave "
            f"{', '.join(left) if left else 'no node'} of the {len(nodes)} that could run it, "
            f"fewer than the {job.spec.nodes} it needs: it could never start",
            cause=decision.cause if decision is not None else Cause.UNKNOWN,
            submission=step.submission - 1,
            close=True,
        )
    return dataclasses.replace(step, args={**step.args, "exclude": sorted(exclude)})


class Exclusions:
    """The supervisor's side of bad nodes for one cluster: it amends the steps :func:`next_step` chooses
    (:meth:`amend`) and records the blames of endings the fold saw (:meth:`note`).

    Suspects are read from the records at most once a cycle, and only in a cycle that makes a new submission;
    the cluster's nodes are asked of the backend at most once a cycle per distinct spec. Nothing is excluded,
    read or asked where NodeExclusion is not yes.

    :attr:`blaming`, :attr:`distinct_jobs` and :attr:`suspect_causes` are the product's rules
    (:data:`BLAMING_CAUSES`; suspects count distinct jobs, and only the scheduler's evidence:
    :data:`~dispatch.records.nodes.SUSPECT_CAUSES`), class attributes so that the simulator can plant a subclass
    that breaks them."""

    blaming: frozenset[Cause] = BLAMING_CAUSES
    distinct_jobs: bool = True
    suspect_causes: frozenset[Cause] = SUSPECT_CAUSES

    def __init__(
        self,
        backend: object,
        records: object,
        cluster: str,
        capabilities: Capabilities,
        policy: SuspectPolicy | None = None,
    ) -> None:
        from dispatch.spi import NodeInventory

        self.enabled = capabilities[Capability.NODE_EXCLUSION].yes
        self.records = records
        self.cluster = cluster
        self.policy = policy or SuspectPolicy()
        self.inventory = backend if isinstance(backend, NodeInventory) else None
        self._now = 0.0
        self._next_prune = -math.inf
        self._suspects: frozenset[str] | None = None
        self._nodes: dict[int, tuple[JobSpec, frozenset[str] | None]] = {}
        """The backend's answer per spec (by identity, the spec kept alive with it), for one cycle."""

    def begin_cycle(self, now: float) -> None:
        self._now = now
        self._suspects = None
        self._nodes = {}
        if now >= self._next_prune:
            self.prune(now)

    def prune(self, now: float) -> int:
        """Delete this cluster's blames too old to count (before ``window + ttl`` ago: :meth:`current_suspects`
        never reads them), at most once every :data:`PRUNE_EVERY` seconds from :meth:`begin_cycle`; how many
        went. A failure is logged and tried again at the next interval: blames left are only read past."""
        self._next_prune = now + PRUNE_EVERY
        if not isinstance(self.records, NodeBlames):
            return 0
        try:
            return self.records.prune_node_blames(self.cluster, now - self.policy.window - self.policy.ttl)
        except DispatchError as exc:
            log.warning("node blames of %s not pruned: %s", self.cluster, exc)
            return 0

    def suspect_nodes(self) -> frozenset[str]:
        if self._suspects is None:
            self._suspects = frozenset(s.node for s in self.current_suspects(self._now))
        return self._suspects

    def current_suspects(self, now: float) -> list[Suspect]:
        if not self.enabled or self.policy.after <= 0 or not isinstance(self.records, NodeBlames):
            return []
        since = now - self.policy.window - self.policy.ttl
        return suspects(
            self.records.node_blames(self.cluster, since),
            self.policy,
            now,
            distinct_jobs=self.distinct_jobs,
            causes=self.suspect_causes,
        )

    def schedulable(self, spec: JobSpec) -> frozenset[str] | None:
        if self.inventory is None:
            return None
        known = self._nodes.get(id(spec))
        if known is None:
            try:
                nodes = self.inventory.schedulable_nodes(spec)
            except DispatchError:
                nodes = None  # not known this cycle: the start goes ahead; the scheduler refuses what cannot run
            known = self._nodes[id(spec)] = (spec, nodes)
        return known[1]

    def amend(self, job: JobRecord, step: Step, rules: RuleSet) -> Step:
        if not self.enabled:
            return step
        return exclusion_for(
            job,
            step,
            rules,
            suspect_nodes=self.suspect_nodes,
            schedulable=self.schedulable,
            cluster=self.cluster,
            causes=self.blaming,
        )

    def note(self, before: JobRecord, after: JobRecord, *, first: bool) -> None:
        """Record the blames of the executions ``after`` shows ended and ``before`` did not (all its ended
        executions when ``first``: a supervisor that starts or takes the job over, so a blame a dead supervisor
        did not write is written now; writing a blame again changes nothing)."""
        if not self.enabled or not isinstance(self.records, NodeBlames):
            return
        if first:
            blames = blames_of(after, self.cluster, causes=self.blaming)
        elif after is before:
            return
        else:
            ended = newly_ended(before, after)
            blames = blames_of(after, self.cluster, only=ended, causes=self.blaming) if ended else []
        if blames:
            self.records.add_node_blames(blames)
