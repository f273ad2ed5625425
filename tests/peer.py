"""A second Unix account for the tests that prove what another user of the machine can and cannot do: made with
useradd when missing (removed after if this test made it), held under a lock while a test uses it, and a way to
run a Python snippet as that user. The tests run as root (the test machines do)."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

PEER = "dispatch-peer"
"""A second Unix account, created for the test: another user of the same machine."""

PEER_LOCK = "/run/lock/dispatch-test-peer.lock"
"""Held while a test uses :data:`PEER`: the test command runs some modules twice at once (their group and the
fresh venv's run), and the second useradd would fail, or the first run's userdel remove the account under the
second."""

PEER_PYTHON = "/usr/bin/python3"
"""The system's Python: the peer cannot run the test's own interpreter when it lives in root's home."""


@contextmanager
def peer_account() -> Iterator[pwd.struct_passwd]:
    """The account :data:`PEER`, held under :data:`PEER_LOCK`."""
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


def as_peer(peer: pwd.struct_passwd, code: str, *args: str) -> Any:
    """Run ``code`` (it prints one JSON value) as ``peer`` with the system's Python; returns the value."""
    done = subprocess.run(
        [PEER_PYTHON, "-I", "-c", code, *args],
        user=peer.pw_uid,
        group=peer.pw_gid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def run_as_peer(peer: pwd.struct_passwd, argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as ``peer`` (no supplementary groups, in /, a bare PATH); the completed process, checked by
    the caller."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        argv,
        user=peer.pw_uid,
        group=peer.pw_gid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=180,
        **kw,
    )
