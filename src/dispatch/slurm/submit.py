"""One submission to one ``sbatch`` job: the options and the batch script (see the table in the docs).

* The working directory is ``--chdir``: the spec's, else the backend's default (:meth:`SlurmBackend.default_workdir`).
* The start gate is ``--hold``; requeue is off (``--no-requeue``); the job name is the submission's marker
  (``Find`` searches it in squeue and sacct).
* The batch script exports the execution identity ``DISPATCH_EXECUTION=<N>.<job id>.<restart>`` (restart from
  ``SLURM_RESTART_COUNT``, unset on the first run), ``DISPATCH_JOB``, ``DISPATCH_SUBMISSION``,
  ``DISPATCH_MARKER``, ``DISPATCH_CHECKPOINT_DIR`` (SharedCheckpoint), ``DISPATCH_CESSATION_SIGNAL`` and
  ``_GRACE`` (CessationWarning, rendered as ``--signal=<sig>@<seconds>``) and the spec's env, then starts the ranks
  on every node with ``srun --export=ALL`` (nodes x procs_per_node tasks; with a CessationWarning each rank
  starts with the warning signal ignored until the program handles it). The user's argv is shlex-quoted
  word by word inside a heredoc whose terminator carries the script nonce, so it reaches the ranks byte for
  byte.
* Image: with a ``dispatch.Image`` each rank's wrapper execs ``apptainer exec`` (the cluster's
  ``container.options``, binds of the working, output and checkpoint directories, ``--pwd``) and the argv
  runs inside the image (:mod:`dispatch.slurm.images`).
* Files: the batch script starts with ``umask 077``, so the files it and its ranks make (output, progress) are
  the user's alone (:mod:`dispatch.slurm.trust`); a program that wants others to read its files sets its own.
* Progress: every rank's ``DISPATCH_PROGRESS_DIR`` is ``<output dir>/.progress/<cluster>/<job id>``
  (:data:`dispatch.slurm.progress.LAYOUT`; the output root's, whatever the job's ``dispatch.Output``)
  (:mod:`dispatch.slurm.progress`).
* Output: one stdout and one stderr file per execution, ``<dir>/<marker>.<job id>.<restart>.out|.err``
  (:func:`output_paths`; the submitting script records ``<dir>/<marker>`` under the job id, see
  :func:`pointer_path`, so the files are found after the scheduler forgot the job): with
  ``%j``/``%r`` in ``--output``/``--error`` on 25.11+, and by an ``exec`` redirect in the batch script on older
  releases (whose ``--output`` then only catches Slurm's own messages, in ``<marker>.<job id>.slurm.out``).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass

from dispatch.adapterkit import render_job_script
from dispatch.adapterkit.jobscript import launch_checks
from dispatch.adapterkit.private import umask_line
from dispatch.adapterkit.rankenv import RankLayout, port_expression, rank_prelude, rank_wrapper
from dispatch.errors import SpecError
from dispatch.extensions import CessationWarning, Image, Output, SharedCheckpoint
from dispatch.resources import Resources as PortableResources
from dispatch.slurm import images, progress
from dispatch.slurm.extensions import Placement, Resources
from dispatch.slurm.parse import has_export_nil, has_restart_pattern
from dispatch.slurm.settings import SlurmSettings, check_output_dir
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

_MARKER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


@dataclass(frozen=True)
class SbatchJob:
    """What :func:`build` made: sbatch's argv (after ``sbatch``), the batch script, the output dir, and the
    files' common prefix ``<dir>/<marker>`` (each execution's files are ``<base>.<job id>.<restart>.out|.err``)."""

    argv: tuple[str, ...]
    batch: str
    output_dir: str
    base: str


def output_paths(output_dir: str, marker: str, job_id: str, restart: int) -> tuple[str, str]:
    base = f"{output_dir.rstrip('/')}/{marker}.{job_id}.{restart}"
    return base + ".out", base + ".err"


POINTERS = ".jobs"
"""The directory, inside the cluster's output directory, of the pointer files written at submission."""


def pointer_path(output_root: str, cluster: str, job_id: str) -> str:
    """Where the submission of job ``job_id`` on ``cluster`` recorded its files' prefix ``<dir>/<marker>``
    (one line): ``<output root>/.jobs/<cluster>.<job id>``. ``output_root`` is ``output.dir`` (default
    ``~/dispatch-output``) even for a job whose ``dispatch.Output`` puts its files elsewhere."""
    return f"{output_root.rstrip('/') or ''}/{POINTERS}/{cluster}.{job_id}"


def _exclude(placed: str | None, blamed: tuple[str, ...]) -> str:
    """``--exclude``: the Placement's hostlist and the nodes the request must avoid (StartRequest.exclude, names
    from the scheduler's own NodeList, checked here all the same: a name reaches sbatch only as a node name)."""
    for node in blamed:
        if not _NODE.fullmatch(node):
            raise SpecError("exclude", f"{node!r} is not a Slurm node name")
    return ",".join([*([placed] if placed else []), *blamed])


ARRAY_TASK_ID = '"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"'
"""An array task's scheduler id ``<array>_<task>`` as its batch script expands it."""


def build(
    request: StartRequest,
    settings: SlurmSettings,
    release: str,
    default_output_dir: str,
    default_workdir: str = "",
    *,
    array: str | None = None,
    progress_root: str | None = None,
) -> SbatchJob:
    """The sbatch options and batch script of ``request``. The job starts in the spec's working directory, else
    in ``default_workdir`` (always sent as ``--chdir``, so a dry run shows it; empty: sbatch's own default).
    With ``array`` (a job array's name, :mod:`dispatch.slurm.arrays`), the request is a task of that array:
    the job name and the files' prefix are the array's, and the task's id, files and progress directory are
    ``<array job id>_<task id>``'s. With a ``dispatch.Image``, each rank runs inside it through Apptainer
    (:mod:`dispatch.slurm.images`: the working directory, the output directory and a SharedCheckpoint's are bound
    in). ``progress_root`` is the cluster's progress directory (:func:`dispatch.slurm.progress.root`; default
    ``<output root>/.progress/slurm``). Raises SpecError for a marker or extension Slurm cannot carry."""
    spec = request.spec
    if not _MARKER.fullmatch(request.marker):
        raise SpecError("marker", f"{request.marker!r} cannot be a Slurm job name")
    placement = spec.extension(Placement) or Placement()
    res = spec.extension(Resources) or Resources()
    out_ext = spec.extension(Output)
    out_dir = out_ext.dir if out_ext is not None else (settings.output.dir or default_output_dir)
    check_output_dir(out_dir, "extensions.dispatch.Output.dir" if out_ext else "output.dir")
    out_dir = out_dir.rstrip("/") or "/"
    d = settings.defaults
    argv: list[str] = [
        "--parsable",
        "--hold",
        "--no-requeue",
        f"--job-name={array or request.marker}",
        f"--nodes={spec.nodes}",
        f"--ntasks-per-node={spec.procs_per_node}",
    ]
    for opt, value in (
        ("partition", placement.partition or d.partition),
        ("account", placement.account or d.account),
        ("qos", placement.qos or d.qos),
        ("reservation", placement.reservation or d.reservation),
        ("constraint", placement.constraint or d.constraint),
        ("exclude", _exclude(placement.exclude, request.exclude)),
        ("nodelist", placement.nodelist),
    ):
        if value:
            argv.append(f"--{opt}={value}")
    argv += resource_options(spec.resources, res)
    workdir = spec.working_dir or default_workdir
    if workdir:
        argv.append(f"--chdir={workdir}")
    if spec.time_limit is not None:
        argv.append(f"--time={max(1, math.ceil(spec.time_limit / 60))}")
    warning = spec.extension(CessationWarning)
    if warning is not None:
        # to every rank (the job steps), ``seconds`` before the time limit; the batch shell is srun (exec), which
        # Slurm leaves alone here so it cannot die of the signal's default action
        argv.append(f"--signal={warning.signal}@{math.ceil(warning.seconds)}")
    names = settings.environment.names
    if names:
        argv.append("--export=" + ",".join(names))
    else:
        argv.append("--export=" + ("NIL" if has_export_nil(release) else "NONE"))
    per_exec = has_restart_pattern(release)
    base = f"{out_dir}/{array or request.marker}"
    jid, pattern = (ARRAY_TASK_ID, "%A_%a") if array else (progress.JOB_ID, "%j")
    if per_exec:
        argv += [f"--output={base}.{pattern}.%r.out", f"--error={base}.{pattern}.%r.err"]
    else:
        argv += [f"--output={base}.{pattern}.slurm.out", f"--error={base}.{pattern}.slurm.out"]

    # the job's files (output, progress) are the user's alone whatever umask sbatch passed on (dispatch.slurm.trust)
    root_dir = progress_root or progress.root(settings.output.dir or default_output_dir, "slurm")
    prelude = ["umask 077", *progress.prelude(root_dir, jid)]
    if not per_exec:
        q = shlex.quote(base)
        suffix = f'.{jid}."${{SLURM_RESTART_COUNT:-0}}"'
        prelude.append(f"exec >{q}{suffix}.out 2>{q}{suffix}.err")
    image = spec.extension(Image)
    if image is None:
        image_words: list[str] = []
        checks = launch_checks(spec.command, workdir or None)
    else:
        ckpt = spec.extension(SharedCheckpoint)
        # the progress directory is in the output root, which a dispatch.Output may have left
        progress_bind = "" if root_dir.startswith(out_dir.rstrip("/") + "/") else root_dir
        binds = [p for p in (workdir, out_dir, progress_bind, ckpt.path if ckpt else "") if p]
        image_words = images.apptainer_words(image, settings.container, binds, workdir)
        checks = images.image_checks(image, settings.container, workdir or None)
    exports = {}
    if warning is not None:
        exports["DISPATCH_CESSATION_SIGNAL"] = str(warning.signal)
        exports["DISPATCH_CESSATION_GRACE"] = str(math.ceil(warning.seconds))
    batch = render_job_script(
        request,
        scheduler_id=jid,
        restart='"${SLURM_RESTART_COUNT:-0}"',
        prelude=prelude,
        launcher=(
            "srun",
            "--export=ALL",
            "--kill-on-bad-exit=1",
            "--",
            *_blocking(warning),  # first: the signal is blocked from the rank's first instruction
            # the user's program under the caller's umask, as a bare sbatch runs it (dispatch.adapterkit.private)
            *rank_wrapper([*_rank_prelude(spec), umask_line(spec.umask)]),
            *image_words,
            # Apptainer's starter clears the signal mask and dispositions: inside the image, again
            *(_blocking(warning) if image_words else ()),
        ),
        exports=exports,
        checks=checks,
    )
    return SbatchJob(tuple(argv), batch, out_dir, base)


def resource_options(portable: PortableResources, res: Resources) -> list[str]:
    """sbatch's words for the spec's ``resources`` (every supported release has ``--gpus-per-node``), and for
    the deprecated ``slurm.Resources`` extension, whose ``memPerCpu`` is Slurm's alone. A spec may say each
    thing once: SpecError when both ask for the same (GPUs, CPUs, memory)."""
    for field, key, theirs in (
        ("gpus_per_node", "gpusPerNode", portable.gpus_per_node),
        ("cpus_per_task", "cpusPerTask", portable.cpus_per_proc),
        ("mem_per_node", "memPerNode", portable.mem_per_node),
    ):
        if getattr(res, field) is not None and theirs:
            raise SpecError(f"extensions.slurm.Resources.{key}", "is asked in resources too: keep resources only")
    if res.mem_per_cpu is not None and portable.mem_per_node is not None:
        raise SpecError("extensions.slurm.Resources.memPerCpu", "give resources.memPerNode or memPerCpu, not both")
    argv = []
    if portable.gpus_per_node:
        argv.append(f"--gpus-per-node={portable.gpus}")
    elif res.gpus_per_node:
        argv.append(f"--gpus-per-node={res.gpu_type + ':' if res.gpu_type else ''}{res.gpus_per_node}")
    cpus = portable.cpus_per_proc or res.cpus_per_task
    if cpus:
        argv.append(f"--cpus-per-task={cpus}")
    if portable.mem_per_node is not None:
        argv.append(f"--mem={portable.mem_per_node}M")
    elif res.mem_per_node:
        argv.append(f"--mem={res.mem_per_node}")
    if res.mem_per_cpu:
        argv.append(f"--mem-per-cpu={res.mem_per_cpu}")
    if portable.exclusive or res.exclusive:
        argv.append("--exclusive")
    return argv


def _rank_prelude(spec: JobSpec) -> list[str]:
    """Each rank's environment (:mod:`dispatch.adapterkit.rankenv`) from what srun tells the task: its rank
    ``SLURM_PROCID``, ``SLURM_LOCALID`` and ``SLURM_NODEID``; the rendezvous at ``SLURM_LAUNCH_NODE_IPADDR``, the
    address of the node running the batch script (node 0, where rank 0 runs: an address, so it needs no name
    resolution), on a port derived from the job id."""
    return rank_prelude(
        RankLayout(spec.nodes, spec.procs_per_node),
        rank='"$SLURM_PROCID"',
        local_rank='"$SLURM_LOCALID"',
        node_rank='"$SLURM_NODEID"',
        master_addr='"$SLURM_LAUNCH_NODE_IPADDR"',
        master_port=port_expression("SLURM_JOB_ID"),
        node='"$SLURMD_NODENAME"',
    )


def _blocking(warning: CessationWarning | None) -> tuple[str, ...]:
    """The words that start each rank with the warning signal blocked, until the program installs its handler
    and unblocks it (:mod:`dispatch.job` does both on first use). Slurm may send ``--signal`` up to 60 s before
    the time given, so with a short limit it can reach a rank that is still starting (an interpreter, its
    imports), and the signal's default action would end that rank: measured on 22.05, a resumed execution died
    of SIGUSR1 within its first second under load. A blocked signal stays pending across ``exec``, so that early
    warning is delivered once the handler exists, neither fatal nor lost.

    ``sh`` ignores the signal first (so the shell itself cannot die of it), then, where ``env --block-signal``
    exists (GNU coreutils 8.31 or later), execs the program through it with the signal blocked: a blocked signal
    is queued even while ignored, and the handler dispatch.job installs replaces the ignored disposition. Where
    it does not exist (RHEL 8 ships 8.30) the program starts with the signal ignored: an early warning is lost,
    still not fatal. The inner ``sh -c 'exec "$@"'`` keeps the argv byte for byte (``env`` would read a first
    word with a ``=`` as a variable); every ``exec`` keeps the same process."""
    if warning is None:
        return ()
    sig = warning.signal  # USR1 or USR2: checked by CessationWarning
    script = (
        f'trap "" {sig}; if env --block-signal={sig} true 2>/dev/null; then '
        f'exec env --block-signal={sig} /bin/sh -c \'exec "$@"\' dispatch-rank "$@"; fi; exec "$@"'
    )
    return ("/bin/sh", "-c", script, "dispatch-rank")
