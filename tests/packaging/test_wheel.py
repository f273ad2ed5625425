"""The product as a user gets it: the wheel built from this repository, installed with the ``ui`` extra in a fresh
venv (no system site packages, nothing of this checkout on the path), runs a job, lists it and serves its page.

It also proves the wheel holds the product alone: no ``kubetest`` (the model Kubernetes is the distribution
``dispatch-kubetest``, docs/design-decisions.md). Needs no daemon; pip fetches the dependencies from the package
index (its download cache makes a warm run take seconds).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{argv} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def _build_wheel(tmp: Path) -> Path:
    """The wheel of a copy of the sources (building in the checkout would race an editable install's egg-info)."""
    src = tmp / "checkout"
    shutil.copytree(ROOT / "src", src / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    out = tmp / "wheel"
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    _run([*pip, "-w", str(out), str(src)], dict(os.environ), tmp)
    (wheel,) = out.glob("dispatch_jobs-*.whl")
    return wheel


def _venv(tmp: Path) -> tuple[Path, list[str]]:
    """A fresh venv and the pip command that installs into it."""
    venv = tmp / "venv"
    try:
        import ensurepip  # noqa: F401

        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        return venv, [str(venv / "bin" / "python"), "-m", "pip"]
    except ImportError:  # Debian without python3-venv: drive the venv's pip from outside
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
        return venv, [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]


def test_the_wheel_in_a_fresh_venv_runs_lists_and_shows_a_job(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert "dispatch/cli/main.py" in names and "dispatch/ui/templates/job.html" in names
    assert not [n for n in names if "kubetest" in n]
    # the Hydra launcher, in Hydra's namespace package (which has no __init__.py of its own: others share it)
    assert "hydra_plugins/dispatch_launcher/launcher.py" in names and "hydra_plugins/__init__.py" not in names
    for package in ("slurm", "gridengine"):  # the programs the adapters run on a login node (package data)
        shipped = {n for n in names if n.startswith(f"dispatch/{package}/programs/")}
        on_disk = {
            f"dispatch/{package}/programs/{p.name}" for p in (ROOT / "src/dispatch" / package / "programs").iterdir()
        }
        assert shipped == on_disk and on_disk, (package, on_disk ^ shipped)

    venv, pip = _venv(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        "LANG": "C.UTF-8",
    }
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CACHE_DIR", "PIP_CERT", "HTTPS_PROXY", "HTTP_PROXY"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))  # the machine's download cache
    _run([*pip, "install", "--quiet", "--disable-pip-version-check", f"{wheel}[ui]"], env, tmp_path)

    python, dispatch = str(venv / "bin" / "python"), str(venv / "bin" / "dispatch")
    where = _run([python, "-c", "import dispatch; print(dispatch.__file__)"], env, home).stdout
    assert where.startswith(str(venv)), where  # the installed wheel, not this checkout
    assert subprocess.run([python, "-c", "import dispatch_kubetest"], env=env, cwd=home).returncode != 0

    job = [python, "-c", "print('hi from the wheel')"]
    ran = _run([dispatch, "run", "--name", "from-the-wheel", "--", *job], env, home)
    assert "hi from the wheel" in ran.stdout
    (row,) = json.loads(_run([dispatch, "status", "--json"], env, home).stdout)
    assert row["name"] == "from-the-wheel" and row["state"] == "succeeded"

    ui = subprocess.Popen(
        [dispatch, "ui", "--port", "0"], env=env, cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert ui.stdout is not None
        url = ui.stdout.readline().strip()  # http://127.0.0.1:PORT/?token=...
        assert url.startswith("http://127.0.0.1:") and "?token=" in url, (url, ui.poll())
        base, token = url.split("?token=")
        req = urllib.request.Request(f"{base}jobs/{row['id']}", headers={"Authorization": f"Bearer {token}"})
        page = urllib.request.urlopen(req, timeout=30).read().decode()
        assert "from-the-wheel" in page and '<svg class="timeline"' in page and "exit 0" in page
    finally:
        ui.terminate()
        ui.communicate(timeout=30)
