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
    assert hints[0].endswith(f"see: dispatch show {escalated}") and ok not in p.stderr
