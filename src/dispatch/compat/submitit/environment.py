"""submitit's ``JobEnvironment``: inside a job, this process's place in it, read from the variables dispatch's
adapters set (the names :mod:`dispatch.job` reads). Standard library only."""

from __future__ import annotations

import os
import socket


def _first(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _int(default: int, *names: str) -> int:
    value = _first(*names)
    return default if value is None else int(value.split("(")[0])


class JobEnvironment:
    """Where this process is: ``job_id`` (the dispatch job), ``global_rank``, ``local_rank``, ``num_tasks``,
    ``num_nodes``, ``node``, ``hostname``. Read each time from the environment (so a resumed execution reads its
    own)."""

    cluster = "dispatch"

    @property
    def job_id(self) -> str:
        return _first("DISPATCH_JOB", "DISPATCH_JOB_ID", "SLURM_JOB_ID") or ""

    @property
    def global_rank(self) -> int:
        return _int(0, "DISPATCH_RANK", "RANK", "SLURM_PROCID")

    @property
    def local_rank(self) -> int:
        return _int(0, "LOCAL_RANK", "SLURM_LOCALID")

    @property
    def num_tasks(self) -> int:
        return _int(1, "DISPATCH_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS")

    @property
    def num_nodes(self) -> int:
        per_node = _int(0, "LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE")
        return max(1, self.num_tasks // per_node) if per_node else _int(1, "SLURM_JOB_NUM_NODES", "SLURM_NNODES")

    @property
    def node(self) -> int:
        return _int(0, "NODE_RANK", "GROUP_RANK", "SLURM_NODEID")

    @property
    def hostname(self) -> str:
        return socket.gethostname()

    def __repr__(self) -> str:
        return (
            f"JobEnvironment(job_id={self.job_id}, hostname={self.hostname}, local_rank={self.local_rank}"
            f"({self.num_tasks // max(1, self.num_nodes)}), node={self.node}({self.num_nodes}),"
            f" global_rank={self.global_rank}({self.num_tasks}))"
        )
