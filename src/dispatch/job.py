"""Inside a job: who this process is, where it checkpoints, and whether it is about to be stopped.

A training script imports this module and nothing else of dispatch; it knows no scheduler and reads only the
environment the adapters set (standard library only, no calls to any scheduler):

* :func:`context` returns the :class:`Context`: rank, world size, local rank, node rank, the job, submission and
  execution identities, the restart count, the checkpoint directory (``dispatch.SharedCheckpoint``), the deadline
  where one is known, and the rendezvous address for ``torch.distributed``.
* :func:`on_cessation` registers a callback, and :func:`ceasing` is a flag to poll, for "this execution is about
  to be stopped", whatever the cause (preemption, time limit, a hold, a stop, a drained node): the adapter's
  warning signal (``dispatch.CessationWarning``: ``DISPATCH_CESSATION_SIGNAL``, USR1 by default) or SIGTERM,
  which every adapter sends before SIGKILL.

Where each value comes from, first match wins:

=================  =====================================================================================
rank               ``DISPATCH_RANK``, ``RANK`` (local adapter, torchrun), ``SLURM_PROCID`` (srun)
world size         ``DISPATCH_WORLD_SIZE``, ``WORLD_SIZE``, ``SLURM_NTASKS``
local rank         ``LOCAL_RANK``, ``SLURM_LOCALID``
node rank          ``NODE_RANK``, ``GROUP_RANK``, ``SLURM_NODEID``
node               ``DISPATCH_NODE``, ``SLURMD_NODENAME``, else (reading ``os.environ``) the host name
job                ``DISPATCH_JOB`` (local, Slurm), ``DISPATCH_JOB_ID`` (Kubeflow)
execution          ``DISPATCH_EXECUTION`` (``<submission>.<scheduler id>.<restart>``)
restart            ``DISPATCH_RESTART``, else the last field of the execution, else ``SLURM_RESTART_COUNT``
checkpoint dir     ``DISPATCH_CHECKPOINT_DIR``
deadline           ``DISPATCH_DEADLINE`` (epoch seconds), ``SLURM_JOB_END_TIME``
rendezvous         ``MASTER_ADDR``/``MASTER_PORT``; under srun ``SLURM_LAUNCH_NODE_IPADDR`` (the batch node,
                   where rank 0 runs) and a port derived from ``SLURM_JOB_ID``
=================  =====================================================================================

* :func:`run_id` and :func:`execution_id` name this run for an experiment tracker: the first is the same for every
  execution of the job (a resubmission, a requeue, a readmission), the second differs for each (docs/trackers.md).
  Both raise :class:`NotInJob` outside a job started by dispatch.
* :func:`progress` records this rank's progress (step, total, a few numeric metrics, the time) in a small file
  the adapter reads with the job's state, so the supervisor can tell a run that moves from one that hangs
  (a rule with ``stalledAfter`` acts on the cause ``stalled``).

Signal handling contract. The handlers are installed on first use of :func:`on_cessation`, :func:`ceasing` or
:func:`cessation`, in the main thread. The adapters that send a warning start each rank with the warning signal
blocked (a blocked signal stays pending across ``exec``); installing the handlers unblocks it in the calling thread,
so a warning that came while the interpreter was still starting is delivered then, not lost. A program that handles
the warning without this module must unblock it itself (``signal.pthread_sigmask``).
A handled SIGTERM does **not** end the process: the script is expected to checkpoint at its next safe point and exit
(``sys.exit(notice.exit_code)`` keeps the "killed by SIGTERM" status a scheduler would have seen). Further SIGTERMs
are ignored: Slurm sends it twice on preemption (slurmstepd, then srun), and a process that died of the second would
lose its checkpoint; SIGKILL still ends the grace. Callbacks run in the main thread between two Python bytecodes,
inside the signal handler: keep them short (set a flag), never run a collective there.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Context",
    "NotInJob",
    "Notice",
    "ceasing",
    "cessation",
    "context",
    "execution_id",
    "on_cessation",
    "progress",
    "reset_for_tests",
    "run_id",
    "wait",
]


@dataclass(frozen=True)
class Context:
    """This process's place in the job. Identities are ``None`` when the job was not started by dispatch."""

    rank: int
    world_size: int
    local_rank: int
    node_rank: int
    node: str | None
    """The node's name: ``DISPATCH_NODE`` (local), ``SLURMD_NODENAME`` (Slurm), else the host name."""
    job: str | None
    submission: int | None
    execution: str | None
    restart: int
    checkpoint_dir: str | None
    deadline: float | None
    """Epoch seconds at which the scheduler will stop this execution, where the adapter knows it."""
    master_addr: str
    master_port: int
    warning_signal: str | None
    """The warning signal's name (``USR1``) when the job asked for one (``dispatch.CessationWarning``)."""
    warning_grace: float | None
    """Seconds the job has between the warning and SIGTERM, where the adapter knows it."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def seconds_left(self, now: float | None = None) -> float | None:
        """Seconds until :attr:`deadline`, or ``None`` when no deadline is known."""
        if self.deadline is None:
            return None
        return self.deadline - (time.time() if now is None else now)


def _first(env: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            return value
    return None


def _int(env: Mapping[str, str], default: int, *names: str) -> int:
    raw = _first(env, *names)
    if raw is None:
        return default
    try:
        return int(raw.split("(")[0])
    except ValueError:
        raise ValueError(f"{'/'.join(names)}: expected an integer, got {raw!r}") from None


def _float(env: Mapping[str, str], *names: str) -> float | None:
    raw = _first(env, *names)
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{'/'.join(names)}: expected a number, got {raw!r}") from None


def _slurm_port(job_id: str) -> int:
    """A rendezvous port for a Slurm job: the same on every rank, and the one dispatch's Slurm adapter sets
    (``20000 + id % 12000``, below the kernel's ephemeral ports: dispatch.adapterkit.rankenv, which this module,
    standard library only and loaded by path, does not import)."""
    number = int(job_id) if job_id.isdigit() else zlib.crc32(job_id.encode())
    return 20000 + number % 12000


def context(environ: Mapping[str, str] | None = None) -> Context:
    """The context of this process, read from ``environ`` (default: ``os.environ``). Raises ValueError naming the
    variable when one holds something that is not a number."""
    env = os.environ if environ is None else environ
    execution = _first(env, "DISPATCH_EXECUTION")
    restart_raw = _first(env, "DISPATCH_RESTART")
    if restart_raw is None and execution is not None and execution.rsplit(".", 1)[-1].isdigit():
        restart_raw = execution.rsplit(".", 1)[-1]
    restart = (
        int(restart_raw) if restart_raw is not None and restart_raw.isdigit() else _int(env, 0, "SLURM_RESTART_COUNT")
    )
    submission_raw = _first(env, "DISPATCH_SUBMISSION")
    master_addr = _first(env, "MASTER_ADDR", "SLURM_LAUNCH_NODE_IPADDR") or "127.0.0.1"
    port_raw = _first(env, "MASTER_PORT")
    if port_raw is not None:
        master_port = _int(env, 0, "MASTER_PORT")
    elif _first(env, "SLURM_JOB_ID"):
        master_port = _slurm_port(str(env["SLURM_JOB_ID"]))
    else:
        master_port = 29500
    return Context(
        rank=_int(env, 0, "DISPATCH_RANK", "RANK", "SLURM_PROCID"),
        world_size=_int(env, 1, "DISPATCH_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS"),
        local_rank=_int(env, 0, "LOCAL_RANK", "SLURM_LOCALID"),
        node_rank=_int(env, 0, "NODE_RANK", "GROUP_RANK", "SLURM_NODEID"),
        node=_first(env, "DISPATCH_NODE", "SLURMD_NODENAME") or (socket.gethostname() if environ is None else None),
        job=_first(env, "DISPATCH_JOB", "DISPATCH_JOB_ID"),
        submission=_int(env, 0, "DISPATCH_SUBMISSION") if submission_raw is not None else None,
        execution=execution,
        restart=restart,
        checkpoint_dir=_first(env, "DISPATCH_CHECKPOINT_DIR"),
        deadline=_float(env, "DISPATCH_DEADLINE", "SLURM_JOB_END_TIME"),
        master_addr=master_addr,
        master_port=master_port,
        warning_signal=_first(env, "DISPATCH_CESSATION_SIGNAL"),
        warning_grace=_float(env, "DISPATCH_CESSATION_GRACE"),
    )


# ----- identities for experiment trackers ------------------------------------------------------------------


class NotInJob(LookupError):
    """An identity asked for outside a job started by dispatch (the message names the call and the variable)."""


def run_id(environ: Mapping[str, str] | None = None) -> str:
    """The id of this job's run for an experiment tracker: the dispatch job id (``DISPATCH_JOB``; ``DISPATCH_JOB_ID``
    on Kubeflow), the same in every execution of the job: each resubmission, requeue and readmission, on every
    rank. Pass it as the tracker's run id (``wandb.init(id=run_id(), resume="allow")``) and a run that comes back
    continues the tracker's run instead of starting a new one. NotInJob outside a job started by dispatch."""
    env = os.environ if environ is None else environ
    found = _first(env, "DISPATCH_JOB", "DISPATCH_JOB_ID")
    if found is None:
        raise NotInJob("dispatch.job.run_id(): this process is not a dispatch job (DISPATCH_JOB is not set)")
    return found


def execution_id(environ: Mapping[str, str] | None = None) -> str:
    """This execution's identity (``DISPATCH_EXECUTION``: ``<submission>.<scheduler id>.<restart>``, on Kubeflow
    ``<job>.<submission>.<attempt>.<A>.<J>``; :mod:`dispatch.identity`): different for every execution of the job,
    the same on every rank of one. NotInJob outside a job started by dispatch."""
    env = os.environ if environ is None else environ
    found = _first(env, "DISPATCH_EXECUTION")
    if found is None:
        raise NotInJob(
            "dispatch.job.execution_id(): this process is not a dispatch job (DISPATCH_EXECUTION is not set)"
        )
    return found


# ----- cessation -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Notice:
    """The first warning this process received: which signal, when, and whether it was SIGTERM (the last one)."""

    signal: int
    at: float

    @property
    def name(self) -> str:
        return signal.Signals(self.signal).name

    @property
    def terminating(self) -> bool:
        """SIGTERM: SIGKILL follows after the scheduler's grace; checkpoint and exit now."""
        return self.signal == signal.SIGTERM

    @property
    def exit_code(self) -> int:
        """The code to exit with after a termination: 128 + SIGTERM, as a killed process would report."""
        return 128 + int(signal.SIGTERM)


class _Cessation:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.installed = False
        self.first: Notice | None = None
        self.terminated: Notice | None = None
        self.flag = False  # a plain flag: a signal handler must take no lock (the main thread may hold it)
        self.callbacks: list[Callable[[Notice], None]] = []

    def install(self, environ: Mapping[str, str] | None = None) -> None:
        with self.lock:
            if self.installed:
                return
            env = os.environ if environ is None else environ
            signals = [signal.SIGTERM]
            name = _first(env, "DISPATCH_CESSATION_SIGNAL")
            if name is not None:
                try:
                    signals.append(signal.Signals["SIG" + name.removeprefix("SIG")])
                except KeyError:
                    raise ValueError(f"DISPATCH_CESSATION_SIGNAL: unknown signal {name!r}") from None
            for sig in signals:
                signal.signal(sig, self.handle)
            self.installed = True
        if len(signals) > 1:
            # The adapters start a rank with its warning signal blocked, so a warning that comes before this
            # handler exists stays pending instead of ending the process; unblocking delivers it here, now (outside
            # the lock: the handler's callbacks may call this module again).
            signal.pthread_sigmask(signal.SIG_UNBLOCK, signals[1:])

    def handle(self, signum: int, frame: object) -> None:
        notice = Notice(signum, time.time())
        if signum == signal.SIGTERM:
            if self.terminated is not None:
                return  # schedulers repeat SIGTERM (slurmstepd, then srun): SIGKILL ends the grace, not this
            self.terminated = notice
        first = self.first is None
        if first:
            self.first = notice
        self.flag = True
        if first or signum == signal.SIGTERM:
            for callback in list(self.callbacks):
                callback(notice)


_STATE = _Cessation()


def on_cessation(callback: Callable[[Notice], None]) -> None:
    """Call ``callback(notice)`` when the warning arrives (and again on SIGTERM if that comes later). A warning
    that arrived before the handlers were installed (pending in the blocked mask the rank started with) reaches
    the first callback registered."""
    _STATE.callbacks.append(callback)
    _STATE.install()


def ceasing() -> bool:
    """Whether a warning (or SIGTERM) has arrived. Installs the handlers on first call."""
    _STATE.install()
    return _STATE.flag


def cessation() -> Notice | None:
    """The latest notice worth acting on: SIGTERM if it came, else the first warning, else ``None``."""
    _STATE.install()
    return _STATE.terminated or _STATE.first


def wait(timeout: float | None = None) -> bool:
    """Block until a warning arrives (or ``timeout`` passes); returns :func:`ceasing`."""
    _STATE.install()
    end = None if timeout is None else time.monotonic() + timeout
    while not _STATE.flag:
        left = 0.05 if end is None else min(0.05, end - time.monotonic())
        if left <= 0:
            break
        time.sleep(left)  # a signal interrupts the sleep; its handler runs before the flag is read again
    return _STATE.flag


# ----- progress ---------------------------------------------------------------------------------------------

PROGRESS_DIR_VARIABLE = "DISPATCH_PROGRESS_DIR"
"""Where the adapter wants each rank's progress file (a directory beside the job's output)."""
PROGRESS_INTERVAL_VARIABLE = "DISPATCH_PROGRESS_INTERVAL"
"""Seconds between two writes of the file (default :data:`PROGRESS_INTERVAL`)."""
PROGRESS_INTERVAL = 5.0
MAX_METRICS = 16
"""The most metrics one report carries."""
MAX_STEP = 2**53
"""Steps and totals stay below this (JSON numbers every reader reads exactly)."""
_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def progress_file(directory: str, rank: int) -> str:
    """The file rank ``rank`` writes its progress to in ``directory``: ``rank-<rank>.json``."""
    return os.path.join(directory, f"rank-{rank}.json")


class _Progress:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ready = False
        self.directory: str | None = None
        self.rank = 0
        self.execution: str | None = None
        self.interval = PROGRESS_INTERVAL
        self.written_at: float | None = None  # time.monotonic() of the last write attempt
        self.first: tuple[int, float] | None = None  # (step, time) of this process's first report: the rate's base
        self.warned = False
        self.sender: Any = None  # a dispatch.trainerstatus.Sender on Kubeflow (rank 0), else None

    def setup(self) -> None:
        env = os.environ
        self.directory = _first(env, PROGRESS_DIR_VARIABLE)
        self.rank = _int(env, 0, "DISPATCH_RANK", "RANK", "SLURM_PROCID")
        url = _first(env, "KUBEFLOW_TRAINER_SERVER_URL")
        if self.directory is None and url is not None and self.rank == 0:
            from dispatch.trainerstatus import Sender  # imported only where a Trainer's status server listens

            self.sender = Sender(
                url, _first(env, "KUBEFLOW_TRAINER_SERVER_CA_CERT"), _first(env, "KUBEFLOW_TRAINER_SERVER_TOKEN")
            )
        self.execution = _first(env, "DISPATCH_EXECUTION")
        raw = _float(env, PROGRESS_INTERVAL_VARIABLE)
        self.interval = PROGRESS_INTERVAL if raw is None or not raw >= 0 else raw
        self.ready = True

    def write(self, report: dict[str, object]) -> bool:
        assert self.directory is not None
        path = progress_file(self.directory, self.rank)
        tmp = f"{path}.{os.getpid()}.tmp"
        data = (json.dumps(report, separators=(",", ":"), allow_nan=False) + "\n").encode()
        try:
            # private on shared storage: the directory 0700, the report 0600, created anew (never through a link
            # or a file someone left under the temporary name)
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(tmp, flags, 0o600)
            except FileExistsError:  # left by a write cut short (or planted): removed, never written through
                os.unlink(tmp)
                fd = os.open(tmp, flags, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)  # atomic: a reader sees the previous report or this one, never half of one
        except OSError as exc:
            if not self.warned:
                self.warned = True
                warnings.warn(f"dispatch.job.progress: cannot write {path}: {exc}", RuntimeWarning, stacklevel=3)
            return False
        return True


_PROGRESS = _Progress()


def _check_count(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"dispatch.job.progress: {what} must be an int, not {type(value).__name__} ({value!r:.40})")
    if not minimum <= value < MAX_STEP:
        raise ValueError(f"dispatch.job.progress: {what} must be from {minimum} to 2**53-1, not {value}")
    return value


_NAMES_SEEN: set[str] = set()
"""Metric names already found valid: a training loop passes the same few names at every step, and a regular
expression per name per step was most of a call's cost."""


def _check_metric(name: str, value: object) -> None:
    if name not in _NAMES_SEEN:
        if not _METRIC_NAME.fullmatch(name):
            raise ValueError(f"dispatch.job.progress: metric name {name[:80]!r} is not a name of at most 64 letters")
        if len(_NAMES_SEEN) < 1024:
            _NAMES_SEEN.add(name)
    if value.__class__ is not float and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise TypeError(
            f"dispatch.job.progress: metric {name!r} must be a number, not {type(value).__name__} ({value!r:.40})"
        )


def _metric(value: float) -> float | int | None:
    if isinstance(value, int):
        return value if abs(value) < MAX_STEP else float(value)
    return value if math.isfinite(value) else None


def progress(step: int, total: int | None = None, **metrics: float) -> bool:
    """Record this rank's progress: ``step`` (an int from 0), ``total`` (the step it ends at, if known) and up to
    16 numeric ``metrics`` (``loss=0.31``), with the time. Cheap enough to call every step: the report is written
    (atomically, to ``$DISPATCH_PROGRESS_DIR/rank-<rank>.json``) at most once every ``DISPATCH_PROGRESS_INTERVAL``
    seconds (default 5), and when ``step`` reaches ``total``; the other calls only check their arguments.
    Returns whether this call wrote. Outside a job whose adapter gives a progress directory it writes nothing
    and returns False. On Kubeflow (no directory; the Trainer's status server in ``KUBEFLOW_TRAINER_SERVER_URL``)
    rank 0's report is posted there instead, from a background thread (:mod:`dispatch.trainerstatus`): the call
    returns True when it queued one; the other ranks write nothing.

    Refusals raise; failures warn. A call whose arguments are wrong (a step that is not an int, a metric that
    is not a number, more than 16 metrics, a name that is not an identifier of at most 64 characters) raises
    TypeError or ValueError naming what is wrong, on every call, written or not: the arguments have the same
    types at every step, so a wrong call fails at the first step, seconds into the run, not hours later in a
    loop that happened to write then. What can go wrong late never raises: a metric that becomes NaN or infinite
    is recorded as null, and a file that cannot be written (the storage full or gone) warns once
    (RuntimeWarning) and is tried again at the next interval, so progress never ends a training loop.
    """
    # the checks inline for the common case (plain ints, float metrics with names already found valid); anything
    # else goes through the full checks, which raise or accept
    if step.__class__ is not int or not 0 <= step < MAX_STEP:
        _check_count(step, "step", 0)
    if total is not None and (total.__class__ is not int or not 1 <= total < MAX_STEP):
        _check_count(total, "total", 1)
    if len(metrics) > MAX_METRICS:
        raise ValueError(f"dispatch.job.progress: at most {MAX_METRICS} metrics, got {len(metrics)}")
    for name, value in metrics.items():
        if value.__class__ is not float or name not in _NAMES_SEEN:
            _check_metric(name, value)
    state = _PROGRESS
    # most calls end here, without the lock: a stale read only means taking it (and deciding again under it)
    written_at = state.written_at
    if written_at is not None and time.monotonic() - written_at < state.interval and (total is None or step < total):
        return False
    final = total is not None and step >= total
    if state.ready and state.directory is None and state.sender is None:
        return False  # outside a job that carries progress
    with state.lock:
        if not state.ready:
            state.setup()
        if state.directory is None and state.sender is None:
            return False
        now = time.monotonic()
        if state.written_at is not None and now - state.written_at < state.interval and not final:
            return False
        state.written_at = now
        values = {name: _metric(value) for name, value in metrics.items()}
        at = time.time()
        if state.first is None:
            state.first = (step, at)
        report: dict[str, object] = {"rank": state.rank, "step": step, "total": total, "at": at}
        report["first"] = {"step": state.first[0], "at": state.first[1]}
        if state.execution is not None:
            report["execution"] = state.execution
        if values:
            report["metrics"] = values
        if state.sender is not None:
            state.sender.offer(report)
            return True
        return state.write(report)


def reset_for_tests() -> None:
    """Forget notices, callbacks and progress state, and restore the default handlers (tests only)."""
    global _STATE, _PROGRESS
    _PROGRESS = _Progress()
    if _STATE.installed:
        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
    _STATE = _Cessation()
