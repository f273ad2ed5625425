"""The local adapter refuses what this host can never give before anything is recorded: the ranks' CPUs above
the host's, the nodes' memory above its MemTotal."""

from __future__ import annotations

import os

from dispatch.cli.exitcodes import Exit

from .conftest import Env


def test_more_cpus_or_memory_than_this_host_has_is_refused_before_recording(cli: Env) -> None:
    cpus = os.cpu_count() or 1
    for argv, line in (
        (["-p", "2", "--cpus-per-proc", str(cpus)], f"refused: 2 rank(s) x {cpus} CPU(s) asked, this host has {cpus}"),
        (["-N", "2", "--mem-per-node", "1024T"], "refused: 2 node(s) x 1024T of memory asked, this host has "),
    ):
        p = cli.run("run", *argv, "--", "true")
        assert p.returncode == Exit.REFUSED, (argv, p.stderr)
        assert cli.json("status", "--all") == [], argv
        assert p.stderr.startswith(f"dispatch: error: {line}") and len(p.stderr.splitlines()) == 1, p.stderr
