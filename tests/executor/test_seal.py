"""What the executor writes in the shared directory is its user's alone, and what it reads back is checked before
it is trusted (dispatch/executor/seal.py, on the local adapter): the modes, whatever the shared directory's bits
(or one group's, when configured); a forged, altered, exposed or linked result refused with a CallFailed before
it is unpickled; and another real Unix user of the machine, on a shared directory open to all (sticky or not),
refused at every way in it tries."""

from __future__ import annotations

import os
import pickle
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.cluster import Cluster
from dispatch.executor import CallFailed, Executor, run
from dispatch.records.memory import MemoryRecords

from ..peer import as_peer
from . import scenarios


@pytest.fixture
def shared_mode() -> int:
    return 0o777


@pytest.fixture
def cluster(shared_mode: int) -> Iterator[Cluster]:
    """A local cluster whose shared directory every user of the machine may enter and write (as a cluster's
    shared scratch is; ``shared_mode``, sticky or not); the path to it is open to all."""
    base = Path(tempfile.mkdtemp(prefix="dispatch-exec-"))
    base.chmod(0o755)
    (base / "state").mkdir(mode=0o755)
    (base / "state" / "calls").mkdir()
    (base / "state" / "calls").chmod(shared_mode)
    try:
        with dispatch.open(
            "local", adapter={"stateDir": str(base / "state"), "grace": 1}, records=MemoryRecords()
        ) as c:
            yield c
            for job in c.observer.list(active_only=True):
                c.operator.stop(job.id)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def make(cluster: Cluster) -> scenarios.Make:
    def make(**kw: Any) -> Executor:
        return Executor(cluster, poll=0.1, **kw)

    return make


@pytest.mark.parametrize("group", [None, os.getgid()], ids=["private", "group"])
def test_the_files_are_the_users_alone_or_one_groups(make: scenarios.Make, group: int | None) -> None:
    with make(group=group, keep_files=True) as ex:
        future = ex.submit(scenarios.square, 5)
        assert future.result(timeout=120) == 25
        session, call = ex._session.local, future._call.local
        paths = [session, session / "run.py", call, call / "call.pkl", call / "key", call / "result.0.pkl"]
        modes = [scenarios.mode_of(p) for p in paths]
        if group is None:
            assert modes == [0o700, 0o600, 0o700, 0o600, 0o600, 0o600]
        else:
            assert modes == [0o2750, 0o640, 0o2770, 0o640, 0o640, 0o640]
            assert {p.stat().st_gid for p in paths} == {group}
        assert {p.stat().st_uid for p in paths} == {os.getuid()}


def test_an_unknown_group_is_a_clear_error(make: scenarios.Make) -> None:
    with pytest.raises(ValueError, match="group 'no-such-group-here' is no group of this machine"):
        make(group="no-such-group-here")


class Evil:
    """Unpickled, it leaves ``mark``: what a planted result would do in the caller's Python."""

    def __init__(self, mark: Path) -> None:
        self.mark = str(mark)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.mark, "w"))


@pytest.mark.parametrize("forgery", ["unsealed", "another key", "rank 1's seal", "writable by all", "a link"])
def test_a_forged_or_exposed_result_is_refused_before_it_is_unpickled(
    make: scenarios.Make, tmp_path: Path, forgery: str
) -> None:
    mark = tmp_path / "mark"
    evil = pickle.dumps(Evil(mark))
    # the job ends without writing a result: the one in its place is the forgery
    with scenarios.gated(make, runs=False) as (ex, gate):
        future = ex.submit(scenarios.square, 3)
        path = future._call.local / run.result_name(0)
        key = getattr(future._call, "key", b"")
        if forgery == "unsealed":
            path.write_bytes(evil)
        elif forgery == "another key":
            path.write_bytes(run.seal(b"x" * 32, "result.0", evil))
        elif forgery == "rank 1's seal":
            path.write_bytes(run.seal(key, "result.1", evil))
        elif forgery == "writable by all":
            path.write_bytes(run.seal(key, "result.0", evil))
            path.chmod(0o666)
        else:
            elsewhere = tmp_path / "sealed.pkl"
            elsewhere.write_bytes(run.seal(key, "result.0", evil))
            elsewhere.chmod(0o600)
            path.symlink_to(elsewhere)
        gate.touch()
        with pytest.raises(CallFailed, match="the result of rank 0 .* is refused") as caught:
            future.result(timeout=120)
    assert not mark.exists()
    assert caught.value.job_id == future.job_id


@pytest.mark.parametrize("shared_mode", [0o777, 0o1777], ids=["shared-0777", "shared-1777"])
def test_another_user_is_refused_at_every_way_in(make: scenarios.Make, peer: pwd.struct_passwd) -> None:
    scenarios.another_user_is_refused(make, peer)


def test_another_user_cannot_read_a_groups_files_outside_the_group(
    make: scenarios.Make, peer: pwd.struct_passwd
) -> None:
    assert os.getgid() not in os.getgrouplist(peer.pw_name, peer.pw_gid)
    with scenarios.gated(make, group=os.getgid()) as (ex, gate):
        future = ex.submit(scenarios.square, 6)
        call = future._call.local
        assert stat.S_IMODE(call.stat().st_mode) == 0o2770
        looks = as_peer(peer, scenarios.PEER_LOOKS, str(call))
        assert set(looks.values()) == {"PermissionError"}, looks
        gate.touch()
        assert future.result(timeout=120) == 36
