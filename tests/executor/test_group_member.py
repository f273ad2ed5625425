"""What ``Executor(group=G)`` trusts, shown: any member of G, not only the job's user, reads the call's key (0640)
and may replace files in the call directory (2770), so it can make the job's user, and the caller through a
result, run code of its choosing. docs/executor.md and docs/security.md say so (use a group only with members
you trust with your account). Here a member of G (the second account, its own primary group) plants a sealed
``call.pkl`` that the runner unpickles as the caller's uid."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dispatch
from dispatch.cluster import Cluster
from dispatch.executor import CallFailed, Executor
from dispatch.records.memory import MemoryRecords

from ..peer import as_peer
from . import scenarios

FORGE = r"""
import hashlib, hmac, json, os, pickle, sys
call, mark = sys.argv[1], sys.argv[2]
key = open(os.path.join(call, "key"), "rb").read()
class Mark:
    def __reduce__(self):
        return (os.system, ("id -u > " + mark,))
payload = pickle.dumps(Mark())
tag = hmac.new(key, b"call\0" + payload, hashlib.sha256).digest()
tmp = os.path.join(call, "forged")
with open(tmp, "wb") as f:
    f.write(b"dispatch-seal-1\n" + tag + payload)
os.chmod(tmp, 0o640)
os.replace(tmp, os.path.join(call, "call.pkl"))
print(json.dumps("planted"))
"""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    base = Path(tempfile.mkdtemp(prefix="dispatch-attack-"))
    base.chmod(0o755)
    (base / "state").mkdir(mode=0o755)
    (base / "state" / "calls").mkdir()
    (base / "state" / "calls").chmod(0o777)
    try:
        with dispatch.open(
            "local", adapter={"stateDir": str(base / "state"), "grace": 1}, records=MemoryRecords()
        ) as c:
            yield c
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_member_of_the_group_makes_the_job_run_its_code(cluster: Cluster, peer: pwd.struct_passwd) -> None:
    def make(**kw: Any) -> Executor:
        return Executor(cluster, poll=0.1, **kw)

    mark = Path(tempfile.mkdtemp(prefix="dispatch-mark-"))
    mark.chmod(0o777)
    try:
        with scenarios.gated(make, group=peer.pw_gid) as (ex, gate):
            future = ex.submit(scenarios.square, 6)
            assert as_peer(peer, FORGE, str(future._call.local), str(mark / "ran")) == "planted"
            gate.touch()
            with pytest.raises(CallFailed):
                future.result(timeout=120)  # the forged call returns nothing; its unpickling ran the code
        assert (mark / "ran").read_text().strip() == str(os.getuid())  # the peer's code ran as the caller's uid
    finally:
        shutil.rmtree(mark, ignore_errors=True)
