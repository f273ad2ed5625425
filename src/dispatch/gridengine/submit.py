"""One submission to one ``qsub`` job: its options and its job script (built with the adapter kit).

* The start gate is a user hold (``-h``); the job name is the submission's marker (``-N``), which ``find``
  searches in qstat and qacct.
* Output: ``<dir>/<marker>.<job id>.out`` and ``.err`` (``$JOB_ID`` expanded by Grid Engine).
* Every job gets the kit's rank environment (:mod:`dispatch.adapterkit.rankenv`) as rank 0 of 1, its
  rendezvous at 127.0.0.1 on a port derived from ``$JOB_ID``.
* A time limit is ``-l h_rt``; the working directory ``-wd``; the job runs under ``/bin/bash`` (``-S``).
* The spec's ``resources`` are complexes, whose names are settings (:class:`Complexes`):
  ``-l gpu=N,mem_free=<M>M,h_rss=<M>M`` per slot, ``-l exclusive=true``, and CPUs per process as that many
  slots of the ``cpuPe`` parallel environment on one host (``-pe <pe> C``; Grid Engine multiplies per-slot
  consumables by the slots, so GPUs and memory are divided among them: :func:`resource_options`). Memory is
  resident memory, never ``h_vmem`` by default: a CUDA process maps address ranges far larger than the memory
  it uses, and ``h_vmem`` (a virtual-memory limit) kills it (docs/adapters/gridengine.md: what 8.1.9 enforces).
* Progress: the rank's ``DISPATCH_PROGRESS_DIR`` is ``<dir>/<marker>.<job id>.progress``, beside the output
  (:mod:`dispatch.gridengine.progress`).
* Excluded hosts (a resubmission avoiding blamed or suspect nodes) are ``-l hostname=!(a|b)``
  (:func:`exclusion_options`), a Boolean host expression of the ``hostname`` complex.
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
from dispatch.adapterkit.private import umask_line
from dispatch.adapterkit.rankenv import RankLayout, port_expression, rank_prelude
from dispatch.errors import SpecError, Unsupported
from dispatch.gridengine import progress
from dispatch.gridengine.settings import Complexes, GridEngineSettings
from dispatch.resources import Resources
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

_MARKER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
_HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?")


@dataclass(frozen=True)
class QsubJob:
    argv: tuple[str, ...]
    script: str
    output_dir: str


def never_runs(spec: JobSpec) -> str | None:
    """Why the adapter can never run ``spec`` whatever the cell (several nodes or processes), or None."""
    if spec.nodes != 1 or spec.procs_per_node != 1:
        return (
            f"{spec.nodes} node(s) x {spec.procs_per_node} process(es) asked: the gridengine adapter runs one-slot jobs"
            " (several need a parallel environment, which it does not use)"
        )
    return None


def build(request: StartRequest, settings: GridEngineSettings, output_dir: str) -> QsubJob:
    spec = request.spec
    why = never_runs(spec)
    if why:
        raise Unsupported(why)
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
    argv += resource_options(spec.resources, settings.complexes)
    argv += exclusion_options(request.exclude)
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
    # dispatch's files private, then the user's program under the caller's umask (dispatch.adapterkit.private)
    prelude = ["umask 077", *prelude, *progress.prelude(output_dir, request.marker), umask_line(spec.umask)]
    script = render_job_script(
        request, scheduler_id='"$JOB_ID"', restart="0", prelude=prelude, checks=launch_checks(spec.command, workdir)
    )
    return QsubJob(tuple(argv), script, output_dir)


def exclusion_options(hosts: tuple[str, ...]) -> list[str]:
    """``-l hostname=!(a|b)``: the hosts the request must avoid (StartRequest.exclude), a Boolean expression of
    the ``hostname`` complex; nothing when there are none. SpecError names a word that is not a host name (the
    expression's operators and wildcards never come from a name)."""
    if not hosts:
        return []
    for host in hosts:
        if not _HOST.fullmatch(host):
            raise SpecError("exclude", f"{host!r} is not a Grid Engine host name")
    return ["-l", f"hostname=!({'|'.join(sorted(set(hosts)))})"]


def resource_options(res: Resources, names: Complexes) -> list[str]:
    """qsub's words for ``res`` with the cell's complex names. Unsupported when the cell has no complex for
    what is asked, or when GPUs do not divide evenly among the slots of ``cpusPerProc``."""
    slots = res.cpus_per_proc or 1
    argv: list[str] = []
    if slots > 1:
        if names.cpu_pe is None:
            raise Unsupported(
                f"resources.cpusPerProc {slots} needs a parallel environment of slots on one host: set the gridengine"
                " setting complexes.cpuPe"
            )
        argv += ["-pe", names.cpu_pe, str(slots)]
    wants: list[str] = []
    if res.gpus_per_node:
        if names.gpu is None:
            raise Unsupported("this cell has no GPU complex (the gridengine setting complexes.gpu is unset)")
        if res.gpus_per_node % slots:
            raise Unsupported(
                f"{res.gpus_per_node} GPU(s) cannot be divided among {slots} slots (Grid Engine counts consumables per"
                " slot): ask a multiple of resources.cpusPerProc"
            )
        wants.append(f"{names.gpu}={res.gpus_per_node // slots}")
    if res.gpu_type is not None:
        if names.gpu_type is None:
            raise Unsupported(
                f"resources.gpuType {res.gpu_type!r} needs the complex that names a host's GPU type: set the gridengine"
                " setting complexes.gpuType"
            )
        wants.append(f"{names.gpu_type}={res.gpu_type}")
    if res.mem_per_node is not None:
        if names.memory is None:
            raise Unsupported("this cell has no memory complex (the gridengine setting complexes.memory is unset)")
        per_slot = f"{-(-res.mem_per_node // slots)}M"
        wants.append(f"{names.memory}={per_slot}")
        if names.memory_limit and names.memory_limit != names.memory:
            wants.append(f"{names.memory_limit}={per_slot}")
    if res.exclusive:
        if names.exclusive is None:
            raise Unsupported("this cell has no exclusive-host complex (the setting complexes.exclusive is unset)")
        wants.append(f"{names.exclusive}=true")
    if wants:
        argv += ["-l", ",".join(wants)]
    return argv
