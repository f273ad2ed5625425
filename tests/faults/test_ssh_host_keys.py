"""SSH host keys are verified: against the sid cluster's real sshd, a known-hosts file with the wrong key (or
without the host) makes the connection fail with an error that names the host key, before any command runs.

Runs on the Slurm adapter (``dispatch.slurm``) over its SSH transport. Needs root (the sid key is root's) and the
sid cluster (``sudo scripts/slurm/up.sh``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dispatch.clock import SystemClock
from dispatch.cluster import new_backend
from dispatch.errors import ConfigError, DispatchError
from dispatch.registry import adapter

pytestmark = pytest.mark.slurm_sid

CLUSTERS = Path(os.environ.get("DISPATCH_TEST_STATE", "/var/lib/dispatch-test")) / "clusters.json"


def sid() -> dict[str, Any]:
    if not CLUSTERS.exists():
        pytest.fail(f"{CLUSTERS} is missing: run `sudo scripts/slurm/up.sh`")
    desc: dict[str, Any] = json.loads(CLUSTERS.read_text())["sid"]
    if not os.access(desc["identity_file"], os.R_OK):
        pytest.fail(f"cannot read {desc['identity_file']}: run the tests as root")
    return desc


def backend_name(kind: str) -> str:
    try:
        adapter(kind)
    except ConfigError as exc:
        pytest.fail(f"the {kind} adapter cannot be opened: {exc}")
    return kind


def settings(desc: dict[str, Any], known_hosts: Path, **ssh: Any) -> dict[str, Any]:
    return {
        "transport": "ssh",
        "defaults": {"partition": desc["partitions"]["default"], "account": desc["account"]},
        "ssh": {
            "host": desc["host"],
            "user": desc["user"],
            "port": desc["port"],
            "identityFile": desc["identity_file"],
            "knownHostsFile": str(known_hosts),
            **ssh,
        },
    }


def wrong_key(tmp: Path, desc: dict[str, Any]) -> Path:
    key = tmp / "other_host_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    public = (tmp / "other_host_key.pub").read_text().split()[:2]
    path = tmp / "known_hosts_wrong"
    path.write_text(f"[{desc['host']}]:{desc['port']} {' '.join(public)}\n")
    return path


def first_call(kind: str, s: dict[str, Any]) -> DispatchError:
    """Open the backend and make one read; return the error it must raise."""
    try:
        b = new_backend(kind, s, clock=SystemClock())
    except DispatchError as exc:  # a preflight at open is allowed to be where it fails
        return exc
    try:
        b.inspect_many(["1"])
    except DispatchError as exc:
        return exc
    finally:
        b.close()
    raise AssertionError("the connection succeeded with a wrong host key")


@pytest.mark.parametrize("case", ["wrong-key", "unknown-host"])
def test_a_wrong_or_missing_host_key_fails_the_connection(case: str, tmp_path: Path) -> None:
    desc = sid()
    name = backend_name("slurm")
    if case == "wrong-key":
        known = wrong_key(tmp_path, desc)
    else:
        known = tmp_path / "known_hosts_empty"
        known.write_text("")
    error = first_call(name, settings(desc, known))
    text = str(error).lower()
    assert "host key" in text, f"the error must name the host key: {error!r}"


def test_the_right_host_key_connects() -> None:
    desc = sid()
    name = backend_name("slurm")
    b = new_backend(name, settings(desc, Path(desc["known_hosts"])), clock=SystemClock())
    try:
        assert b.inspect_many(["1"]) is not None
    finally:
        b.close()


def test_checking_is_off_only_when_the_setting_names_it(tmp_path: Path) -> None:
    """The Slurm adapter: an unknown host fails by default, and connects only with strictHostKeyChecking false."""
    desc = sid()
    name = backend_name("slurm")
    known = tmp_path / "known_hosts_empty"
    known.write_text("")
    assert "host key" in str(first_call(name, settings(desc, known))).lower()
    b = new_backend(name, settings(desc, known, strictHostKeyChecking=False), clock=SystemClock())
    try:
        assert b.inspect_many(["1"]) is not None
    finally:
        b.close()
