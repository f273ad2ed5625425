"""``dispatch ui`` as a user starts it: loopback by default, a token for anything else, records read-only."""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

import pytest

from dispatch.cli.exitcodes import Exit

from .conftest import Env


def start(cli: Env, *args: str) -> tuple[object, str]:
    p = cli.popen("ui", "--port", "0", *args)
    assert p.stdout is not None
    url = p.stdout.readline().strip()
    assert url.startswith("http://"), (url, p.stderr.read() if p.poll() is not None else "")  # type: ignore[union-attr]
    return p, url


def test_serves_the_jobs_of_the_quick_start_on_loopback(cli: Env) -> None:
    assert cli.run("run", "--name", "hello", "--", sys.executable, "-c", "print('hi')").returncode == 0
    (row,) = cli.json("status")
    before = cli.records.stat().st_mtime_ns
    p, url = start(cli)
    try:
        assert url.startswith("http://127.0.0.1:")
        page = urllib.request.urlopen(url + "jobs", timeout=10).read().decode()
        assert row["id"] in page and "hello" in page
        job = urllib.request.urlopen(url + "jobs/" + row["id"], timeout=10).read().decode()
        assert '<svg class="timeline"' in job and "exit 0" in job
    finally:
        p.terminate()  # type: ignore[attr-defined]
        p.wait(10)  # type: ignore[attr-defined]
    assert cli.records.stat().st_mtime_ns == before  # nothing was written


def test_a_non_loopback_bind_needs_a_token(cli: Env) -> None:
    assert cli.run("run", "--", sys.executable, "-c", "pass").returncode == 0
    p = cli.run("ui", "--host", "0.0.0.0", "--port", "0", timeout=20)
    assert p.returncode == Exit.USAGE and "needs a token" in p.stderr and "--host" in p.stderr
    p = cli.run("ui", "--host", "::", "--port", "0", timeout=20)
    assert p.returncode == Exit.USAGE and "needs a token" in p.stderr


def test_with_a_token_every_request_carries_it(cli: Env) -> None:
    assert cli.run("run", "--", sys.executable, "-c", "pass").returncode == 0
    cli.env["DISPATCH_UI_TOKEN"] = "t0ken-for-tests"
    p, url = start(cli, "--host", "0.0.0.0")
    try:
        port = url.rsplit(":", 1)[1].strip("/")
        base = f"http://127.0.0.1:{port}/"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "jobs", timeout=10)
        assert err.value.code == 401
        req = urllib.request.Request(base + "jobs", headers={"Authorization": "Bearer t0ken-for-tests"})
        assert urllib.request.urlopen(req, timeout=10).status == 200
    finally:
        p.terminate()  # type: ignore[attr-defined]
        p.wait(10)  # type: ignore[attr-defined]


def test_no_records_yet_is_a_clear_error(cli: Env) -> None:
    p = cli.run("ui", "--port", "0", timeout=20)
    assert p.returncode == Exit.NOT_FOUND and "no records yet" in p.stderr
    assert not cli.records.exists()
