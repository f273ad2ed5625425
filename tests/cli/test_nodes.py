"""``dispatch nodes``: the suspect nodes of a cluster from the configured record store, and ``nodes clear``."""

from __future__ import annotations

import time

from dispatch.cli.exitcodes import Exit
from dispatch.outcome import Cause
from dispatch.records import SQLiteRecords
from dispatch.records.nodes import NodeBlame

from .conftest import Env
from .test_cli import one_line_error


def blame(node: str, job: str, ago: float, cluster: str = "hpc") -> NodeBlame:
    return NodeBlame(cluster, node, job, f"1.{job}.0", Cause.NODE_LOST, time.time() - ago)


def configure(cli: Env, suspects: str) -> None:
    cli.config.write_text(
        'default = "hpc"\n[clusters.hpc]\nadapter = "memory"\n'
        + (f"[clusters.hpc.suspects]\n{suspects}\n" if suspects else "")
    )


def test_nodes_lists_the_suspects_by_the_clusters_policy_and_clear_ends_one(cli: Env) -> None:
    configure(cli, 'after = 2\nwindow = "1h"\nttl = "2h"')
    cli.records.parent.mkdir(parents=True)
    store = SQLiteRecords(cli.records)
    store.add_node_blames(
        [
            blame("n1", "a", 600),
            blame("n1", "b", 60),  # two blames within the hour: a suspect for two hours after the second
            blame("n2", "c", 60),  # once: not a suspect
            blame("n3", "d", 3 * 3600),
            blame("n3", "e", 3 * 3600 - 10),  # a suspect once, its time to live over
            blame("n1", "f", 60, cluster="other"),
        ]
    )
    out = cli.json("nodes")
    assert out["cluster"] == "hpc" and out["policy"] == {"after": 2, "window": 3600.0, "ttl": 7200.0}
    (s,) = out["suspects"]
    assert s["node"] == "n1" and s["count"] == 2 and [b["jobId"] for b in s["blames"]] == ["a", "b"]
    assert abs(s["until"] - (time.time() - 60 + 7200)) < 30
    text = cli.run("nodes")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].split() == ["NODE", "BLAMES", "CAUSES", "JOBS", "UNTIL"]
    assert text.stdout.splitlines()[1].split()[:4] == ["n1", "2", "node-lost", "a,"]

    cleared = cli.run("nodes", "clear", "n1")
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout.strip() == "cleared 2 blames of node n1 on cluster hpc"
    assert cli.json("nodes")["suspects"] == []
    assert [b.cluster for b in store.node_blames("other", 0.0)] == ["other"]  # another cluster's stay
    again = cli.run("nodes", "clear", "n1")
    assert again.returncode == Exit.NOT_FOUND
    assert "node n1 of cluster hpc has no blame to clear" in one_line_error(again.stderr)
    store.close()


def test_nodes_without_records_lists_none_and_the_policy_is_checked(cli: Env) -> None:
    configure(cli, "")
    assert cli.json("nodes")["suspects"] == [] and cli.json("nodes")["policy"]["after"] == 3
    assert not cli.records.exists(), "a read command creates no record store"
    configure(cli, "after = -1")
    bad = cli.run("nodes")
    assert bad.returncode != 0 and "clusters.hpc.suspects.after" in one_line_error(bad.stderr)
    configure(cli, "often = 2")
    assert "clusters.hpc.suspects.often" in one_line_error(cli.run("nodes").stderr)
    configure(cli, "")
    assert "needs the node" in one_line_error(cli.run("nodes", "clear").stderr)
