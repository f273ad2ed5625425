"""A hang on the real Slurm 22.05 cluster: examples/train_ddp.py on both nodes, whose rank 1 stops without a word
at step 45 (the other rank then waits in the next all-reduce), under a supervisor process with a stall rule. The
supervisor judges it stalled no earlier than the bound and within a cycle of it, ends it through scancel, records
the cause ``stalled`` and resubmits; the new submission resumes from the step-40 checkpoint and ends with the
parameters of the uninterrupted run, bit for bit. Fails when the cluster is down."""

from __future__ import annotations

import pytest

import dispatch
from dispatch.outcome import Cause, State
from dispatch.records import SQLiteRecords
from dispatch.records.model import Action
from dispatch.rules import RuleSet
from dispatch.spec import JobSpec

from . import scenarios
from .harness import Case

pytestmark = [pytest.mark.slurm_local, pytest.mark.training]
CLUSTER = "local"
BOUND = 10.0
POLL = 1.0  # Case.supervise's --poll
RULES = {
    "unmatched": "escalate",
    "rules": [{"name": "hang", "cause": ["stalled"], "stalledAfter": f"{BOUND:g}s", "action": "resubmit", "limit": 2}],
}


class HangCase(Case):
    def spec(self) -> JobSpec:
        base = super().spec()
        env = {**base.env, "DISPATCH_PROGRESS_INTERVAL": "0.5"}
        return JobSpec((*base.command, "--hang-at", "45", "--hang-rank", "1"), nodes=base.nodes,
                       procs_per_node=base.procs_per_node, env=env, extensions=base.extensions)  # fmt: skip

    def submit(self) -> str:
        with dispatch.open("slurm", adapter=self.settings, records=SQLiteRecords(self.db)) as cluster:
            self.job_id = cluster.operator.submit(self.spec(), rules=RuleSet.from_data(RULES))
        return self.job_id


def test_a_rank_that_hangs_is_ended_as_stalled_and_the_resubmission_reaches_the_same_parameters() -> None:
    ref = scenarios.reference(CLUSTER)
    case = HangCase(CLUSTER, "hang", delay=0.1)
    try:
        case.submit()
        case.supervise()
        res = case.finish()
        first = res.job.submissions[0]
        assert first.outcome is not None, case.describe()
        assert (first.outcome.state, first.outcome.cause) == (State.FAILED, Cause.STALLED), case.describe()
        (stop,) = [i for i in res.job.intents if i.action is Action.STOP]
        assert stop.args["stalled"] == first.executions[-1].identity
        assert stop.args["ranks"], stop.args
        # judged no earlier than the bound, and within one cycle of it (plus the cycle's own script time)
        assert BOUND < float(stop.args["silentFor"]) <= BOUND + POLL + 3.0, stop.args
        assert [d.cause for d in res.job.decisions] == [Cause.STALLED]
        assert res.job.submissions[-1].outcome is not None and res.job.submissions[-1].outcome.state is State.SUCCEEDED
        assert any(r == 40 for _, r in res.handoffs()), res.handoffs()  # resumed from the step-40 checkpoint
        assert res.params == ref.params, "the final parameters differ from the uninterrupted run's"
        res.assert_no_overlap()
        print(f"stall judged after {float(stop.args['silentFor']):.1f}s of silence (bound {BOUND:g}s)")
    finally:
        case.cleanup(keep=False)
