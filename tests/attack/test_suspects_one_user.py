"""ATTACK finding: one user's own mistake makes a node a suspect for every job of the records.

``stalled`` blames the nodes (``BLAMING_CAUSES``), but the bound that judges a stall is the job's own rules'
``stalledAfter``: a sweep whose program goes quiet longer than its bound (a long evaluation, a checkpoint, its
own deadlock) ends ``stalled`` on each of its jobs. The jobs of one sweep are distinct jobs, so three of them on
one node (the default ``after = 3``) make it a suspect for a day, avoided by every resubmission of the records'
jobs, and escalated ("could never start") when too few nodes are left. This test pins today's behaviour (it
passes); what a fix would change is the expected answer (no suspect) for blames that share their cause in the
job itself."""

from __future__ import annotations

from dispatch.cluster import batch_job_id
from dispatch.outcome import Cause
from dispatch.records.nodes import NodeBlame, SuspectPolicy, suspects


def test_three_jobs_of_one_sweep_stalled_by_their_own_bound_make_a_suspect() -> None:
    ids = [batch_job_id("sweep-1", i, 0) for i in range(3)]
    blames = [NodeBlame("c", "node-7", job, f"{job}/1/0", Cause.STALLED, 100.0 + i) for i, job in enumerate(ids)]
    (suspect,) = suspects(blames, SuspectPolicy(), now=200.0)
    assert suspect.node == "node-7"  # shunned by every resubmission of the records' jobs until 100 + 86400
