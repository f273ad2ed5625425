"""``dispatch conformance``: a harness factory, a result line per check, a JSON report, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatch.cli.main import main


def test_runs_the_chosen_checks_on_the_local_harness_and_writes_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "harness.json"
    config.write_text(json.dumps({"stateDir": str(tmp_path / "state")}))
    report = tmp_path / "report.json"
    rc = main(
        [
            "conformance",
            "--harness",
            "dispatch.local.harness:harness",
            "--harness-config",
            str(config),
            "--check",
            "find_by_marker",
            "--check",
            "success_is_closed_with_evidence",
            "--check",
            "watch_reports_changes",
            "--report",
            str(report),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    data = json.loads(report.read_text())
    results = {(c["suite"], c["check"]): c["result"] for c in data["checks"]}
    assert results == {
        ("backend", "find_by_marker"): "passed",
        ("backend", "watch_reports_changes"): "not-applicable",
        ("core", "success_is_closed_with_evidence"): "passed",
    }
    assert data["summary"]["passed"] == 2
    assert "not-applicable backend watch_reports_changes" in " ".join(out.split())


def test_strict_turns_a_skip_into_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["conformance", "--harness", "dispatch.local.harness:harness", "--suite", "backend", "--check"]
    assert main([*args, "preempted_cause"]) == 0
    assert main([*args, "preempted_cause", "--strict"]) == 1
    assert "failed" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("dispatch.local.harness", "module:callable"),
        ("no_such_module_here:h", "cannot import"),
        ("dispatch.local.harness:nope", "has no 'nope'"),
    ],
)
def test_a_bad_factory_is_a_usage_error(factory: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--harness", factory]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_check_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", "--harness", "dispatch.local.harness:harness", "--check", "nope"]) == 2
    assert "unknown check" in capsys.readouterr().err
