"""The rank environment's two forms agree: the values the local adapter computes and the shell lines a batch
scheduler's rank runs give every rank the same variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dispatch.adapterkit.rankenv import (
    RANK_VARIABLES,
    RankLayout,
    port_expression,
    rank_env,
    rank_prelude,
    rank_wrapper,
    rendezvous_port,
)

DUMP = "import json, os, sys; print(json.dumps({k: os.environ.get(k) for k in sys.argv[1:]}))"


def test_ranks_go_node_by_node() -> None:
    layout = RankLayout(2, 3)
    env = rank_env(layout, 4, master_addr="10.0.0.1", master_port=29500, node="n2")
    assert env == {
        "RANK": "4",
        "WORLD_SIZE": "6",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "3",
        "NODE_RANK": "1",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "DISPATCH_RANK": "4",
        "DISPATCH_WORLD_SIZE": "6",
        "DISPATCH_NODE": "n2",
    }
    assert tuple(env) == RANK_VARIABLES


def test_bad_layouts_and_ranks_are_refused() -> None:
    with pytest.raises(ValueError):
        RankLayout(0, 1)
    with pytest.raises(ValueError):
        rank_env(RankLayout(1, 2), 2, master_addr="a", master_port=1, node="n")
    with pytest.raises(ValueError):
        port_expression("$(touch /tmp/x)")


@pytest.mark.parametrize("rank", range(6))
def test_the_shell_form_gives_each_rank_what_the_value_form_gives(rank: int) -> None:
    """Run the wrapper as srun would: one task with Slurm's per-task variables."""
    layout = RankLayout(2, 3)
    prelude = rank_prelude(
        layout,
        rank='"$SLURM_PROCID"',
        local_rank='"$SLURM_LOCALID"',
        node_rank='"$SLURM_NODEID"',
        master_addr='"$SLURM_LAUNCH_NODE_IPADDR"',
        master_port=port_expression("SLURM_JOB_ID"),
        node='"$SLURMD_NODENAME"',
    )
    node_rank, local = divmod(rank, 3)
    task = {
        "PATH": os.environ["PATH"],
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(local),
        "SLURM_NODEID": str(node_rank),
        "SLURM_LAUNCH_NODE_IPADDR": "10.1.2.3",
        "SLURM_JOB_ID": "123456",
        "SLURMD_NODENAME": f"gpu{node_rank}",
    }
    argv = [*rank_wrapper(prelude), sys.executable, "-c", DUMP, *RANK_VARIABLES]
    got = json.loads(subprocess.run(argv, env=task, capture_output=True, text=True, check=True).stdout)
    want = rank_env(layout, rank, master_addr="10.1.2.3", master_port=20000 + 123456 % 12000, node=f"gpu{node_rank}")
    assert got == want


def test_the_wrapper_passes_the_words_after_it_unchanged() -> None:
    odd = ["it's", "a b", "$HOME", "`id`", "x\ny", "", "-n"]
    prelude = rank_prelude(
        RankLayout(1, 1), rank="0", local_rank="0", node_rank="0", master_addr="127.0.0.1", master_port="1", node="h"
    )
    code = "import json, sys; print(json.dumps(sys.argv[1:]))"
    out = subprocess.run([*rank_wrapper(prelude), sys.executable, "-c", code, *odd], capture_output=True, text=True)
    assert json.loads(out.stdout) == odd


def test_a_rendezvous_port_is_stable_and_in_range() -> None:
    assert rendezvous_port("4711") == rendezvous_port("4711")
    assert all(20000 <= rendezvous_port(str(i)) < 32000 for i in range(200))


def test_the_module_needs_the_standard_library_only() -> None:
    """The local launcher loads it by path, importing nothing of dispatch."""
    import dispatch.adapterkit.rankenv as mod

    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('r', {mod.__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); sys.modules['r'] = m; spec.loader.exec_module(m)\n"
        "print(sorted(n for n in sys.modules if n.startswith('dispatch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={})
    assert out.stdout.strip() == "[]"
