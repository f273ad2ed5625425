"""The dashboard in a real browser (Debian's chromium through Selenium), over ``dispatch ui`` serving records
made by real runs: local-adapter jobs and memory-adapter jobs recovered by the real supervisor."""

from __future__ import annotations

import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from dispatch.records import SQLiteRecords
from dispatch.ui import scenarios

from .browser import chromium, dispatch, screenshot, server, write_config
from .conftest import Made, make

pytestmark = pytest.mark.browser

STEPS = (
    "import os, sys, time\n"
    "for i in range(10):\n"
    "    if i == 5:\n"
    "        while not os.path.exists(sys.argv[1]):\n"  # the test says when to go on
    "            time.sleep(0.1)\n"
    "    print(f'step {i}: loss {1 / (i + 1):.3f}', flush=True)\n"
    "    time.sleep(0.3)\n"
)
TRAIN = (
    "import os, sys, time\n"
    "from dispatch import job\n"
    "for step in range(10**9):\n"
    "    job.progress(step, total=100000, loss=1 / (step + 1))\n"
    "    if os.path.exists(sys.argv[1]):\n"
    "        break\n"
    "    time.sleep(0.05)\n"
)


@dataclass
class Site:
    made: Made
    home: Path
    url: str
    driver: webdriver.Chrome

    def get(self, path: str) -> None:
        self.driver.get(self.url + path)

    def submit_filters(self, query: str) -> None:
        """Submit the filter form and wait for the page it loads, whose address holds ``query``. The address alone
        is no sign of the new page: the last one may hold it too (an empty ``name=``), and a click does not wait
        for the navigation, so the old page is marked and the wait is for a complete page without the mark."""
        self.driver.execute_script("window.dispatchTestOldPage = true")
        self.driver.find_element(By.CSS_SELECTOR, ".filters button").click()
        wait(
            self.driver,
            f"the page filtered by {query}",
            lambda d: (
                query in d.current_url
                and d.execute_script("return !window.dispatchTestOldPage && document.readyState === 'complete'")
            ),
        )

    def rows(self) -> dict[str, str]:
        """Job id -> state, as the table shows them (read in one step: live updates replace the rows)."""
        pairs = self.driver.execute_script(
            "return [...document.querySelectorAll('#rows tr[data-job]')]"
            ".map(tr => [tr.dataset.job, tr.querySelector('.chip').textContent])"
        )
        return dict(pairs)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    home = tmp_path_factory.mktemp("ui-browser")
    made = make(home / "data")
    write_config(home, made.path, made.local_state)
    with chromium() as driver, server(home, driver) as url:
        yield Site(made, home, url, driver)


def wait(driver: webdriver.Chrome, what: str, pred, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    WebDriverWait(driver, timeout, poll_frequency=0.2).until(lambda d: pred(d), message=what)


def text_of(driver: webdriver.Chrome, css: str) -> str:
    """The text of the element ``css`` selects ("" when there is none), read in one step: a live update may
    replace the element between a lookup and a read (a stale element)."""
    found = driver.execute_script("const e = document.querySelector(arguments[0]); return e && e.textContent", css)
    return "" if found is None else str(found)


def test_jobs_table_shows_each_job_with_its_state(site: Site) -> None:
    site.get("/jobs")
    rows = site.rows()
    m = site.made
    assert rows[m.resubmitted] == "succeeded" and rows[m.held] == "held" and rows[m.failed] == "failed"
    assert rows[m.escalated] == "failed" and all(rows[j] == "succeeded" for j in m.succeeded)
    cause = text_of(site.driver, f'tr[data-job="{m.failed}"] td.cause')
    assert cause == "exit 3"
    assert site.driver.execute_script("return window.pwned") is None  # no hostile name ran
    screenshot(site.driver, "jobs.png")


def test_a_preempted_then_resubmitted_job_has_two_executions_on_its_timeline(site: Site) -> None:
    site.get(f"/jobs/{site.made.resubmitted}")
    bars = site.driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.bar.execution")
    assert len(bars) == 2
    classes = [b.get_attribute("class") for b in bars]
    assert "s-failed" in classes[0] and "s-succeeded" in classes[1]
    titles = [b.find_element(By.TAG_NAME, "title").get_attribute("textContent") for b in bars]
    assert "preempted" in titles[0] and "exit 0" in titles[1]
    labels = [t.text for t in site.driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.bar text")]
    assert labels == ["preempted", "exit 0"]
    (pin,) = site.driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.pin.decision title")
    assert "resubmit" in pin.get_attribute("textContent") and "evicted" in pin.get_attribute("textContent")
    # the first execution ends where the second lane starts: one after the other along x
    x0 = float(bars[0].find_element(By.TAG_NAME, "rect").get_attribute("x"))
    x1 = float(bars[1].find_element(By.TAG_NAME, "rect").get_attribute("x"))
    assert x0 < x1
    screenshot(site.driver, "job-timeline.png")
    site.get(f"/jobs/{site.made.held}")
    assert site.driver.find_elements(By.CSS_SELECTOR, "svg.timeline rect.shade.hold")
    assert site.driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.pin.escalation")
    screenshot(site.driver, "job-held.png")
    site.get(f"/jobs/{site.made.story}")
    bars = site.driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.bar.execution")
    assert [b.get_attribute("class").split()[2] for b in bars] == ["s-failed", "s-failed", "s-succeeded"]
    assert len(site.driver.find_elements(By.CSS_SELECTOR, "svg.timeline g.pin.decision")) == 2
    screenshot(site.driver, "job-story.png")


def test_filters_narrow_the_table(site: Site) -> None:
    site.get("/jobs")
    Select(site.driver.find_element(By.NAME, "state")).select_by_value("failed")
    site.submit_filters("state=failed&")
    rows = site.rows()
    assert rows and set(rows.values()) == {"failed"} and site.made.failed in rows
    Select(site.driver.find_element(By.NAME, "state")).select_by_value("")
    Select(site.driver.find_element(By.NAME, "cluster")).select_by_value("sim")
    site.submit_filters("cluster=sim&")
    m = site.made
    assert set(site.rows()) == {m.resubmitted, m.held, m.escalated, m.story, m.suspended}
    Select(site.driver.find_element(By.NAME, "cluster")).select_by_value("")
    box = site.driver.find_element(By.NAME, "name")
    box.clear()
    box.send_keys("<script>")
    site.submit_filters("name=%3Cscript%3E")
    names = site.driver.execute_script("return [...document.querySelectorAll('#rows td.name')].map(c => c.textContent)")
    assert names == ["<script>window.pwned = 1</script>"]  # shown as text
    assert site.driver.execute_script("return window.pwned") is None


def test_logs_follow_a_running_job_and_the_page_updates_live(site: Site, tmp_path: Path) -> None:
    go = tmp_path / "go"
    run = dispatch(site.home, "run", "--name", "steps", "--", sys.executable, "-c", STEPS, str(go))
    try:
        records = SQLiteRecords(site.made.path, read_only=True)
        try:
            deadline = time.monotonic() + 90
            while not (rows := [s for s in records.summaries(limit=5) if s.name == "steps"]):
                assert time.monotonic() < deadline, "the job was not recorded"
                time.sleep(0.2)
            job_id = rows[0].id
        finally:
            records.close()
        site.get(f"/jobs/{job_id}")
        log = site.driver.find_element(By.ID, "log")
        wait(site.driver, "the first lines", lambda d: "step 4:" in log.text, 90)
        assert "step 5:" not in log.text and log.get_attribute("data-following") == "yes"  # seen while it runs...
        screenshot(site.driver, "job-output.png")
        go.touch()
        wait(site.driver, "the last line", lambda d: "step 9:" in log.text, 90)
        assert log.text.count("step ") == 10  # ...and followed to the end, each line once
        # the state chip turns without a reload once `dispatch run` records the end
        wait(site.driver, "live state", lambda d: text_of(d, "#live .chip") == "succeeded")
    finally:
        run.wait(60)
    assert run.returncode == 0, run.stderr.read() if run.stderr else ""


def test_overview_and_cluster_pages(site: Site) -> None:
    site.get("/")
    assert "supervisor-a" in site.driver.find_element(By.TAG_NAME, "main").text
    assert site.driver.find_elements(By.CSS_SELECTOR, "svg.hours rect")
    screenshot(site.driver, "overview.png")
    site.get("/clusters/local")
    answers = site.driver.find_elements(By.CSS_SELECTOR, "table.caps .chip")
    assert len(answers) >= 10 and {a.text for a in answers} <= {"yes", "no", "unknown"}
    screenshot(site.driver, "cluster.png")


def test_a_page_over_ten_thousand_jobs_loads(tmp_path: Path, site: Site) -> None:
    home = tmp_path / "big"
    data = home / "data"
    data.mkdir(parents=True)
    path = data / "records.db"
    shutil.copy(site.made.path, path)
    records = SQLiteRecords(path)
    m = site.made
    scenarios.many(records, [m.resubmitted, m.held, m.escalated, m.failed, *m.succeeded], 10_000 - 3)
    total = len(records.summaries())
    records.close()
    assert total >= 10_000
    write_config(home, path, m.local_state)
    with server(home, site.driver) as url:  # a second instance: its own token and cookie
        site.driver.get(url + "/jobs?page=2")
        count = text_of(site.driver, "p.count")
        assert f"{total} jobs" in count and "page 2 of" in count
        assert len(site.rows()) == 50
        # it loads (its timings are bench/ui.py's, measured side by side, never asserted in a test)
        screenshot(site.driver, "jobs-10k.png")
        site.driver.get(url + "/")
        assert site.driver.find_elements(By.CSS_SELECTOR, "svg.hours rect")
        screenshot(site.driver, "overview-10k.png")
        site.driver.get(url + "/jobs?state=held")
        assert set(site.rows().values()) == {"held"}


def test_the_jobs_table_updates_without_a_reload(site: Site) -> None:
    site.get("/jobs?name=appears-live")
    assert site.rows() == {}
    site.driver.execute_script("window.sameDocument = true")
    run = dispatch(site.home, "run", "--name", "appears-live", "--", sys.executable, "-c", "pass")
    try:
        wait(site.driver, "the new job's row", lambda d: list(site.rows().values()) == ["succeeded"], 90)
    finally:
        run.wait(60)
    assert site.driver.execute_script("return window.sameDocument") is True  # updated in place, not reloaded


def test_a_running_job_s_progress_updates_live(site: Site, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    submit = dispatch(
        site.home, "submit", "--name", "reports", "-N", "2", "-e", "DISPATCH_PROGRESS_INTERVAL=0.2",
        "--", sys.executable, "-c", TRAIN, str(stop),
    )  # fmt: skip
    out, err = submit.communicate(timeout=180)
    assert submit.returncode == 0, err
    job_id = out.strip()
    try:
        status_until(site, job_id, "running")  # what a user's `dispatch status` writes: the records say running
        site.get(f"/jobs/{job_id}")
        site.driver.execute_script("window.sameDocument = true")

        def rank_steps(d: webdriver.Chrome) -> list[str]:
            return d.execute_script(  # type: ignore[no-any-return]
                "return [...document.querySelectorAll('#progress tbody tr')].map(tr => tr.cells[1].textContent)"
            )

        wait(site.driver, "both ranks' progress", lambda d: len(rank_steps(d)) == 2)
        first = rank_steps(site.driver)
        assert all(re.search(r"/100000 \(\d+%\)$", step) for step in first), first
        wait(site.driver, "a later step, without a reload", lambda d: rank_steps(d)[0] != first[0])
        table = text_of(site.driver, "#progress")
        assert "loss" in table and " ago" in table
        assert site.driver.execute_script("return window.sameDocument") is True
        screenshot(site.driver, "job-progress.png")
        site.get("/jobs?name=reports")
        cell = text_of(site.driver, f'tr[data-job="{job_id}"] td.progress')
        assert re.search(r"/100000 \(\d+%\)", cell) and "/s ends " in cell and cell.endswith(" ago")
    finally:
        stop.touch()
        status_until(site, job_id, "succeeded")  # so later tests see it ended


def status_until(site: Site, job_id: str, state: str) -> None:
    """Run ``dispatch status JOB`` (which observes the job and writes what changed) until it says ``state``."""
    deadline = time.monotonic() + 120
    while True:
        status = dispatch(site.home, "status", "--json", job_id)
        rows, _ = status.communicate(timeout=120)
        if f'"state": "{state}"' in rows:
            return
        assert time.monotonic() < deadline, rows
        time.sleep(0.5)
