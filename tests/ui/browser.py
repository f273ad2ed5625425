"""Driving Debian's chromium with Selenium, and ``dispatch ui`` as a real server process.

The driver is pointed at /usr/bin/chromedriver and /usr/bin/chromium, so Selenium Manager never downloads a
browser or a driver (``SE_OFFLINE`` makes sure). Missing binaries fail the tests loudly with the install hint.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SRC = str(Path(__file__).resolve().parents[2] / "src")
ENTRY = "import sys; from dispatch.cli.main import main; sys.exit(main())"
SHOTS = os.environ.get("DISPATCH_SCREENSHOTS")
"""Where screenshots go: set to docs/images to refresh the documentation's pictures (a temporary directory
otherwise, so a test run leaves the work tree clean)."""


@contextmanager
def chromium(width: int = 1360, height: int = 900) -> Iterator[webdriver.Chrome]:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            pytest.fail(f"{path} is missing: install Debian's chromium and chromium-driver (scripts/browser-up.sh)")
    os.environ["SE_OFFLINE"] = "true"
    profile = tempfile.mkdtemp(prefix="dispatch-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISPATCH_", "XDG_"))}
    env.update(
        {
            "XDG_CONFIG_HOME": str(home / "config"),
            "XDG_STATE_HOME": str(home / "state"),
            "PYTHONPATH": SRC + os.pathsep + env.get("PYTHONPATH", ""),
            "NO_COLOR": "1",
        }
    )
    return env


def write_config(home: Path, records: Path, local_state: Path) -> None:
    config = home / "config" / "dispatch" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'records = "{records}"\n'
        '[clusters.local]\nadapter = "local"\n'
        f'[clusters.local.settings]\nstateDir = "{local_state}"\ngrace = "1s"\n'
        '[clusters.sim]\nadapter = "memory"\n'
    )


def dispatch(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", ENTRY, *args],
        env=cli_env(home),
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextmanager
def server(home: Path, driver: webdriver.Chrome | None = None) -> Iterator[str]:
    """``dispatch ui --port 0`` with the config under ``home``; yields its base URL. With ``driver``, the
    browser first opens the address ``dispatch ui`` printed (it carries the token and sets the session
    cookie), as a user does."""
    p = dispatch(home, "ui", "--port", "0")
    assert p.stdout is not None
    url = p.stdout.readline().strip()
    if not url.startswith("http://"):
        p.kill()
        pytest.fail(f"dispatch ui did not start: {p.communicate()[1]}")
    try:
        if driver is not None:
            driver.get(url)
        yield url.split("?", 1)[0].rstrip("/")
    finally:
        p.terminate()
        p.wait(60)


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    where = Path(SHOTS) if SHOTS else Path(tempfile.gettempdir()) / "dispatch-screenshots"
    where.mkdir(parents=True, exist_ok=True)
    path = where / name
    assert driver.save_screenshot(str(path)), path
    return path
