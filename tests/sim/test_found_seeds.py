"""Seeds a sweep found failing, each run as ``python -m dispatch.sim --seed N`` runs it, with what broke.

Each seed stays here once its cause is fixed, so that the same path cannot break again unseen. The shape and the
``unmatched`` policy are the ones the CLI gives the seed (odd seeds Kubeflow, seeds not divisible by 3
``escalate``).
"""

from __future__ import annotations

import pytest

from dispatch.sim.world import Config, run

FOUND = {
    10504: "liveness: a user whose release of a stopped, purged job's hold answered NotFound stopped there, "
    "and never lifted the holds of a live job (the simulator's user, not the product)",
    14545: "unknown-is-not-an-ending: a status read started the unknown clock, every supervisor was down while "
    "the object answered again, and a second short no-answer after the gap was taken for one long one",
    20334: "unknown-is-not-an-ending: a supervisor read a spurious unknown and died in an outage; its successor "
    "read the next partition a window later and closed the running job on the first supervisor's clock",
}


@pytest.mark.parametrize("seed", sorted(FOUND))
def test_a_found_seed_runs_clean_and_settles(seed: int) -> None:
    config = Config(
        seed=seed,
        shape="slurm" if seed % 2 == 0 else "kubeflow",
        unmatched="escalate" if seed % 3 else "close",
    )
    result = run(config)
    assert result.violations == [], (FOUND[seed], result.violations[:3])
    assert result.settled, (FOUND[seed], result.unsettled)
