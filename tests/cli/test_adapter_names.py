"""Help texts that name adapters list those installed through the ``dispatch.adapters`` entry points too: a
fake adapter installed as a real distribution (a dist-info on the path) shows up in ``dispatch schema``,
``dispatch supervise --adapter`` and ``dispatch conformance``, and ``dispatch schema`` opens it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .conftest import Env

PLUGIN = """
from dataclasses import dataclass

from dispatch import registry


@dataclass(frozen=True)
class Settings:
    queue: str = "all.q"


def register():
    def factory(settings, options):
        raise NotImplementedError("never opened by these tests")

    registry.register("fakesched", factory, settings=Settings, description="a test adapter")
"""


def install_plugin(cli: Env, site: Path) -> None:
    """A distribution ``fakesched-adapter`` with one entry point in the ``dispatch.adapters`` group."""
    site.mkdir()
    (site / "fakesched_adapter.py").write_text(PLUGIN)
    info = site / "fakesched_adapter-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakesched-adapter\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dispatch.adapters]\nfakesched = fakesched_adapter:register\n")
    cli.env["PYTHONPATH"] = str(site) + os.pathsep + cli.env["PYTHONPATH"]


def test_help_texts_list_builtin_adapters_without_a_plugin(cli: Env) -> None:
    p = cli.run("schema", "--help")
    assert p.returncode == 0, p.stderr
    assert "gridengine, kubeflow, local, memory, slurm" in " ".join(p.stdout.split())
    assert "fakesched" not in p.stdout


def test_entry_point_adapter_is_listed_in_every_help_that_names_adapters(cli: Env, tmp_path: Path) -> None:
    install_plugin(cli, tmp_path / "site")
    expected = "fakesched, gridengine, kubeflow, local, memory, slurm"
    for command in (["schema", "--help"], ["supervise", "--help"], ["conformance", "--help"]):
        p = cli.run(*command)
        assert p.returncode == 0, p.stderr
        assert expected in " ".join(p.stdout.split()), (command, p.stdout)


def test_entry_point_adapter_schema_is_printed(cli: Env, tmp_path: Path) -> None:
    install_plugin(cli, tmp_path / "site")
    p = cli.run("schema", "fakesched")
    assert p.returncode == 0, p.stderr
    schema = json.loads(p.stdout)
    assert schema["title"] == "fakesched adapter settings"
    assert "queue" in schema["properties"]
