"""``dispatch status`` says which listed jobs wait for a human (an escalation no one has resolved)."""

from __future__ import annotations

from tests.cli.conftest import Env


def test_status_points_at_an_escalated_job(cli: Env) -> None:
    rules = cli.home / "rules.yaml"
    rules.write_text("rules:\n  - cause: [preempted]\n    action: resubmit\n    limit: 1\n")  # exit 3 matches none
    assert cli.run("run", "--rules", str(rules), "--", "sh", "-c", "exit 3").returncode == 1
    assert cli.run("run", "--", "true").returncode == 0
    escalated, ok = (r["id"] for r in cli.json("status")[::-1])
    p = cli.run("status")
    assert p.returncode == 0, p.stderr
    hints = [ln for ln in p.stderr.splitlines() if "waits for a human" in ln]
    assert len(hints) == 1 and hints[0].startswith(f"job {escalated} waits for a human (exit: ")
    assert hints[0].endswith(f"see: dispatch show {escalated}; once dealt with: dispatch ack {escalated}")
    assert ok not in p.stderr


def test_ack_ends_the_wait_for_a_human_of_a_failed_run_without_rules(cli: Env) -> None:
    """A failed ``run`` without rules is escalated (no rule matches exit); ``dispatch ack`` acknowledges it:
    status no longer says it waits for a human, and the record keeps the escalation, resolved, with who and why."""
    assert cli.run("run", "--", "sh", "-c", "exit 3").returncode == 1
    (job,) = (r["id"] for r in cli.json("status"))
    assert f"job {job} waits for a human (exit: no rule matches exit)" in cli.run("status").stderr
    (open_,) = cli.json("show", job)["job"]["escalations"]
    p = cli.run("ack", job, "--note", "bad input, fixed")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"job {job}: escalation #{open_['seq']} acknowledged\n"
    for _ in range(2):  # every status after it, not only the next
        p = cli.run("status")
        assert p.returncode == 0 and "waits for a human" not in p.stderr, p.stderr
    shown = cli.json("show", job)
    (escalation,) = shown["job"]["escalations"]
    assert escalation["resolvedAt"] is not None and shown["job"]["closed"]
    (event,) = [e for e in shown["events"] if e["kind"] == "escalation-resolved"]
    assert event["data"]["reason"] == "acknowledged" and event["data"]["note"] == "bad input, fixed"
    assert event["data"]["by"].startswith("operator:")
    again = cli.run("ack", job)
    assert again.returncode == 0 and "has no escalation waiting for a human" in again.stderr
