"""A second Unix account for tests of what another user of the same machine can and cannot do (the dashboard's
token, forged files on shared storage). Use the ``peer`` fixture: ``from tests.peer import peer``."""

from __future__ import annotations

import fcntl
import os
import pwd
import subprocess
from collections.abc import Iterator

import pytest

PEER = "dispatch-peer"
"""A second Unix account, created for the test: another user of the same machine."""

PEER_LOCK = "/run/lock/dispatch-test-peer.lock"
"""Held while a test uses :data:`PEER` (see the ``peer`` fixture)."""


@pytest.fixture
def peer() -> Iterator[pwd.struct_passwd]:
    """The account :data:`PEER`, made with useradd (and removed after the test if this test made it). A lock holds
    it for the test: the test command runs a module twice at once (its group and the fresh venv's run), and
    the second useradd would fail, or the first run's userdel remove the account under the second."""
    if os.geteuid() != 0:
        pytest.fail("this test makes a second Unix account with useradd: run it as root (the test machines are)")
    with open(PEER_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = False
        try:
            pwd.getpwnam(PEER)
        except KeyError:
            argv = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PEER]
            subprocess.run(argv, check=True)
            made = True
        try:
            yield pwd.getpwnam(PEER)
        finally:
            if made:
                subprocess.run(["userdel", PEER], check=False)


def as_peer(account: pwd.struct_passwd, argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as ``account`` (no supplementary groups, in /, a bare PATH)."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        argv,
        user=account.pw_uid,
        group=account.pw_gid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=180,
        **kw,
    )
