"""Progress in the read commands: ``dispatch status`` and ``dispatch show`` show each running job's step/total,
rate, estimated end and last report age, read in the same batched observation as its state."""

from __future__ import annotations

import re
import sys

from .conftest import Env, wait_until

TRAIN = (
    "import time\n"
    "from dispatch import job\n"
    "for step in range(100000):\n"
    "    job.progress(step, total=100000, loss=0.5)\n"
    "    time.sleep(0.05)\n"
)


def test_status_and_show_carry_each_rank_s_progress(cli: Env) -> None:
    job = cli.run(
        "submit", "-N", "2", "-e", "DISPATCH_PROGRESS_INTERVAL=0.2", "--", sys.executable, "-c", TRAIN
    ).stdout.strip()
    assert job

    def two_ranks_moving() -> bool:
        rows = cli.json("status", job)
        ranks = rows[0].get("progress", [])
        return len(ranks) == 2 and all(r["rate"] for r in ranks)

    wait_until(two_ranks_moving, timeout=30)
    (row,) = cli.json("status", job)
    for rank, p in enumerate(row["progress"]):
        assert p["rank"] == rank and p["total"] == 100000 and 0 < p["step"] < 100000
        assert 1 < p["rate"] < 40  # about 20 steps per second
        assert p["endsAt"] > 0 and 0 <= p["lastReportAgeSeconds"] < 10 and p["metrics"] == {"loss": 0.5}
    table = cli.run("status", job).stdout
    assert "PROGRESS" in table.splitlines()[0]
    assert re.search(r"/100000 \(\d+%\)", table) and "/s ends " in table and " ago" in table
    shown = cli.run("show", job).stdout
    assert "progress (as read now):" in shown
    assert "rank 0: step " in shown and "rank 1: step " in shown and "loss=0.5" in shown
    assert cli.run("stop", job).returncode == 0
    no_progress = cli.run("status", job).stdout
    assert "PROGRESS" not in no_progress.splitlines()[0]  # an ended job shows none
