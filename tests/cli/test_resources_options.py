"""``--gpus-per-node``, ``--cpus-per-proc``, ``--mem-per-node``, ``--exclusive`` and ``resources`` in
``submit --from`` files, on the embedded local cluster (given two GPU ids through its ``gpus`` setting)."""

from __future__ import annotations

import json

from dispatch.cli.exitcodes import Exit

from .conftest import Env, wait_until


def _with_gpus(cli: Env, gpus: str) -> None:
    cli.config.write_text(
        f'[clusters.local]\nadapter = "local"\n[clusters.local.settings]\ngrace = "1s"\ngpus = {gpus}\n'
    )


def test_the_options_reach_the_record_and_the_ranks(cli: Env) -> None:
    _with_gpus(cli, '["0", "1"]')
    p = cli.run("submit", "--gpus-per-node", "2", "--mem-per-node", "64M", "--json", "--",
                "sh", "-c", 'echo "gpus=$CUDA_VISIBLE_DEVICES"')  # fmt: skip
    assert p.returncode == 0, p.stderr
    job = json.loads(p.stdout)["job"]
    wait_until(lambda: cli.json("status", job)[0]["state"] == "succeeded")
    logs = cli.run("logs", job)
    assert logs.stdout.strip() == "gpus=0,1", (logs.returncode, logs.stderr)
    shown = cli.run("show", job)
    assert "resources  2 GPU(s) per node, 64M memory per node" in shown.stdout, shown.stdout


def test_a_file_asks_the_same_and_a_request_too_big_is_refused_with_nothing_recorded(cli: Env) -> None:
    _with_gpus(cli, '["0", "1"]')
    path = cli.home / "jobs.jsonl"
    path.write_text(json.dumps({"command": ["true"], "resources": {"gpusPerNode": 4}}) + "\n")
    p = cli.run("submit", "--from", str(path))
    assert p.returncode == Exit.REFUSED, p.stderr
    assert (
        "can never run 1 node(s) with 4 GPU(s) each, 4 in all on this host: it has host: 1 node(s) with 2" in p.stderr
    )
    assert cli.json("status") == []
    dry = cli.run("submit", "--dry-run", "-N", "2", "--gpus-per-node", "1", "--", "true")
    assert dry.returncode == 0, dry.stderr
    assert "CUDA_VISIBLE_DEVICES=0 " in dry.stdout and "CUDA_VISIBLE_DEVICES=1 " in dry.stdout


def test_bad_values_name_the_option(cli: Env) -> None:
    for args, words in (
        (["--gpus-per-node", "a100:"], "'--gpus-per-node': must be [TYPE:]N"),
        (["--mem-per-node", "4X"], "'--mem-per-node': unknown unit 'X'"),
        (["--cpus-per-proc", "0"], "--cpus-per-proc"),
    ):
        p = cli.run("submit", *args, "--", "true")
        assert p.returncode == Exit.USAGE, p.stderr
        assert words in p.stderr, p.stderr


def test_a_job_waits_for_the_device_another_holds_and_says_which(cli: Env) -> None:
    """Two ``dispatch submit`` processes, one GPU: the second job waits, pending, naming the device and the job
    holding it (``show``), and gets the device once the first has ended."""
    _with_gpus(cli, '["0"]')
    flag = cli.home / "release"
    body = f'echo "gpus=$CUDA_VISIBLE_DEVICES"; while [ ! -e {flag} ]; do sleep 0.05; done'
    first = cli.run("submit", "--gpus-per-node", "1", "--json", "--", "sh", "-c", body)
    assert first.returncode == 0, first.stderr
    a = json.loads(first.stdout)["job"]
    wait_until(lambda: cli.json("status", a)[0]["state"] == "running")
    second = cli.run("submit", "--gpus-per-node", "1", "--json", "--", "sh", "-c", body)
    assert second.returncode == 0, second.stderr
    b = json.loads(second.stdout)["job"]
    wait_until(lambda: f"detail     waiting for 1 GPU: device 0 held by job {a}" in cli.run("show", b).stdout)
    assert cli.json("status", b)[0]["state"] == "pending"
    flag.touch()
    wait_until(lambda: cli.json("status", b)[0]["state"] == "succeeded")
    assert cli.run("logs", a).stdout.strip() == cli.run("logs", b).stdout.strip() == "gpus=0"
