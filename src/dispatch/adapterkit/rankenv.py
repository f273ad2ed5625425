"""The rank environment: the variables every rank of every adapter gets, so one torchrun-style script runs
unchanged on the local adapter, Slurm, Grid Engine and Kubeflow's torch runtime (which sets the same names
through torchrun).

=====================  ==============================================================================
``RANK``               the rank, 0 .. ``WORLD_SIZE``-1, node by node: ``NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``
``WORLD_SIZE``         ``nodes * procs_per_node``
``LOCAL_RANK``         the rank on its node, 0 .. ``LOCAL_WORLD_SIZE``-1
``LOCAL_WORLD_SIZE``   ``procs_per_node``
``NODE_RANK``          the node's number, 0 .. nodes-1 (``GROUP_RANK`` too, as torchrun sets it)
``MASTER_ADDR``        where rank 0 runs, for the rendezvous
``MASTER_PORT``        a port for the rendezvous, the same on every rank of the execution
``DISPATCH_RANK``      ``RANK``; ``DISPATCH_WORLD_SIZE``: ``WORLD_SIZE``; ``DISPATCH_NODE``: the node's name
=====================  ==============================================================================

Two forms of one computation. :func:`rank_env` gives the values when the adapter knows them before the rank
starts (the local adapter); :func:`rank_prelude` gives shell lines that compute them where the rank starts,
from shell expressions the adapter writes (a batch scheduler: ``"$SLURM_PROCID"``), with the layout's numbers
written in. Nothing here is user input: the layout is two integers and the expressions are the adapter's own
text; :func:`rank_prelude` still quotes every literal it writes.

This module imports the standard library only: the local adapter's launcher, which runs by path and imports
nothing of dispatch, loads it by path too.
"""

from __future__ import annotations

import shlex
import zlib
from collections.abc import Mapping
from dataclasses import dataclass

RANK_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "DISPATCH_RANK",
    "DISPATCH_WORLD_SIZE",
    "DISPATCH_NODE",
)
"""Every variable :func:`rank_env` and :func:`rank_prelude` set, in the order they set them."""
PORT_BASE = 20000
PORT_SPAN = 12000
"""Rendezvous ports are PORT_BASE .. PORT_BASE + PORT_SPAN - 1 (20000-31999): below Linux's default ephemeral range
(32768-60999), from which the kernel picks the local port of every outgoing connection on the node. A port in
that range can be held, for a moment, by any connection of any process on rank 0's node, and rank 0's listen then
fails (docs/concepts.md)."""


@dataclass(frozen=True)
class RankLayout:
    """``nodes`` nodes of ``procs_per_node`` ranks each."""

    nodes: int
    procs_per_node: int

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.procs_per_node < 1:
            raise ValueError(f"a layout needs at least one node and one rank per node, not {self}")

    @property
    def world_size(self) -> int:
        return self.nodes * self.procs_per_node


def rank_env(layout: RankLayout, rank: int, *, master_addr: str, master_port: int | str, node: str) -> dict[str, str]:
    """The variables of rank ``rank`` (ValueError outside the layout). ``node`` is the name of its node."""
    if not 0 <= rank < layout.world_size:
        raise ValueError(f"rank {rank} is not in a world of {layout.world_size}")
    node_rank, local_rank = divmod(rank, layout.procs_per_node)
    values = (rank, layout.world_size, local_rank, layout.procs_per_node, node_rank, node_rank, master_addr,
              master_port, rank, layout.world_size, node)  # fmt: skip
    return {name: str(value) for name, value in zip(RANK_VARIABLES, values, strict=True)}


def rank_prelude(
    layout: RankLayout,
    *,
    rank: str,
    local_rank: str,
    node_rank: str,
    master_addr: str,
    master_port: str,
    node: str,
) -> list[str]:
    """Shell lines that export :data:`RANK_VARIABLES` where a rank starts. Each keyword is a shell expression
    the adapter writes (trusted text, expanded there: ``'"$SLURM_PROCID"'``); the layout's numbers are written
    in. The same values as :func:`rank_env` when the expressions expand to what it computes."""
    world = shlex.quote(str(layout.world_size))
    per_node = shlex.quote(str(layout.procs_per_node))
    exprs: Mapping[str, str] = {
        "RANK": rank,
        "WORLD_SIZE": world,
        "LOCAL_RANK": local_rank,
        "LOCAL_WORLD_SIZE": per_node,
        "NODE_RANK": node_rank,
        "GROUP_RANK": "$NODE_RANK",
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": master_port,
        "DISPATCH_RANK": "$RANK",
        "DISPATCH_WORLD_SIZE": world,
        "DISPATCH_NODE": node,
    }
    return [f"export {name}={exprs[name]}" for name in RANK_VARIABLES]


def rendezvous_port(key: str) -> int:
    """A rendezvous port derived from ``key`` (a job id), spread over 20000-31999 (:data:`PORT_SPAN`): the same on
    every rank without any of them asking another. Adapters whose id is only known where the rank runs compute
    ``20000 + id % 12000`` in the shell instead (:func:`port_expression`)."""
    return PORT_BASE + zlib.crc32(key.encode()) % PORT_SPAN


def port_expression(numeric_id: str) -> str:
    """The shell expression of a rendezvous port from the name of a variable holding a numeric job id
    (``SLURM_JOB_ID``): ``20000 + id % 12000``, so up to 12000 consecutive jobs never share one."""
    if not numeric_id.isidentifier():
        raise ValueError(f"{numeric_id!r} is not a variable name")
    return f'"$(( {PORT_BASE} + {numeric_id} % {PORT_SPAN} ))"'


def rank_wrapper(prelude: list[str], name: str = "dispatch-rank") -> tuple[str, ...]:
    """Launcher words that run ``prelude`` (from :func:`rank_prelude`) in each rank's own shell and then
    ``exec`` the words after them, unchanged: ``/bin/bash -c '<prelude>; exec "$@"' <name>``."""
    return ("/bin/bash", "-c", "\n".join([*prelude, 'exec "$@"']), name)
