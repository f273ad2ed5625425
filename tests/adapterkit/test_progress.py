"""Reading progress reports: what dispatch.job.progress writes parses back; anything else is left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dispatch import job
from dispatch.adapterkit.progress import FILE, MAX_REPORT, parse_report
from dispatch.spi import RankProgress


def test_a_report_written_by_the_job_module_parses_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPATCH_PROGRESS_DIR", str(tmp_path))
    monkeypatch.setenv("DISPATCH_RANK", "2")
    monkeypatch.setenv("DISPATCH_EXECUTION", "1.9.0")
    job.reset_for_tests()
    try:
        assert job.progress(5, total=10, loss=0.25, bad=float("nan"))
    finally:
        job.reset_for_tests()
    (name,) = [p.name for p in tmp_path.iterdir()]
    m = FILE.fullmatch(name)
    assert m is not None and m.group(1) == "2"
    text = (tmp_path / name).read_bytes()
    report = parse_report(text, 2, execution="1.9.0", offset=100.0)
    assert report is not None
    raw = json.loads(text)
    metrics = (("loss", 0.25), ("bad", None))
    assert report == RankProgress(2, 5, raw["at"] - 100.0, 10, metrics, 5, raw["first"]["at"] - 100.0)
    assert parse_report(text, 2, execution="1.9.1") is None  # another execution's report
    assert parse_report(text, 3) is None  # the file name and the report disagree


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[1, 2]",
        '{"rank": 0, "at": 1.0}',
        '{"rank": 0, "step": -1, "at": 1.0}',
        '{"rank": 0, "step": 1.5, "at": 1.0}',
        '{"rank": 0, "step": true, "at": 1.0}',
        '{"rank": 0, "step": 1, "total": "9", "at": 1.0}',
        '{"rank": 0, "step": 1, "at": "now"}',
        '{"rank": 0, "step": 1, "at": 1.0, "metrics": [1]}',
        '{"rank": 0, "step": 1, "at": 1.0, "pad": "' + "x" * MAX_REPORT + '"}',
    ],
)
def test_what_is_not_a_report_is_left_out(text: str) -> None:
    assert parse_report(text) is None


def test_metrics_that_are_not_numbers_are_dropped_from_a_report() -> None:
    report = parse_report('{"rank": 1, "step": 3, "at": 2.5, "metrics": {"a": 1, "b": "x", "c": true, "d": null}}')
    assert report == RankProgress(1, 3, 2.5, None, (("a", 1.0), ("d", None)))


@pytest.mark.parametrize(
    "text",
    [
        '{"rank": 0, "step": 1, "at": 1.0, "metrics": {"loss": NaN}}',
        '{"rank": 0, "step": 1, "at": Infinity}',
        '{"rank": 0, "step": 1, "step": 900, "at": 1.0}',
        '{"rank": 0, "step": 1, "at": 1.0, "metrics": {"a b": 1.0}}',
        '{"rank": 0, "step": 1, "at": 1.0, "metrics": {' + ",".join(f'"m{i}": 1' for i in range(17)) + "}}",
    ],
)
def test_a_report_is_parsed_strictly(text: str) -> None:
    """What dispatch.job.progress never writes is no report: JSON's extensions (NaN, Infinity), a key given twice
    (which value a reader takes is the reader's guess), a metric name it refuses, more metrics than it writes."""
    assert parse_report(text) is None
