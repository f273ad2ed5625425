"""The executor's proofs, written once and run on every cluster (local adapter, real Slurm 22.05 and 26.05):
each takes a way to make an :class:`~dispatch.executor.Executor` on that cluster.

The functions below travel by value (``register_pickle_by_value``): the jobs cannot import this test module, nor
dispatch itself on a cluster where it is not installed (the sid chroot), so :mod:`dispatch.job` travels by value too."""

from __future__ import annotations

import concurrent.futures
import os
import pwd
import shlex
import shutil
import signal
import stat
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

import dispatch.job
from dispatch.executor import CallError, CallFailed, CallFuture, Executor, RemoteTraceback
from dispatch.job import context
from dispatch.outcome import State

from ..peer import as_peer

cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(dispatch.job)

Make = Callable[..., Executor]


class Boom(Exception):
    """An exception of the function's own, raised on the cluster."""


def square(x: int) -> int:
    return x * x


def add(a: int, b: int, *, c: int = 0) -> int:
    return a + b + c


def explode(message: str) -> None:
    raise Boom(message)


def where() -> dict[str, Any]:
    """Every rank's place in the job (read the way a multi-rank function reads it)."""
    ctx = context()
    return {"rank": ctx.rank, "world": ctx.world_size, "node_rank": ctx.node_rank, "job": ctx.job, "pid": os.getpid()}


def nap(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def returns(value: Any) -> Any:
    return value


def fail_or_nap(x: int) -> int:
    """Raises Boom for 0, returns ``x`` up to 5, sleeps ``x`` seconds above."""
    if x == 0:
        raise Boom("the first item fails")
    if x > 5:
        time.sleep(x)
    return x


def rank_1_killed() -> str:
    """Rank 0 returns; rank 1 is killed once rank 0's result is written (no result of its own, as an
    out-of-memory kill leaves it). The runner's ``sys.argv[1]`` is the call directory."""
    if context().rank == 1:
        while not os.path.exists(os.path.join(sys.argv[1], "result.0.pkl")):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    return "rank0"


def value_returned(make: Make) -> None:
    with make() as ex:
        future = ex.submit(add, 2, 3, c=10)
        assert future.result(timeout=180) == 15
        assert future.done() and not future.cancelled() and future.exception() is None
        record = ex.cluster.get(future.job_id)
        assert record.outcome is not None and record.outcome.state is State.SUCCEEDED
        assert record.spec.name == "call add"


def exception_raised(make: Make) -> None:
    with make() as ex:
        future = ex.submit(explode, "on the cluster")
        with pytest.raises(Boom, match="on the cluster") as caught:
            future.result(timeout=180)
        assert isinstance(caught.value.__cause__, RemoteTraceback)
        remote = caught.value.__cause__.text  # the cluster's: the runner's frame, then the function's
        assert f"{ex._session.remote}/run.py" in remote and "in explode" in remote, remote
        assert "Boom: on the cluster" in remote, remote
        assert isinstance(future.exception(), Boom)
        record = ex.cluster.get(future.job_id)
        assert record.outcome is not None and record.outcome.state is State.FAILED
        assert record.outcome.exit_code == 1


def two_nodes(make: Make) -> None:
    with make(nodes=2) as ex:
        future = ex.submit(where)
        first = future.result(timeout=180)
        assert first["rank"] == 0 and first["world"] == 2 and first["job"] == future.job_id
    with make(nodes=2, all_ranks=True) as ex:
        future = ex.submit(where)
        every = future.result(timeout=180)
        assert [r["rank"] for r in every] == [0, 1]
        assert [r["node_rank"] for r in every] == [0, 1]
        assert {r["world"] for r in every} == {2}


def map_many(make: Make, n: int = 200, timeout: float = 600) -> None:
    with make() as ex:
        results = list(ex.map(square, range(n), timeout=timeout))
    assert results == [i * i for i in range(n)]


def cancelled(make: Make) -> None:
    with make() as ex:
        future = ex.submit(nap, 600)
        done: list[concurrent.futures.Future[Any]] = []
        future.add_done_callback(done.append)
        stops: list[CallFuture] = []
        stop = ex._cancel
        ex._cancel = lambda f: (stops.append(f), stop(f))[1]  # type: ignore[method-assign]
        assert future.cancel()
        assert future.cancelled() and done == [future]
        with pytest.raises(concurrent.futures.CancelledError):
            future.result(timeout=1)
        # a second cancel() is answered as concurrent.futures answers it, and stops nothing again
        assert future.cancel() and future.cancelled() and stops == [future]
        record = ex.cluster.get(future.job_id)
        assert record.stop_requested
        other = ex.submit(square, 7)
        assert other.result(timeout=180) == 49  # the executor goes on after a cancel


def result_over_cap(make: Make) -> None:
    from dispatch.executor import ResultTooLarge

    with make(max_result_bytes=1000) as ex:
        future: CallFuture = ex.submit(returns, b"x" * 5000)
        with pytest.raises(ResultTooLarge, match="over the cap of 1000"):
            future.result(timeout=180)
        assert ex.submit(returns, b"small").result(timeout=180) == b"small"


class Summer:
    """A checkpointable callable (submitit's convention): sums ``i * i`` for i below ``n``, one step every
    ``delay`` seconds, resuming from ``start`` with the partial ``total``; ``starts`` lists where each execution
    began."""

    def __init__(self, delay: float, start: int = 0, total: int = 0, starts: tuple[int, ...] = ()) -> None:
        self.delay, self.start, self.total, self.starts = delay, start, total, starts

    def __call__(self, n: int) -> tuple[int, tuple[int, ...]]:
        self.starts = (*self.starts, self.start)
        for i in range(self.start, n):
            time.sleep(self.delay)
            self.total += i * i  # one step, then its state: a signal between two bytecodes sees them in step
            self.start = i + 1
        return self.total, self.starts

    def checkpoint(self, n: int) -> Summer:
        return Summer(self.delay, self.start, self.total, self.starts)


def checkpointed_and_resumed(make: Make, time_limit: float, steps: int, delay: float) -> None:
    rules = {"rules": [{"cause": ["timeout", "preempted"], "action": "resubmit", "limit": 5}]}
    with make(time_limit=time_limit, rules=rules) as ex:
        future = ex.submit(Summer(delay), steps)
        total, starts = future.result(timeout=600)
        assert total == sum(i * i for i in range(steps))
        assert len(starts) >= 2 and starts[0] == 0 and list(starts) == sorted(set(starts)), starts
        record = ex.cluster.get(future.job_id)
        # the rule resubmitted it: every execution after the first resumed from a checkpoint
        assert len(record.submissions) >= 2, (starts, [sub.n for sub in record.submissions])


@contextmanager
def gated(make: Make, *, runs: bool = True, python: str = sys.executable, **kw: Any) -> Iterator[tuple[Executor, Path]]:
    """An executor (``make(**kw)``) whose jobs wait, before anything of the call runs, until the yielded gate
    file exists; then run ``python`` with the rank's arguments (``runs``) or exit 0 without running anything (a
    job that ends without writing a result). The waiting interpreter lives in a directory of this user's
    alone. On the way out the gate is opened and the executor shut down, its calls not done cancelled."""
    private = Path(tempfile.mkdtemp(prefix="dispatch-gate-"))
    gate = private / "go"
    then = f'exec {shlex.quote(python)} "$@"' if runs else "exit 0"
    wrapper = private / "python"
    wrapper.write_text(f"#!/bin/sh\nwhile [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.1; done\n{then}\n")
    wrapper.chmod(0o700)
    try:
        ex = make(python=str(wrapper), **kw)
        try:
            yield ex, gate
        finally:
            gate.touch()
            ex.shutdown(wait=True, cancel_futures=True)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


PEER_LOOKS = r"""
import json, os, sys
call = sys.argv[1]
session = os.path.dirname(call)
out = {}

def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except OSError as exc:
        out[name] = type(exc).__name__

def plant(path):
    with open(path, "xb") as f:
        f.write(b"forged")

attempt("list the session", lambda: os.listdir(session))
attempt("read call.pkl", lambda: open(os.path.join(call, "call.pkl"), "rb").read())
attempt("read the key", lambda: open(os.path.join(call, "key"), "rb").read())
attempt("plant result.0.pkl", lambda: plant(os.path.join(call, "result.0.pkl")))
mine = os.path.join(os.path.dirname(session), "peer-" + os.urandom(4).hex())
plant(mine)
attempt("replace call.pkl", lambda: os.replace(mine, os.path.join(call, "call.pkl")))
attempt("replace run.py", lambda: os.replace(mine, os.path.join(session, "run.py")))
os.unlink(mine)
print(json.dumps(out))
"""
"""Run as another user: every way into a session it may try, and how each ended (an OSError's type, or done)."""

PEER_SWAPS = r"""
import json, os, pickle, sys
session, name, mark = sys.argv[1:4]

class Evil:
    def __reduce__(self):
        return (open, (mark, "w"))

try:
    os.rename(session, session + ".taken")
except OSError as exc:
    print(json.dumps(type(exc).__name__))
    sys.exit(0)

def put(path, data):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o666)

os.mkdir(session)
os.chmod(session, 0o777)
put(os.path.join(session, "run.py"), ("open(%r, 'w')\n" % mark).encode())
call = os.path.join(session, name)
os.mkdir(call)
os.chmod(call, 0o777)
put(os.path.join(call, "key"), b"peer" * 8)
put(os.path.join(call, "call.pkl"), pickle.dumps(Evil()))
put(os.path.join(call, "result.0.pkl"), pickle.dumps(Evil()))
print(json.dumps("swapped"))
"""
"""Run as another user: put its own session directory (a runner, a call and a result that each leave ``mark``
when run or unpickled) in place of the caller's, under the same name."""


def another_user_is_refused(make: Make, peer: pwd.struct_passwd, python: str = sys.executable) -> None:
    """Another Unix user of the machine, on the shared directory the executor was given: it cannot list a
    session, read a call or its key, plant a result or replace a call or the runner (the files are 0600 in
    0700 directories, whatever the shared directory's bits); where the shared directory lets it put its own
    session directory in the caller's place (writable by all and not sticky), the job refuses its runner and
    the caller its result (a CallFailed naming why), and a new call is refused at submission."""
    with gated(make, python=python) as (ex, gate):
        future = ex.submit(square, 7)
        session, call = ex._session.local, future._call.local
        shared = session.parent
        made = [session, session / "run.py", call, call / "call.pkl", call / "key"]
        modes = {str(p.relative_to(shared)): oct(mode_of(p)) if p.exists() else None for p in made}
        assert list(modes.values()) == ["0o700", "0o600", "0o700", "0o600", "0o600"], modes
        assert all(p.stat().st_uid == os.getuid() for p in (session, session / "run.py", call, call / "key"))
        looks = as_peer(peer, PEER_LOOKS, str(call))
        attempts = ["list the session", "read call.pkl", "read the key", "plant result.0.pkl"]
        attempts += ["replace call.pkl", "replace run.py"]
        assert looks == dict.fromkeys(attempts, "PermissionError")
        mark = shared / f"mark-{uuid.uuid4().hex[:8]}"
        swapped = as_peer(peer, PEER_SWAPS, str(session), call.name, str(mark))
        gate.touch()
        if mode_of(shared) & stat.S_ISVTX:
            assert swapped == "PermissionError"  # a sticky shared directory keeps the caller's names its own
            assert future.result(timeout=180) == 49
            return
        assert swapped == "swapped"
        with pytest.raises(CallFailed, match="is refused") as caught:
            future.result(timeout=180)
        assert f"owned by uid {peer.pw_uid}" in str(caught.value), caught.value
        record = ex.cluster.get(future.job_id)
        assert record.outcome is not None and record.outcome.state is State.FAILED  # the job refused the runner
        assert not mark.exists()  # nothing of the other user's ran, in the job or here
        with pytest.raises(CallError, match="is refused"):
            ex.submit(square, 2)
