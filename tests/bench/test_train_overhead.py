"""The progress-overhead row of bench/train.py: the example's ``--progress-ab`` blocks (one rank, no scheduler)
and the comparison of blocks the row reports."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _train() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_train", ROOT / "bench" / "train.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_calls_progress_in_one_block_of_each_pair(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RANK": "0", "WORLD_SIZE": "1"}
    env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29731", "DISPATCH_PROGRESS_INTERVAL": "0"}
    env["DISPATCH_PROGRESS_DIR"] = str(tmp_path / "progress")  # interval 0: every call writes
    got = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "train_ddp.py"), "--steps", "80", "--checkpoint-every", "80",
         "--out", str(tmp_path / "params"), "--checkpoint-dir", str(tmp_path / "ckpt"), "--progress-ab", "5"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr[-2000:]
    blocks = [json.loads(x) for x in got.stdout.splitlines() if '"event": "block"' in x]
    assert [b["block"] for b in blocks] == list(range(16))
    on = [b["progress"] for b in blocks]
    assert all(on[i] != on[i + 1] for i in range(0, 16, 2)), on
    assert {tuple(on[i : i + 2]) for i in range(0, 16, 2)} == {(True, False), (False, True)}, on  # drawn per pair
    assert all(b["cpu"] > 0 and b["thread_cpu"] > 0 and b["wall"] > 0 for b in blocks), blocks
    last_with = max(i for i, x in enumerate(on) if x)
    report = json.loads((tmp_path / "progress" / "rank-0.json").read_text())
    assert report["step"] == 5 * (last_with + 1)  # the last call was the last step of the last block with calls


def _blocks(with_factor: float, pairs: int) -> list[dict[str, Any]]:
    out = []
    for i in range(2 * pairs):
        on = (i % 2 == 0) == (i // 2 % 2 == 0)  # with first in even pairs, second in odd ones
        base = 0.1 * (1 + (i // 2) % 3)  # the load moves the pairs' level, not a pair's ratio
        t = base * (with_factor if on else 1.0)
        out.append({"event": "block", "block": i, "progress": on, "cpu": t, "thread_cpu": t / 2, "wall": 3 * t})
    return out


def test_the_blocks_compare_with_and_without_in_pairs() -> None:
    row = _train().block_overhead(_blocks(1.1, 12), warmup_pairs=2)
    assert row["pairs"] == 10
    for m in ("cpu", "thread_cpu", "wall"):
        assert row[f"{m}_overhead_pct"] == pytest.approx(10.0)
        assert row[f"{m}_paired_ratio_median"] == pytest.approx(1.1)
        assert row[f"{m}_paired_ratio_iqr"] == pytest.approx(0.0)
        assert row[f"{m}_paired_ratio_ci95"] == pytest.approx([1.1, 1.1])
    assert row["overhead_pct"] == pytest.approx(10.0) and row["overhead_pct_ci95"] == pytest.approx([10.0, 10.0])
    assert row["cpu_with_median_s"] == pytest.approx(0.22)
    assert row["cpu_without_median_s"] == pytest.approx(0.2)


def test_a_pair_of_like_blocks_is_refused() -> None:
    blocks = _blocks(1.0, 6)
    blocks[9]["progress"] = blocks[8]["progress"]
    with pytest.raises(AssertionError, match="blocks 8 and 9"):
        _train().block_overhead(blocks, warmup_pairs=1)
