"""The fault campaign's history check (``bench/faults.py``, ``history``): a supervisor's traced action counts as
made without a lease when the last lease event before it names another process, or none; as a late call when the
process wrote its intent while it held the lease."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

from dispatch.records.model import Event

ROOT = Path(__file__).resolve().parents[2]


def faults() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_faults", ROOT / "bench" / "faults.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_an_action_after_another_took_the_job_over_is_counted(tmp_path: Path) -> None:
    def log(owner: str, *calls: dict[str, object]) -> SimpleNamespace:
        path = tmp_path / f"{owner}.jsonl"
        path.write_text("".join(json.dumps({"owner": owner, **c}) + "\n" for c in calls))
        return SimpleNamespace(logs=[path])

    stop = SimpleNamespace(owner="b", action=SimpleNamespace(value="stop"), written_at=111.5)
    hold = SimpleNamespace(owner="a", action=SimpleNamespace(value="hold"), written_at=108.0)
    subs = [SimpleNamespace(scheduler_id="101", strays=["102"])]
    job = SimpleNamespace(id="j1", submissions=subs, intents=[stop, hold])
    events = [
        Event("j1", 100.0, "lease", {"owner": "a", "token": 1, "from": None}),
        Event("j1", 110.0, "lease", {"owner": "b", "token": 2, "from": "a"}),
        Event("j1", 100.0, "intent", {"seq": 1}),
    ]
    records = SimpleNamespace(events=lambda job_id: events if job_id == "j1" else [])
    a = log(
        "a",
        {"call": "start", "target": "j1", "at": 105.0},
        {"call": "open", "target": "101", "at": 111.0},
        {"call": "hold", "target": "101", "at": 112.0},  # its intent was written under a's lease: a late call
    )
    b = log(
        "b",
        {"call": "inspect_many", "at": 111.0},
        {"call": "stop_job", "target": "102", "at": 112.0},
        {"call": "open", "target": "999", "at": 113.0},
    )
    got = faults().history(records, [job], {"local": [a, b]})
    assert got["actions"] == 5 and got["unattributed"] == 1
    assert got["acted_without_lease"] == 1 and got["late_calls"] == 1, got
    assert got["details"][0].startswith("a open 101 (job j1) at 111.00"), got
