"""The dashboard over the PostgreSQL store, opened read-only: the same pages from the same runs' records."""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

import dispatch
from dispatch.errors import Unavailable
from dispatch.records import SQLiteRecords
from dispatch.records.postgres import PostgresRecords
from dispatch.ui.app import create_app
from dispatch.ui.source import Source

from .conftest import Made

pytestmark = pytest.mark.postgres
DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


@pytest.fixture
def pg_client(made: Made) -> Iterator[TestClient]:
    schema = f"t_{secrets.token_hex(6)}"
    try:
        writer = PostgresRecords(DSN, schema=schema)
    except Unavailable as exc:
        pytest.fail(f"{exc}\nstart it with scripts/postgres-up.sh (the README's test command does)")
    sqlite = SQLiteRecords(made.path, read_only=True)
    for row in sqlite.summaries():
        writer.create(sqlite.get(row.id), sqlite.events(row.id))  # the runs' records, moved as they are
    sqlite.close()
    reader = PostgresRecords(DSN, schema=schema, read_only=True)
    source = Source(reader, lambda name: dispatch.open("memory", dispatch.Config(read_only=True, name=name)), DSN)
    try:
        with TestClient(create_app(source), base_url="http://127.0.0.1") as c:
            yield c
    finally:
        source.close()
        writer.drop()
        writer.close()


def test_pages_over_postgres(pg_client: TestClient, made: Made) -> None:
    table = pg_client.get("/jobs?state=held").text
    assert re.findall(r'<tr data-job="([0-9a-f]+)"', table) == [made.held]
    page = pg_client.get(f"/jobs/{made.resubmitted}").text
    assert len(re.findall(r'<g class="bar execution', page)) == 2 and 'class="pin decision"' in page
    overview = pg_client.get("/").text
    assert "supervisor-a" in overview and 'href="/clusters/sim"' in overview
    assert "<b>1</b> job" in pg_client.get("/jobs?name=exits").text
