"""One submission to one ``qsub`` job: its options and its job script (built with the adapter kit).

* The start gate is a user hold (``-h``); the job name is the submission's marker (``-N``), which ``find``
  searches in qstat and qacct.
* Output: ``<dir>/<marker>.<job id>.out`` and ``.err`` (``$JOB_ID`` expanded by Grid Engine).
* Every job gets the kit's rank environment (:mod:`dispatch.adapterkit.rankenv`) as rank 0 of 1, its
  rendezvous at 127.0.0.1 on a port derived from ``$JOB_ID``.
* A time limit is ``-l h_rt``; the working directory ``-wd``; the job runs under ``/bin/bash`` (``-S``).
* The kit's launch checks (:func:`dispatch.adapterkit.jobscript.launch_checks`) run before the ``exec``: a
  working directory that cannot be entered or a program that is not an executable file ends the job with
  :data:`~dispatch.adapterkit.jobscript.LAUNCH_FAILED_EXIT`, read as ``launch-failed``.
* One slot per job: several nodes or several processes per node need a parallel environment, which this
  adapter does not use (Unsupported, with that reason).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

from dispatch.adapterkit import render_job_script
from dispatch.adapterkit.jobscript import launch_checks
from dispatch.adapterkit.rankenv import RankLayout, port_expression, rank_prelude
from dispatch.errors import SpecError, Unsupported
from dispatch.gridengine.settings import GridEngineSettings
from dispatch.spi import StartRequest

_MARKER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True)
class QsubJob:
    argv: tuple[str, ...]
    script: str
    output_dir: str


def build(request: StartRequest, settings: GridEngineSettings, output_dir: str) -> QsubJob:
    spec = request.spec
    if spec.nodes != 1 or spec.procs_per_node != 1:
        raise Unsupported(
            f"{spec.nodes} node(s) x {spec.procs_per_node} process(es): the gridengine adapter runs one-slot jobs "
            "(several need a parallel environment, which it does not use)"
        )
    if not _MARKER.fullmatch(request.marker):
        raise SpecError("marker", f"{request.marker!r} cannot be a Grid Engine job name")
    base = f"{output_dir.rstrip('/')}/{request.marker}.$JOB_ID"
    workdir = spec.working_dir or os.getcwd()
    argv = [
        "qsub",
        "-terse",
        "-h",
        "-r",
        "n",
        "-N",
        request.marker,
        "-S",
        "/bin/bash",
        "-o",
        base + ".out",
        "-e",
        base + ".err",
        "-wd",
        workdir,
    ]
    if settings.queue:
        argv += ["-q", settings.queue]
    if spec.time_limit is not None:
        argv += ["-l", f"h_rt={max(1, math.ceil(spec.time_limit))}"]
    # one slot: rank 0 of 1, its rendezvous on this host
    prelude = rank_prelude(
        RankLayout(1, 1),
        rank="0",
        local_rank="0",
        node_rank="0",
        master_addr="127.0.0.1",
        master_port=port_expression("JOB_ID"),
        node='"${HOSTNAME:-$(hostname)}"',
    )
    script = render_job_script(
        request, scheduler_id='"$JOB_ID"', restart="0", prelude=prelude, checks=launch_checks(spec.command, workdir)
    )
    return QsubJob(tuple(argv), script, output_dir)
