"""``Executor.batch(max_running=K)`` and ``submit_many(..., max_running=K)``: the cap goes with the one batched
submission; on the local adapter (BatchThrottle no) a cap below the batch's size is refused before anything is
written, a cap at or above it caps nothing, and a block whose calls need two submissions is refused."""

from __future__ import annotations

import pytest

from dispatch import ConfigError, Executor, Unsupported
from dispatch.cluster import Cluster


def double(x: int) -> int:
    return 2 * x


def test_a_cap_the_local_adapter_cannot_keep_is_refused_and_nothing_is_submitted(cluster: Cluster) -> None:
    with Executor(cluster, poll=0.1) as ex:
        with pytest.raises(Unsupported, match="max_running=1 needs BatchThrottle"), ex.batch(max_running=1):
            futures = [ex.submit(double, i) for i in range(2)]
        assert all(isinstance(f.exception(), Unsupported) for f in futures)
        with pytest.raises(Unsupported, match="BatchThrottle"):
            ex.submit_many(double, [1, 2, 3], max_running=2)
        assert cluster.observer.list() == []
        with ex.batch(max_running=2):  # as many as the calls: nothing to cap
            both = [ex.submit(double, i) for i in range(2)]
        assert [f.result(timeout=60) for f in both] == [0, 2]


def test_a_capped_block_whose_calls_need_two_submissions_is_refused(cluster: Cluster) -> None:
    rules = {"rules": [{"cause": ["node-lost"], "action": "resubmit", "limit": 1}]}
    with Executor(cluster, poll=0.1) as ex:
        with pytest.raises(ConfigError, match="max_running.*2 different rule sets"), ex.batch(max_running=1):
            futures = [ex.submit(double, 1), ex.with_options(rules=rules).submit(double, 2)]
        assert all(isinstance(f.exception(), ConfigError) for f in futures)
        assert cluster.observer.list() == []
