"""``dispatch ui`` as a user starts it: loopback and a token by default (printed once, in the address),
``--no-token`` on loopback only, records read-only; another user of the machine cannot read a job through it."""

from __future__ import annotations

import json
import pwd
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from dispatch.cli.exitcodes import Exit

from ..peer import as_peer as run_as_peer
from .conftest import Env


def start(cli: Env, *args: str) -> tuple[object, str]:
    p = cli.popen("ui", "--port", "0", *args)
    assert p.stdout is not None
    url = p.stdout.readline().strip()
    assert url.startswith("http://"), (url, p.stderr.read() if p.poll() is not None else "")  # type: ignore[union-attr]
    return p, url


def base_of(url: str) -> tuple[str, str]:
    """The printed address split into the base URL and the token it carries."""
    parts = urllib.parse.urlsplit(url)
    (token,) = urllib.parse.parse_qs(parts.query)["token"]
    return f"{parts.scheme}://{parts.netloc}/", token


def get(url: str, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60).read().decode()


def test_serves_the_jobs_of_the_quick_start_on_loopback_with_a_token(cli: Env) -> None:
    assert cli.run("run", "--name", "hello", "--", sys.executable, "-c", "print('hi')").returncode == 0
    (row,) = cli.json("status")
    before = cli.records.stat().st_mtime_ns
    p, url = start(cli)
    try:
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        base, token = base_of(url)
        assert len(token) >= 32
        with pytest.raises(urllib.error.HTTPError) as err:
            get(base + "jobs")
        assert err.value.code == 401
        page = get(base + "jobs", token)
        assert row["id"] in page and "hello" in page
        job = get(base + "jobs/" + row["id"], token)
        assert '<svg class="timeline"' in job and "exit 0" in job
        # the address as printed works in a browser: it sets the cookie and drops the token from the address
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        landed = opener.open(url + "&state=succeeded", timeout=60)
        assert landed.url == base + "?state=succeeded" and row["id"] not in landed.url
        assert "hello" in opener.open(base + "jobs", timeout=60).read().decode()
    finally:
        p.terminate()  # type: ignore[attr-defined]
        err_text = p.communicate(timeout=60)[1]  # type: ignore[attr-defined]
    assert token not in err_text  # printed once, on stdout
    assert cli.records.stat().st_mtime_ns == before  # nothing was written


def test_no_token_serves_loopback_only_and_says_what_it_gives_up(cli: Env) -> None:
    assert cli.run("run", "--", sys.executable, "-c", "pass").returncode == 0
    p = cli.run("ui", "--host", "0.0.0.0", "--port", "0", "--no-token", timeout=120)
    assert p.returncode == Exit.USAGE and "needs a token" in p.stderr and "--host" in p.stderr
    p = cli.run("ui", "--host", "::", "--port", "0", "--no-token", timeout=120)
    assert p.returncode == Exit.USAGE and "needs a token" in p.stderr
    p = cli.run("ui", "--port", "0", "--no-token", "--token", "x", timeout=120)
    assert p.returncode == Exit.USAGE and "exclude each other" in p.stderr
    srv, url = start(cli, "--no-token")
    try:
        assert "token" not in url
        assert "</html>" in get(url + "jobs")
    finally:
        srv.terminate()  # type: ignore[attr-defined]
        err_text = srv.communicate(timeout=60)[1]  # type: ignore[attr-defined]
    assert "every user of this machine can read every job" in err_text


def test_with_a_given_token_every_request_carries_it(cli: Env) -> None:
    assert cli.run("run", "--", sys.executable, "-c", "pass").returncode == 0
    cli.env["DISPATCH_UI_TOKEN"] = "t0ken-for-tests"
    p, url = start(cli, "--host", "0.0.0.0")
    try:
        port = url.split("?")[0].rsplit(":", 1)[1].strip("/")
        base = f"http://127.0.0.1:{port}/"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "jobs", timeout=60)
        assert err.value.code == 401
        req = urllib.request.Request(base + "jobs", headers={"Authorization": "Bearer t0ken-for-tests"})
        assert urllib.request.urlopen(req, timeout=60).status == 200
    finally:
        p.terminate()  # type: ignore[attr-defined]
        p.wait(60)  # type: ignore[attr-defined]


PEER_CLIENT = """
import json, os, sys, urllib.error, urllib.request
out = {"uid": os.getuid()}
headers = {"Authorization": "Bearer " + sys.argv[1]} if sys.argv[1] else {}
for name, url in [("page", sys.argv[2]), ("output", sys.argv[3])]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
            out[name] = [r.status, r.read().decode()]
    except urllib.error.HTTPError as e:
        out[name] = [e.code, e.read().decode()]
print(json.dumps(out))
"""


def test_another_user_of_the_machine_cannot_read_a_job_without_the_token(cli: Env, peer: pwd.struct_passwd) -> None:
    secret = "secret-output-of-the-owner"
    assert cli.run("run", "--name", "private", "--", sys.executable, "-c", f"print({secret!r})").returncode == 0
    (row,) = cli.json("status")
    p, url = start(cli)
    try:
        base, token = base_of(url)
        page, output = base + "jobs/" + row["id"], base + "jobs/" + row["id"] + "/output?submission=1"
        assert secret in json.loads(get(output, token))["text"]  # the owner reads it

        def as_peer(token: str) -> dict[str, list[object]]:
            answer: dict[str, list[object]] = run_as_peer(peer, PEER_CLIENT, token, page, output)
            assert answer.pop("uid") == peer.pw_uid
            return answer

        got = as_peer("")
        assert got["page"][0] == 401 and got["output"][0] == 401
        assert secret not in json.dumps(got) and "private" not in json.dumps(got)
        # what stops the peer is the token (and only the owner has it: it was printed to the owner's terminal)
        assert as_peer("a-guess")["page"][0] == 401
        with_token = as_peer(token)
        assert with_token["page"][0] == 200 and "private" in str(with_token["page"][1])
        assert secret in str(with_token["output"][1])
    finally:
        p.terminate()  # type: ignore[attr-defined]
        p.wait(60)  # type: ignore[attr-defined]


def test_no_records_yet_is_a_clear_error(cli: Env) -> None:
    p = cli.run("ui", "--port", "0", timeout=120)
    assert p.returncode == Exit.NOT_FOUND and "no records yet" in p.stderr
    assert not cli.records.exists()
