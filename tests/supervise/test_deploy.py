"""The deployment files under deploy/supervisor/ start ``dispatch supervise`` with options it accepts, and probe
the health endpoint it serves."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click
import yaml

from dispatch.cli.main import cli

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "supervisor"


def parse(argv: list[str]) -> dict[str, Any]:
    """The ``supervise`` options ``argv`` (after the program name) gives, parsed as the command would."""
    i = argv.index("supervise")
    group = cli.make_context("dispatch", [*argv[:i], "supervise"])  # the global options before it parse too
    command = cli.get_command(group, "supervise")
    assert isinstance(command, click.Command)
    return command.make_context("supervise", list(argv[i + 1 :]), parent=group).params


def test_the_kubernetes_deployment_runs_supervise_with_valid_options() -> None:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text()))
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["dispatch"]
    params = parse(container["args"])
    assert params["metrics_host"] == "0.0.0.0" and params["log_json"]  # a pod is reached on its own address
    port = params["metrics_port"]
    assert container["ports"][0]["containerPort"] == port
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
    secret = next(d for d in docs if d["kind"] == "Secret")
    assert "DISPATCH_RECORDS" in secret["stringData"]  # the one records setting, from the environment


def test_the_systemd_unit_runs_supervise_with_valid_options() -> None:
    text = (DEPLOY / "dispatch-supervisor@.service").read_text()
    joined = text.replace("\\\n", " ")
    line = next(x for x in joined.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    argv = [a.replace("%i", "hpc").replace("%H", "host1").replace("${METRICS_PORT}", "9464") for a in argv]
    assert argv[0].endswith("/dispatch")
    params = parse(argv[1:])
    assert params["metrics_port"] == 9464 and params["metrics_host"] == "127.0.0.1"
    assert "KillSignal=SIGTERM" in text and "Restart=always" in text
