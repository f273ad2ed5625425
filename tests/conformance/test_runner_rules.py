"""One rule for "did not run" in both suites, preconditions in every failure, and the documented table.

Not applicable: the backend lacks what the check is about (never a failure, strict or not). Skipped: the check
applies but the harness cannot make its situation (a failure under strict). Shown on the memory adapter, whose
Slurm shape offers no Readmitter and whose Kubeflow shape is a Watcher."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dispatch.cli.main import main
from dispatch.conformance.checks import Check, ConformanceError, Skip
from dispatch.conformance.core import CORE_CHECKS, run_core_check
from dispatch.conformance.memory import memory_core_harness, memory_harness
from dispatch.conformance.runner import Result, checks_table, run_suites

from .test_core_premises import ConcludesEarly, with_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("strict", [False, True])
def test_a_missing_interface_is_not_applicable_in_both_suites(strict: bool) -> None:
    h = memory_core_harness("slurm")  # no Readmitter
    results = run_suites(h, only=["readmit_after_an_eviction", "readmit_rule"], strict=strict)
    assert {(r.suite, r.check): r.result for r in results} == {
        ("backend", "readmit_after_an_eviction"): Result.NOT_APPLICABLE,
        ("core", "readmit_rule"): Result.NOT_APPLICABLE,
    }
    assert all("Readmitter" in r.detail for r in results)


@pytest.mark.parametrize("strict", [False, True])
def test_a_watcher_makes_the_poll_checks_not_applicable(strict: bool) -> None:
    h = memory_core_harness("kubeflow")  # a Watcher: no poll interval to check, no unanswered polled read
    results = run_suites(
        h, ["core"], ["poll_interval_is_checked", "unanswered_read_keeps_the_last_state"], strict=strict
    )
    assert [r.result for r in results] == [Result.NOT_APPLICABLE, Result.NOT_APPLICABLE]


def test_a_harness_limit_is_skipped_and_fails_a_strict_run() -> None:
    h = memory_core_harness("slurm")
    bare = replace(h, base=replace(h.base, preempt=None))
    [loose] = run_suites(bare, ["core"], ["preemption_is_resubmitted_by_rule"])
    [strict] = run_suites(bare, ["core"], ["preemption_is_resubmitted_by_rule"], strict=True)
    assert loose.result is Result.SKIPPED and "no preempt hook" in loose.detail
    assert strict.result is Result.FAILED
    assert "this check needs: the `preempt` hook" in strict.detail


def test_a_failure_names_the_checks_preconditions() -> None:
    h = with_backend(memory_core_harness("slurm"), ConcludesEarly)
    [r] = run_suites(h, ["core"], ["node_loss_is_not_concluded_early"])
    assert r.result is Result.FAILED
    assert "node-lost was recorded while the scheduler reads running" in r.detail
    assert r.detail.endswith("(this check needs: the `lose_node` hook; a free slot; a bounded NodeLossWindow)")
    check = next(c for c in CORE_CHECKS if c.name == "node_loss_is_not_concluded_early")
    with pytest.raises(ConformanceError, match="this check needs: the `lose_node` hook"):
        run_core_check(check, h)


def test_a_backend_check_failure_names_its_preconditions_in_pytest() -> None:
    from dispatch.conformance import run_check

    def fails(h: object) -> None:
        raise ConformanceError("saw something else")

    def skips(h: object) -> None:
        raise Skip("the harness cannot do this")

    with pytest.raises(ConformanceError, match=r"saw something else\n\(this check needs: two free slots\)"):
        run_check(Check("fails", fails, None, "", "two free slots"), memory_harness("slurm"))
    with pytest.raises(ConformanceError, match=r"applies to this backend but skipped.*\n\(this check needs: x\)"):
        run_check(Check("skips", skips, None, "", "x"), memory_harness("slurm"), strict=True)


@pytest.mark.parametrize("nodes", [2, 6])
def test_the_admin_hold_check_fills_the_cluster_as_the_harness_says(nodes: int) -> None:
    """``queue_fill`` blocking jobs, no more and no fewer: the harness states its cluster's size."""
    h = memory_core_harness("slurm", nodes=nodes)
    assert h.base.queue_fill == nodes // 2
    [r] = run_suites(h, ["core"], ["admin_hold_is_escalated_and_never_lifted"], strict=True)
    assert r.result is Result.PASSED, r.detail
    sched = h.base.backend().scheduler  # type: ignore[attr-defined]
    assert len(sched.jobs) == h.base.queue_fill + 1
    fresh = memory_core_harness("slurm", nodes=nodes)
    too_few = replace(fresh, base=replace(fresh.base, queue_fill=fresh.base.queue_fill - 1))
    [short] = run_suites(too_few, ["core"], ["admin_hold_is_escalated_and_never_lifted"])
    assert short.result is Result.FAILED, "one blocker too few left room for the job under test to run"
    assert "this check needs: the `admin_hold` hook" in short.detail


def test_the_docs_list_every_check_with_what_it_needs() -> None:
    text = (ROOT / "docs" / "spi.md").read_text()
    begin = text.index("<!-- conformance-checks:")
    start = text.index("\n", begin) + 1
    end = text.index("<!-- /conformance-checks -->")
    assert text[start:end] == checks_table(), "docs/spi.md's table is stale: paste checks_table() into it"


def test_the_command_prints_whole_details_on_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["conformance", "--harness", "dispatch.local.harness:harness", "--suite", "core"]
    args += ["--check", "preemption_is_resubmitted_by_rule", "--strict"]
    assert main(args) == 1
    short = capsys.readouterr().out
    assert main([*args, "--details"]) == 1
    full = capsys.readouterr().out
    assert "this check needs: the `preempt` hook" not in short
    assert "    (this check needs: the `preempt` hook" in full
