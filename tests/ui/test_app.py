"""The dashboard's pages over records of real runs, through its ASGI app (no browser): content, escaping,
filters, pagination, read-only, token and Host checks."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from dispatch.ui.app import cookie_value, create_app
from dispatch.ui.source import Source

from .conftest import Made
from .hostile import HOSTILE, MARKUP, NAMES


@pytest.fixture
def client(source: Source) -> Iterator[TestClient]:
    with TestClient(create_app(source), base_url="http://127.0.0.1") as c:
        yield c


def ids_in(page: str) -> list[str]:
    return re.findall(r'<tr data-job="([0-9a-f]+)"', page)


def test_jobs_table_lists_every_job_with_state_and_cause(client: TestClient, made: Made) -> None:
    r = client.get("/jobs")
    assert r.status_code == 200
    rows = ids_in(r.text)
    assert set(rows) >= {made.resubmitted, made.held, made.escalated, made.failed, *made.succeeded}
    row = r.text[r.text.index(f'data-job="{made.failed}"') :]
    row = row[: row.index("</tr>")]
    assert "s-failed" in row and "exit 3" in row and "exits-3" in row
    row = r.text[r.text.index(f'data-job="{made.resubmitted}"') :]
    assert "s-succeeded" in row[: row.index("</tr>")]


def test_a_suspended_job_reads_running_with_its_cause_in_the_table_the_filter_and_its_page(
    client: TestClient, made: Made
) -> None:
    r = client.get("/jobs")
    row = r.text[r.text.index(f'data-job="{made.suspended}"') :]
    row = row[: row.index("</tr>")]
    assert "s-running" in row and ">suspended<" in row, row
    assert set(ids_in(client.get("/jobs?cause=suspended").text)) == {made.suspended}
    page = client.get(f"/jobs/{made.suspended}").text
    assert "suspended" in page


def test_filters_by_state_cause_cluster_and_name(client: TestClient, made: Made) -> None:
    assert set(ids_in(client.get("/jobs?state=held").text)) == {made.held}
    assert set(ids_in(client.get("/jobs?cause=preempted").text)) == {made.escalated}
    assert set(ids_in(client.get("/jobs?cluster=sim").text)) == {
        made.resubmitted,
        made.held,
        made.escalated,
        made.story,
        made.suspended,
    }
    assert set(ids_in(client.get("/jobs?name=ok-").text)) == set(made.succeeded)
    assert ids_in(client.get("/jobs?name=" + made.failed[:6] + "&state=failed").text)[0] == made.failed
    # unknown filter values are ignored, not passed to the store
    assert len(ids_in(client.get("/jobs?state=bogus").text)) == len(ids_in(client.get("/jobs").text))
    # the live fragment answers the same filters
    assert set(ids_in(client.get("/jobs/rows?state=held").text)) == {made.held}


def test_job_page_has_the_timeline_with_both_executions_and_the_decision(client: TestClient, made: Made) -> None:
    page = client.get(f"/jobs/{made.resubmitted}").text
    svg = page[page.index('<svg class="timeline"') : page.index("</svg>")]
    bars = re.findall(r'<g class="bar execution s-(\w+)[^"]*">.*?<title>(.*?)</title>', svg, re.S)
    assert [s for s, _ in bars] == ["failed", "succeeded"]
    assert "preempted" in bars[0][1] and "exit 0" in bars[1][1]
    (pin,) = re.findall(r'<g class="pin decision">.*?<title>(.*?)</title>', svg, re.S)
    assert "resubmit" in pin and "rule evicted" in pin
    held = client.get(f"/jobs/{made.held}").text
    assert 'class="shade hold"' in held and 'class="pin escalation"' in held


def test_job_page_shows_the_working_directory(client: TestClient, made: Made) -> None:
    page = client.get(f"/jobs/{made.failed}").text
    assert f"<dt>working dir</dt><dd><code>{made.path.parent}</code></dd>" in page
    assert "<dt>working dir</dt>" not in client.get(f"/jobs/{made.succeeded[0]}").text  # none given: none shown


def test_everything_a_user_or_job_wrote_is_escaped(client: TestClient, made: Made) -> None:
    table = client.get("/jobs").text + client.get("/jobs?page=2").text
    for name in NAMES:
        if any(c in name for c in "<>&\"'"):
            assert name not in table, name
    # each name cell holds no markup, and reads back as exactly the name
    cells = re.findall(r'<td class="name">(.*?)</td>', table, re.S)
    assert all("<" not in c for c in cells)
    assert set(NAMES) <= {html.unescape(c) for c in cells}
    for job_id in made.hostile[:3]:
        page = client.get(f"/jobs/{job_id}").text
        for vector in MARKUP:
            if any(c in vector for c in '<>&"'):
                assert vector not in page
        assert "{{ 7*7 }}" in page  # data is never evaluated as a template
        # the argv list shows every argument, each reading back as exactly what was run
        argv = re.search(r'<ol class="argv">(.*?)</ol>', page, re.S).group(1)  # type: ignore[union-attr]
        items = [html.unescape(a) for a in re.findall(r"<li><code>(.*?)</code></li>", argv, re.S)]
        assert items[3:] == HOSTILE
        name = re.search(r'<span class="name">(.*?)</span>', page).group(1)  # type: ignore[union-attr]
        assert html.unescape(name) in NAMES and "<" not in name
        # output travels as JSON and is set as text by ui.js
        out = client.get(f"/jobs/{job_id}/output", params={"submission": 1, "rank": 0}).json()
        assert out["text"] == "\n".join(HOSTILE) + "\n"


def test_output_of_a_rank_from_an_offset(client: TestClient, made: Made) -> None:
    url = f"/jobs/{made.succeeded[0]}/output"
    whole = client.get(url, params={"submission": 1, "execution": 0, "rank": 0}).json()
    assert whole["text"] == "hello\nworld\n" and whole["offset"] == 12 and not whole["running"]
    rest = client.get(url, params={"submission": 1, "execution": 0, "rank": 0, "offset": 6}).json()
    assert rest["text"] == "world\n"
    assert client.get(url, params={"submission": 1, "rank": 5}).status_code == 400
    assert client.get(url, params={"submission": "x"}).status_code == 400
    assert client.get(url, params={"submission": 9}).status_code == 404


def test_output_whose_cluster_has_it_no_more_comes_from_the_archive(client: TestClient, made: Made) -> None:
    from dispatch.records import SQLiteRecords
    from dispatch.records.archive import ArchivedOutput, ArchiveStatus

    job = made.source().job(made.resubmitted)
    first = job.submission(1).executions[-1]
    url = f"/jobs/{made.resubmitted}/output"
    # the sim cluster (a memory scheduler of this process) reads no output: without an archive, a 404
    assert client.get(url, params={"submission": 1, "rank": 0}).status_code == 404
    writable = SQLiteRecords(made.path)
    try:
        kept = ArchivedOutput(job.id, first.identity, 1, first.restart, ArchiveStatus.KEPT, 1.0, data=b"<b>x</b>\n")
        writable.put_output(kept)
    finally:
        writable.close()
    got = client.get(url, params={"submission": 1, "rank": 0})
    assert got.status_code == 200 and got.json()["text"] == "<b>x</b>\n"
    assert client.get(url, params={"submission": 1, "rank": 1}).status_code == 404  # rank 0 only
    assert client.get(url, params={"submission": 1, "rank": 0, "stream": "stderr"}).status_code == 404


def test_overview_and_cluster_pages(client: TestClient, made: Made) -> None:
    page = client.get("/").text
    assert "held" in page and "preempted" in page and 'href="/clusters/sim"' in page
    assert "supervisor-a" in page  # the held job's lease (active)
    cluster = client.get("/clusters/local").text
    assert "OutputRead" in cluster or "output" in cluster.lower()
    assert re.search(r'class="chip a-(yes|no|unknown)"', cluster)
    assert "NodeLossWindow" in cluster
    assert client.get("/clusters/nope").status_code == 404


def test_pagination_over_the_summary_listing(source: Source) -> None:
    per = 10
    with TestClient(create_app(source, per_page=per), base_url="http://127.0.0.1") as client:
        first = client.get("/jobs").text
        total = int(re.search(r"<b>(\d+)</b> jobs", first).group(1))  # type: ignore[union-attr]
        assert 2 * per < total < 3 * per
        pages = [ids_in(client.get(f"/jobs?page={n}").text) for n in (1, 2, 3)]
        assert [len(p) for p in pages] == [per, per, total - 2 * per]
        assert len(set(pages[0] + pages[1] + pages[2])) == total
        assert 'rel="next"' in first and 'rel="prev"' in client.get("/jobs?page=2").text
        assert ids_in(client.get("/jobs?page=99").text) == []


def test_read_only_by_construction(client: TestClient, source: Source, made: Made) -> None:
    assert client.post("/jobs").status_code == 405
    assert client.delete(f"/jobs/{made.failed}").status_code == 405
    with pytest.raises(ValueError, match="read-only"):
        Source(__import__("dispatch").records.SQLiteRecords(made.path), source.open_cluster)
    assert source.cluster("local").read_only


def test_security_headers_and_host_check(client: TestClient) -> None:
    r = client.get("/jobs")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/jobs", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/jobs", headers={"host": "localhost:8765"}).status_code == 200
    assert client.get("/jobs", headers={"host": "[::1]:8765"}).status_code == 200


def test_a_token_is_required_on_every_request(source: Source) -> None:
    app = create_app(source, token="s3cret", allowed_hosts=["*"])
    with TestClient(app, base_url="http://10.0.0.5") as c:
        assert c.get("/jobs").status_code == 401
        assert c.get("/jobs", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/jobs", headers={"authorization": "Bearer s3cret"}).status_code == 200
        r = c.get("/jobs?token=s3cret&state=failed", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/jobs?state=failed"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(app.state.cookie + "=") and app.state.cookie.startswith("dispatch_ui_")
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and "Path=/" in cookie
        assert "s3cret" not in cookie  # the cookie holds a value derived from the token, not the token
        assert c.get("/jobs").status_code == 200  # the cookie now carries it
        value = c.cookies[app.state.cookie]
        c.cookies.clear()
        assert c.get("/static/ui.js").status_code == 401
        # the cookie's value is no token, and the token is no cookie value
        assert c.get("/jobs", headers={"authorization": f"Bearer {value}"}).status_code == 401
        assert c.get("/jobs", headers={"cookie": f"{app.state.cookie}=s3cret"}).status_code == 401


def test_a_cookie_of_one_instance_is_not_accepted_by_another(source: Source) -> None:
    """Two dashboards on one host (cookies are not scoped by port), even with the same token: each has its own
    cookie name and value, and accepts neither the other's cookie nor the other's value under its own name."""
    one = create_app(source, token="shared", allowed_hosts=["*"])
    two = create_app(source, token="shared", allowed_hosts=["*"])
    assert one.state.cookie != two.state.cookie
    with TestClient(one, base_url="http://127.0.0.1") as a, TestClient(two, base_url="http://127.0.0.1") as b:
        assert a.get("/jobs?token=shared").status_code == 200
        value = a.cookies[one.state.cookie]
        assert b.get("/jobs", headers={"cookie": f"{one.state.cookie}={value}"}).status_code == 401
        assert b.get("/jobs", headers={"cookie": f"{two.state.cookie}={value}"}).status_code == 401
        instance = two.state.cookie.removeprefix("dispatch_ui_")
        right = cookie_value("shared", instance)
        assert b.get("/jobs", headers={"cookie": f"{two.state.cookie}={right}"}).status_code == 200


def test_without_a_token_there_is_no_gate(client: TestClient) -> None:
    assert client.get("/jobs").status_code == 200
    assert "set-cookie" not in client.get("/jobs?token=x").headers


def test_the_job_page_says_which_rules_apply_and_where_they_come_from(tmp_path: Path) -> None:
    """The Rules card says what the supervisor does: a job without rules is told a supervisor's defaults apply
    (not that nothing recovers it); once a supervisor took it with its defaults, the card names them and whose."""
    from dispatch.errors import ConfigError
    from dispatch.records import SQLiteRecords
    from dispatch.spec import JobSpec
    from dispatch.supervise import Supervisor
    from dispatch.ui import scenarios

    path = tmp_path / "records.db"
    m = scenarios.memory(SQLiteRecords(path))  # its own supervisor is not run
    job = m.cluster.submit(JobSpec(command=("sleep", "1"), name="adopting"))

    def no_cluster(name: str) -> Any:
        raise ConfigError("cluster", f"no cluster named {name!r}")

    source = Source(SQLiteRecords(path, read_only=True), no_cluster, str(path))
    with TestClient(create_app(source), base_url="http://127.0.0.1") as c:
        page = html.unescape(c.get(f"/jobs/{job}").text)
        assert "none of its own: the default rules of the supervisor that takes the job apply" in page
        assert "nothing recovers this job" not in page
        sup = Supervisor(
            m.cluster.backend, m.records, clock=m.clock, owner="sup-defaults", poll=10, cluster=m.cluster,
            default_rules=scenarios.EVICTED,
        )  # fmt: skip
        sup.cycle()
        page = html.unescape(c.get(f"/jobs/{job}").text)
        assert "1 rule: the default rules of sup-defaults, adopted " in page
