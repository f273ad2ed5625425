"""The per-execution launcher: a small detached process that runs one execution's ranks and records the truth.

Run as ``python <path of this file> <job directory> <restart>`` (by path, so it imports nothing of dispatch:
the standard library only). It forks once so that it is detached from whoever spawned it (the parent exits as
soon as the child has written ``launcher.json``), then:

1. when the job asks for GPUs, takes that many devices of the state directory's GPU ledger
   (:mod:`dispatch.local.ledger`), all at once, waiting (re-trying every :data:`GPU_RETRY` seconds, its reason
   in ``launcher.json``) while too few are free; the ledger's locks are held by the launcher and inherited by
   the ranks, so the devices stay taken until every one of them has exited, however it ends;
2. picks a free ``MASTER_PORT`` and starts every rank of the execution, ``procs_per_node`` ranks per "node",
   each node's ranks in one process group, stdout and stderr of each rank to its own file;
3. waits for the ranks without polling the library: it sleeps in ``sigtimedwait`` on SIGCHLD and SIGTERM,
   waking early only for the time limit, the kill deadline and (with a memory limit) the memory sampling;
4. writes each rank's exit to ``rank-<r>.exit`` and the execution's outcome to ``result.json``, once what the
   ranks left running is ended: the launcher is their child subreaper (Linux), so every descendant a rank
   leaves behind (``subprocess.Popen`` without a wait, a daemon) becomes its child and is killed with SIGKILL
   before the GPUs go back to the ledger, as Slurm's step end kills the step's cgroup;
5. under the job lock, starts the next execution if a requeue planned one (and the job is not held or stopped).

Ending an execution: SIGTERM to every node's process group, then SIGKILL after the plan's grace period (a job
with a cessation warning gets its warning signal first: ``seconds`` before the time limit, or ``seconds`` before
the SIGTERM of a stop or requeue). The
launcher ends an execution when a rank fails (the others are terminated: a distributed job cannot go on
without a rank), at the time limit (cause ``timeout``), when a rank's resident memory exceeds the limit (that
rank is SIGKILLed at once: cause ``out-of-memory``), or when asked with SIGTERM; then ``end-request.json``
says why (``stop`` or ``requeue``).

All files are written atomically (write to a temporary file, then rename), so a reader in another process sees
either the old content or the new, never half a file. The file names here are the single source of truth for
the layout; :mod:`dispatch.local.layout` imports them.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

MANIFEST = "manifest.json"
LOCK = "lock"
GATE_OPEN = "open.json"
HOLDS = "holds.json"
STOPPED = "stopped.json"
EXECUTIONS = "executions"
PLAN = "plan.json"
SPAWNED = "spawned.json"
LAUNCHER = "launcher.json"
END_REQUEST = "end-request.json"
RESULT = "result.json"
LAUNCHER_LOG = "launcher.log"
PROGRESS = "progress"
"""The execution's progress directory: each rank's ``DISPATCH_PROGRESS_DIR`` (see :func:`dispatch.job.progress`)."""
CLAIM = "claim.{nonce}.json"
"""One spawn's arbitration file, created exclusively by whichever comes first: the spawned launcher (it runs)
or its spawner giving up on it (it never runs)."""

GPUS = "gpus"
"""The GPU ledger's directory, beside ``jobs`` in the state directory (see :func:`gpu_ledger_dir`)."""
GPU_RETRY = 0.5
"""Seconds between two tries of a launcher waiting for free GPUs (a device frees when its holder exits, which
no signal tells this process; a stop or requeue still wakes it at once)."""

MEMORY_SAMPLE = 0.05
"""Seconds between two samples of the ranks' resident memory, when a memory limit is set."""

_WAKE = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


# ----- files ----------------------------------------------------------------------------------------------------


def write_json(path: str, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` atomically (temporary file, fsync-free rename), mode 0600."""
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def claim(exec_dir: str, nonce: str, data: dict[str, Any]) -> bool:
    """Create spawn ``nonce``'s claim file holding ``data``; False if it exists (the other side came first)."""
    try:
        fd = os.open(os.path.join(exec_dir, CLAIM.format(nonce=nonce)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return True


def abandoned(exec_dir: str, nonce: str) -> bool:
    """Whether spawn ``nonce``'s spawner won its claim: that launcher never ran and never will."""
    data = read_json(os.path.join(exec_dir, CLAIM.format(nonce=nonce)))
    return isinstance(data, dict) and data.get("abandoned") is True


def read_json(path: str) -> Any:
    """The JSON in ``path``, or None when it does not exist (or is unreadable half-way, which atomic writes
    prevent)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except ValueError:
        return None


@contextlib.contextmanager
def job_lock(job_dir: str) -> Iterator[None]:
    """The job's lock (``flock`` on ``<job>/lock``): every change of the job's state files happens under it."""
    fd = os.open(os.path.join(job_dir, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def execution_dir(job_dir: str, restart: int) -> str:
    return os.path.join(job_dir, EXECUTIONS, str(restart))


def gpu_ledger_dir(job_dir: str) -> str:
    """The GPU ledger shared by every job of ``job_dir``'s state directory: ``<state dir>/gpus``."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(job_dir))), GPUS)


def rank_devices(devices: list[str], gpus_per_node: int, procs_per_node: int, node: int, local: int) -> list[str]:
    """The devices rank ``local`` of node ``node`` sees, of the execution's ``devices``: node ``k`` gets the
    ``k``-th block of ``gpus_per_node``, and its ranks divide the block evenly when ``gpus_per_node`` is a
    multiple of ``procs_per_node`` (otherwise each rank sees the whole block)."""
    block = list(devices[node * gpus_per_node : (node + 1) * gpus_per_node])
    if gpus_per_node >= procs_per_node and gpus_per_node % procs_per_node == 0:
        per = gpus_per_node // procs_per_node
        return block[local * per : (local + 1) * per]
    return block


def rank_exit_path(exec_dir: str, rank: int) -> str:
    return os.path.join(exec_dir, f"rank-{rank}.exit")


# ----- the plan ---------------------------------------------------------------------------------------------------


def _load_kit(name: str, package: str = "adapterkit") -> Any:
    """:mod:`dispatch.<package>.<name>`, by path (this file imports nothing of dispatch; the kit's ``rankenv``
    and ``rankends`` and the local ``ledger`` need the standard library only)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    folder = here if package == "local" else os.path.join(here, os.pardir, package)
    path = os.path.join(folder, f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_dispatch_{package}_{name}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


_RANKENV = _load_kit("rankenv")
_RANKENDS = _load_kit("rankends")
_LEDGER = _load_kit("ledger", "local")


def rank_env(
    plan: dict[str, Any], rank: dict[str, Any], master_port: int | str, deadline: float | None = None
) -> dict[str, str]:
    """The variables dispatch sets for one rank (on top of the inherited environment and the spec's env): the
    kit's rank environment (:func:`dispatch.adapterkit.rankenv.rank_env`) and the execution's own."""
    layout = _RANKENV.RankLayout(int(plan["nodes"]), int(plan["procsPerNode"]))
    env: dict[str, str] = _RANKENV.rank_env(
        layout, int(rank["rank"]), master_addr="127.0.0.1", master_port=master_port,
        node=f"local-{rank['nodeRank']}",
    )  # fmt: skip
    env.update(
        {
            "DISPATCH_JOB": str(plan["jobId"]),
            "DISPATCH_SUBMISSION": str(plan["submission"]),
            "DISPATCH_SCHEDULER_ID": str(plan["schedulerId"]),
            "DISPATCH_EXECUTION": str(plan["execution"]),
            "DISPATCH_RESTART": str(plan["restart"]),
        }
    )
    if "gpus" in rank:  # its share of the host's GPUs (dispatch.local.gpus)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(rank["gpus"])
    if plan.get("checkpointDir"):
        env["DISPATCH_CHECKPOINT_DIR"] = str(plan["checkpointDir"])
    warning = plan.get("warning")
    if warning:
        env["DISPATCH_CESSATION_SIGNAL"] = str(warning["signal"])
        env["DISPATCH_CESSATION_GRACE"] = f"{float(warning['seconds']):g}"
    if deadline is not None:
        env["DISPATCH_DEADLINE"] = f"{deadline:.3f}"
    return env


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the ranks' rendezvous may still race another process for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ----- running one execution -----------------------------------------------------------------------------------------


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _status_to_exit(status: int) -> dict[str, Any]:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return {"exitCode": 128 + sig, "signal": sig}
    return {"exitCode": os.WEXITSTATUS(status), "signal": None}


class Execution:
    """One execution's ranks and the bookkeeping that decides its outcome."""

    def __init__(self, job_dir: str, restart: int) -> None:
        self.job_dir = job_dir
        self.restart = restart
        self.dir = execution_dir(job_dir, restart)
        plan = read_json(os.path.join(self.dir, PLAN))
        if not isinstance(plan, dict):
            raise RuntimeError(f"no plan in {self.dir}")
        self.plan: dict[str, Any] = plan
        self.grace = float(plan.get("grace", 5.0))
        self.procs: dict[int, int] = {}  # pid -> rank
        self.popens: list[subprocess.Popen[bytes]] = []  # kept so that subprocess never reaps them behind our back
        self.pgids: list[int] = []
        self.exits: dict[int, dict[str, Any]] = {}  # rank -> exit
        self.started_at = time.time()
        self.ending: str | None = None  # why we are ending it: stop, requeue, timeout, oom, rank, launch, signal
        self.ending_detail = ""
        self.kill_at: float | None = None
        self.term_at: float | None = None  # SIGTERM due (after the cessation warning)
        self.warning: dict[str, Any] | None = plan.get("warning") or None
        self.warned = False
        limit = plan.get("timeLimit")
        self.deadline: float | None = self.started_at + float(limit) if limit else None
        self.port = 0
        self.grant: Any = None  # the ledger's Grant of this execution's GPUs, once taken

    def take_gpus(self) -> str:
        """Take the execution's GPUs from the ledger, waiting while too few are free (the reason goes to
        ``launcher.json``). ``"run"`` once they are taken (or none is asked for): the time limit counts from
        then; ``"ended"`` if a stop or requeue came first (nothing runs); ``"held"`` if a hold was placed while it
        waited: the execution is put back as not spawned (:meth:`unspawn`), and a release launches it anew.

        A hold and the start of the ranks exclude each other by the job lock: :meth:`LocalBackend.hold` holds
        a waiting execution only while ``launcher.json`` says ``waiting``, which this rewrites under the lock
        once it has the devices and has found no hold."""
        per_node = int(self.plan.get("gpusPerNode") or 0)
        pool = [str(d) for d in self.plan.get("gpuPool") or []]
        if per_node == 0 or not pool:
            return "run"
        count = per_node * int(self.plan["nodes"])
        holder = {"jobId": self.plan.get("jobId"), "schedulerId": self.plan.get("schedulerId"), "pid": os.getpid()}
        said = ""
        while True:
            if os.path.exists(os.path.join(self.dir, END_REQUEST)):
                self.end_request()
                return "ended"
            got = _LEDGER.try_acquire(gpu_ledger_dir(self.job_dir), pool, count, holder)
            with job_lock(self.job_dir):
                if read_json(os.path.join(self.job_dir, HOLDS)):
                    if isinstance(got, _LEDGER.Grant):
                        got.release()
                    self.unspawn()
                    return "held"
                if isinstance(got, _LEDGER.Grant):
                    self.grant = got
                    self.started_at = time.time()
                    limit = self.plan.get("timeLimit")
                    self.deadline = self.started_at + float(limit) if limit else None
                    write_json(os.path.join(self.dir, LAUNCHER), self.launcher_info())
                    return "run"
                reason = got.reason()
                if reason != said:
                    write_json(os.path.join(self.dir, LAUNCHER), {**self.launcher_info(), "waiting": reason})
                    said = reason
            info = signal.sigtimedwait(_WAKE, GPU_RETRY)
            if info is not None and info.si_signo != signal.SIGCHLD:
                self.end_request()
                return "ended"

    def unspawn(self) -> None:
        """Put this execution back as planned, not spawned: it never started a rank. Under the job lock."""
        for name in (SPAWNED, LAUNCHER):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.dir, name))

    def rank_gpus(self, rank: dict[str, Any]) -> dict[str, Any]:
        """``rank`` with its share of the execution's devices (unchanged when the ledger gave none)."""
        if self.grant is None:
            return rank
        per_node = int(self.plan["gpusPerNode"])
        share = rank_devices(self.grant.devices, per_node, int(self.plan["procsPerNode"]), int(rank["nodeRank"]),
                             int(rank["localRank"]))  # fmt: skip
        return {**rank, "gpus": share}

    def launcher_info(self) -> dict[str, Any]:
        info = {
            "pid": os.getpid(),
            "startedAt": self.started_at,
            "masterPort": self.port,
            "pgids": list(self.pgids),
            "ranks": {str(r): pid for pid, r in self.procs.items()},
        }
        if self.grant is not None:
            info["gpus"] = list(self.grant.devices)
        return info

    def start_ranks(self) -> None:
        plan = self.plan
        os.makedirs(os.path.join(self.dir, PROGRESS), exist_ok=True)
        env_base = dict(os.environ)
        env_base.update(plan.get("env") or {})
        blocked = {signal.Signals["SIG" + str(self.warning["signal"])]} if self.warning else set()
        for rank in map(self.rank_gpus, plan["ranks"]):
            env = dict(env_base)
            env.update(rank_env(plan, rank, self.port, self.deadline))
            env["DISPATCH_PROGRESS_DIR"] = os.path.join(self.dir, PROGRESS)
            node = int(rank["nodeRank"])
            group = self.pgids[node] if node < len(self.pgids) else 0
            out = open(rank["stdout"], "ab")  # noqa: SIM115 - handed to the child, closed below
            err = open(rank["stderr"], "ab")  # noqa: SIM115
            try:
                proc = subprocess.Popen(
                    plan["argv"],
                    cwd=plan["cwd"],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    preexec_fn=_child_setup(group, blocked, plan.get("umask")),
                    close_fds=True,
                    pass_fds=tuple(self.grant.fds) if self.grant is not None else (),  # the GPUs' locks
                )
            except OSError as exc:
                message = f"dispatch: cannot start {plan['argv'][0]!r} in {plan['cwd']!r}: {exc.strerror or exc}\n"
                err.write(message.encode("utf-8", "replace"))
                self.exits[int(rank["rank"])] = {
                    "exitCode": 127,
                    "signal": None,
                    "launchError": message.strip().removeprefix("dispatch: "),
                    "endedAt": time.time(),
                }
                self.begin_ending("launch", message.strip().removeprefix("dispatch: "))
                return
            finally:
                out.close()
                err.close()
            if node >= len(self.pgids):
                self.pgids.append(proc.pid)
            self.popens.append(proc)
            self.procs[proc.pid] = int(rank["rank"])
            write_json(os.path.join(self.dir, LAUNCHER), self.launcher_info())

    def signal_all(self, sig: int) -> None:
        """Send ``sig`` once to every rank: to each node's process group, and to any live rank outside them (one
        whose node's first rank had already exited when it started)."""
        for pgid in self.pgids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        for pid in self.procs:
            try:
                if os.getpgid(pid) in self.pgids:
                    continue
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue

    def warn(self) -> None:
        """Send the job's cessation warning (``dispatch.CessationWarning``) once."""
        if self.warning is None or self.warned:
            return
        self.warned = True
        self.signal_all(signal.Signals["SIG" + str(self.warning["signal"])])

    def begin_ending(self, why: str, detail: str = "") -> None:
        """End the execution: SIGTERM, SIGKILL after the grace. A stop or requeue of a job that asked for a
        cessation warning is warned first and gets SIGTERM the warning's seconds later (at the time limit the
        warning went out before, see :meth:`run`); a failed rank, memory or launch failure ends at once."""
        if self.ending is not None:
            return
        self.ending, self.ending_detail = why, detail
        if self.warning is not None and not self.warned and why in ("stop", "requeue", "signal"):
            self.warn()
            self.term_at = time.time() + float(self.warning["seconds"])
            return
        self.terminate()

    def terminate(self) -> None:
        self.term_at = None
        self.signal_all(signal.SIGTERM)
        self.kill_at = time.time() + self.grace

    def reap(self) -> None:
        while self.procs:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.procs.clear()
                return
            if pid == 0:
                return
            rank = self.procs.pop(pid, None)
            if rank is None:
                continue
            ex = _status_to_exit(status)
            ex["endedAt"] = time.time()
            self.exits[rank] = ex
            write_json(rank_exit_path(self.dir, rank), ex)
            end = _rank_end(rank, ex)
            if end.failed and self.ending is None:
                self.begin_ending("rank", end.describe())

    def check_memory(self) -> None:
        limit = self.plan.get("memoryMb")
        if not limit or self.ending == "oom":
            return
        for pid, rank in list(self.procs.items()):
            rss = _rss_bytes(pid)
            if rss > int(limit) * 1024 * 1024:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                detail = f"rank {rank} used {rss / 2**20:.0f} MiB, over its limit of {int(limit)} MiB"
                if self.ending is None:
                    self.begin_ending("oom", detail)
                return

    def end_request(self) -> None:
        req = read_json(os.path.join(self.dir, END_REQUEST))
        reason = req.get("reason") if isinstance(req, dict) else None
        if reason in ("stop", "requeue"):
            self.begin_ending(str(reason))
        else:
            self.begin_ending("signal", "the launcher was sent a termination signal")

    def run(self) -> dict[str, Any] | None:
        """The execution's result; None when a hold sent it back unspawned (then nothing is to be written). What
        the ranks left running is ended before their devices are freed (:func:`end_leftovers`)."""
        try:
            return self._run()
        finally:
            end_leftovers()
            if self.grant is not None:
                self.grant.release()

    def _run(self) -> dict[str, Any] | None:
        taken = "ended"
        if os.path.exists(os.path.join(self.dir, END_REQUEST)):
            self.end_request()
        else:
            taken = self.take_gpus()
        if taken == "held":
            return None
        if taken == "run":
            self.port = free_port()
            write_json(os.path.join(self.dir, LAUNCHER), self.launcher_info())
            self.start_ranks()
        limit = self.plan.get("timeLimit")
        deadline = self.deadline
        warn_at = deadline - float(self.warning["seconds"]) if deadline is not None and self.warning else None
        while self.procs:
            self.reap()
            if not self.procs:
                break
            now = time.time()
            if warn_at is not None and now >= warn_at and self.ending is None:
                self.warn()
            if deadline is not None and now >= deadline and self.ending is None:
                self.begin_ending("timeout", f"the time limit of {float(limit or 0):g}s was reached")
            if self.term_at is not None and now >= self.term_at:
                self.terminate()
            if self.kill_at is not None and now >= self.kill_at:
                self.signal_all(signal.SIGKILL)
                self.kill_at = now + 1.0
            self.check_memory()
            waits = [1.0]
            if self.plan.get("memoryMb"):
                waits.append(MEMORY_SAMPLE)
            if deadline is not None and self.ending is None:
                waits.append(deadline - now)
            if warn_at is not None and not self.warned and self.ending is None:
                waits.append(warn_at - now)
            if self.term_at is not None:
                waits.append(self.term_at - now)
            if self.kill_at is not None:
                waits.append(self.kill_at - now)
            info = signal.sigtimedwait(_WAKE, max(0.005, min(waits)))
            if info is not None and info.si_signo != signal.SIGCHLD:
                self.end_request()
        return self.result()

    def result(self) -> dict[str, Any]:
        """The execution's outcome: the launcher's own reason to end it (stop, requeue, time limit, memory), else
        the ranks' combined end (:func:`dispatch.adapterkit.rankends.combine`: the first failure in time wins,
        a rank that could not start is not-launchable, success only when every rank exited 0). The exit code and
        signal are the first failing rank's (a rank killed by a signal reads ``128 + signal``)."""
        now = time.time()
        base: dict[str, Any] = {"endedAt": now, "startedAt": self.started_at, "exitCode": None, "signal": None}
        ends = [_rank_end(rank, ex) for rank, ex in sorted(self.exits.items())]
        fail = _RANKENDS.first_failure(ends)
        if fail is not None:
            base["exitCode"], base["signal"] = fail.exit_code, fail.signal
        why, detail = self.ending, self.ending_detail
        if why in ("stop", "signal"):
            return {**base, "state": "cancelled", "cause": "cancelled", "detail": detail or "stopped on request"}
        if why == "requeue":
            return {**base, "state": "cancelled", "cause": "cancelled", "detail": "ended by a requeue"}
        if why == "timeout":
            return {**base, "state": "failed", "cause": "timeout", "detail": detail}
        if why == "oom":
            return {**base, "state": "failed", "cause": "out-of-memory", "detail": detail}
        verdict = _RANKENDS.combine(ends, len(self.plan["ranks"]))
        if verdict is None:
            return {**base, "state": "unknown", "cause": "unknown", "detail": "not every rank reported its end"}
        return {
            **base,
            "state": verdict.state,
            "cause": verdict.cause,
            "exitCode": verdict.exit_code,
            "signal": verdict.signal,
            "detail": verdict.detail,
        }


def _rank_end(rank: int, ex: dict[str, Any]) -> Any:
    """One rank's exit record as the kit's :class:`~dispatch.adapterkit.rankends.RankEnd`."""
    return _RANKENDS.RankEnd(
        rank,
        float(ex["endedAt"]),
        exit_code=ex.get("exitCode"),
        signal=ex.get("signal") or None,
        launch_error=ex.get("launchError"),
    )


PR_SET_CHILD_SUBREAPER = 36  # prctl(2)
LEFTOVER_WAIT = 5.0
"""Seconds :func:`end_leftovers` spends killing and reaping what the ranks left before it gives up (a process in
uninterruptible sleep cannot be reaped at once)."""


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux ``prctl``): a rank's orphaned children
    become its children, never init's, so :func:`end_leftovers` finds them. False where it is not offered."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _children(parent: int) -> list[int]:
    """The live processes whose parent is ``parent`` (from ``/proc``)."""
    kids = []
    for name in _listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 1 and fields[1] == str(parent) and fields[0] != "Z":
            kids.append(int(name))
    return kids


def end_leftovers(wait: float = LEFTOVER_WAIT) -> list[int]:
    """SIGKILL and reap every child this launcher still has once its ranks are reaped: what they left running,
    reparented here (:func:`become_subreaper`). Returns the pids killed. Only children are signalled (never a
    process group by number, which could have been reused by then)."""
    me, killed = os.getpid(), list[int]()
    deadline = time.monotonic() + wait
    while True:
        while True:  # reap what has ended (a zombie is no leftover)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        kids = _children(me)
        if not kids or time.monotonic() > deadline:
            return killed
        for pid in kids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.02)


def _child_setup(group: int, blocked: set[signal.Signals], umask: int | None = None) -> Any:
    """The rank's start, between fork and exec: its own mask (``blocked`` only: the cessation warning, pending
    until :mod:`dispatch.job` installs its handler and unblocks it, so an early warning is neither fatal nor
    lost), the spec's umask when it has one, and its node's process group."""

    def setup() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if umask is not None:
            os.umask(umask)
        try:
            os.setpgid(0, group)
        except OSError:
            os.setpgid(0, 0)  # the node's first rank is gone already: a group of its own

    return setup


# ----- chaining executions -----------------------------------------------------------------------------------------


def next_to_launch(job_dir: str) -> int | None:
    """The restart number to launch now, or None. Call under the job lock.

    An execution is launched when its plan exists and it was not spawned yet, every earlier spawned execution has
    a result, the gate is open, no hold is placed and the job is not stopped.
    """
    if not os.path.exists(os.path.join(job_dir, GATE_OPEN)):
        return None
    if os.path.exists(os.path.join(job_dir, STOPPED)):
        return None
    if read_json(os.path.join(job_dir, HOLDS)):
        return None
    restarts = sorted(int(n) for n in _listdir(os.path.join(job_dir, EXECUTIONS)) if n.isdigit())
    for r in restarts:
        d = execution_dir(job_dir, r)
        if not os.path.exists(os.path.join(d, SPAWNED)):
            return r if os.path.exists(os.path.join(d, PLAN)) else None
        if not os.path.exists(os.path.join(d, RESULT)):
            return None
    return None


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []


def run_chain(job_dir: str, restart: int) -> None:
    """Run execution ``restart``, then every execution a requeue planned after it."""
    current: int | None = restart
    while current is not None:
        execution = Execution(job_dir, current)
        result = execution.run()
        if result is None:
            return  # held while it waited for GPUs: back to planned; a release launches it again
        with job_lock(job_dir):
            write_json(os.path.join(execution.dir, RESULT), result)
            current = next_to_launch(job_dir)
            if current is not None:
                write_json(os.path.join(execution_dir(job_dir, current), SPAWNED), {"at": time.time(), "by": "chain"})


def main(argv: list[str]) -> int:
    """Fork the detached launcher of one execution; exit 0 once it runs. With a spawn nonce the launcher first
    claims the spawn (:func:`claim`) and exits without running anything if its spawner gave up on it."""
    if len(argv) not in (2, 3) or not argv[1].isdigit():
        print("usage: launcher.py <job directory> <restart> [<spawn nonce>]", file=sys.stderr)
        return 2
    job_dir, restart = os.path.abspath(argv[0]), int(argv[1])
    nonce = argv[2] if len(argv) == 3 else None
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAKE)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as r:
            ready = r.read(1)
        return 0 if ready == b"1" else 1
    os.close(read_end)
    with contextlib.suppress(OSError):
        os.setsid()
    become_subreaper()
    exec_dir = execution_dir(job_dir, restart)
    if nonce is not None and not claim(exec_dir, nonce, {"pid": os.getpid(), "at": time.time()}):
        os._exit(1)  # the spawner gave up on this start and may have started another launcher: run nothing
    first: dict[str, Any] = {"pid": os.getpid(), "startedAt": time.time(), "pgids": []}
    plan = read_json(os.path.join(exec_dir, PLAN))
    if isinstance(plan, dict) and plan.get("gpusPerNode") and plan.get("gpuPool"):
        first["waiting"] = "taking its GPUs"  # pending, not running, until the ledger gave them
    write_json(os.path.join(exec_dir, LAUNCHER), first)
    os.write(write_end, b"1")
    os.close(write_end)
    try:
        run_chain(job_dir, restart)
    except BaseException as exc:  # the last word goes to the file, never to a terminal that is gone
        with contextlib.suppress(OSError):
            write_json(
                os.path.join(exec_dir, RESULT) + ".launcher-error",
                {"error": f"{type(exc).__name__}: {exc}", "at": time.time()},
            )
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
