"""The dashboard at scale: server time of the jobs page and of a job page, and first paint in headless chromium.

    python bench/ui.py [--jobs 10000] [--store sqlite|postgres] [--dsn DSN] [--repeat 30] [--no-browser] [--json]

Records come from real runs: the memory adapter under the real supervisor makes a job preempted 49 times and
resubmitted each time (50 executions on one timeline) and a few other stories; the rest of ``--jobs`` are copies
of those under fresh ids, spread over the last day. Prints
{"jobs", "store", "jobs_page_ms", "jobs_filtered_ms", "job_page_ms", "job_executions", "first_paint_ms"}:
server times are medians over ``--repeat`` requests through the ASGI app (no network); first paint is the
``first-contentful-paint`` of ``/jobs`` served by uvicorn on loopback to Debian's chromium (median of 5 loads).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import dispatch
from dispatch.records import SQLiteRecords
from dispatch.ui import scenarios
from dispatch.ui.app import create_app
from dispatch.ui.source import Source

DSN = os.environ.get("DISPATCH_TEST_POSTGRES", "host=127.0.0.1 dbname=dispatch_test user=postgres")


def fill(records: Any, jobs: int) -> tuple[str, int]:
    m = scenarios.memory(records, back=6 * 3600)
    long = scenarios.preempted_then_resubmitted(m, name="fifty-executions", preemptions=49)
    templates = [
        long,
        scenarios.preempted_then_resubmitted(m),
        scenarios.held_after_timeout(m),
        scenarios.escalated_after_limit(m),
    ]
    scenarios.many(records, templates[1:], max(0, jobs - len(templates)))
    executions = sum(len(s.executions) for s in records.get(long).submissions)
    return long, executions


def median_ms(fn: Any, repeat: int) -> float:
    fn()  # warm: templates compiled, pages cached by the OS
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return round(statistics.median(times), 1)


def first_paint(app: Any) -> float:
    import uvicorn
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    profile = tempfile.mkdtemp(prefix="dispatch-bench-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1360,900"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    try:
        while not server.started:
            time.sleep(0.05)
        paints = []
        for _ in range(6):
            driver.get(f"http://127.0.0.1:{port}/jobs?nocache={secrets.token_hex(4)}")
            fcp = None
            for _ in range(100):  # the entry lands just after load
                fcp = driver.execute_script(
                    "const e = performance.getEntriesByType('paint')"
                    ".filter(p => p.name === 'first-contentful-paint'); return e.length ? e[0].startTime : null"
                )
                if fcp is not None:
                    break
                time.sleep(0.05)
            if fcp is None:
                raise RuntimeError("chromium reported no first-contentful-paint")
            paints.append(float(fcp))
        return round(statistics.median(paints[1:]), 1)
    finally:
        driver.quit()
        server.should_exit = True
        thread.join(10)
        shutil.rmtree(profile, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    ap.add_argument("--dsn", default=DSN, help="PostgreSQL DSN for --store postgres")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--no-browser", action="store_true", help="skip first paint (no chromium needed)")
    ap.add_argument("--json", action="store_true", help="print JSON (the default; kept for symmetry)")
    args = ap.parse_args(argv)

    from starlette.testclient import TestClient

    from dispatch.records.postgres import PostgresRecords

    tmp = Path(tempfile.mkdtemp(prefix="dispatch-bench-ui-"))
    schema = f"bench_ui_{secrets.token_hex(4)}"
    writer: Any = (
        SQLiteRecords(tmp / "records.db") if args.store == "sqlite" else PostgresRecords(args.dsn, schema=schema)
    )
    try:
        long, executions = fill(writer, args.jobs)
        reader: Any = (
            SQLiteRecords(tmp / "records.db", read_only=True)
            if args.store == "sqlite"
            else PostgresRecords(args.dsn, schema=schema, read_only=True)
        )
        source = Source(reader, lambda name: dispatch.open("memory", dispatch.Config(read_only=True, name=name)))
        app = create_app(source)
        total = len(reader.summaries())
        with TestClient(app, base_url="http://127.0.0.1") as client:

            def get(path: str) -> None:
                r = client.get(path)
                assert r.status_code == 200, (path, r.status_code)

            result: dict[str, Any] = {
                "jobs": total,
                "store": args.store,
                "jobs_page_ms": median_ms(lambda: get("/jobs"), args.repeat),
                "jobs_filtered_ms": median_ms(lambda: get("/jobs?state=failed&cause=preempted&page=3"), args.repeat),
                "job_page_ms": median_ms(lambda: get(f"/jobs/{long}"), args.repeat),
                "job_executions": executions,
                "overview_ms": median_ms(lambda: get("/"), args.repeat),
                "first_paint_ms": None if args.no_browser else first_paint(app),
            }
        source.close()
    finally:
        if isinstance(writer, PostgresRecords):
            writer.drop()
        writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
