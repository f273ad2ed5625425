"""Many specs from one file: JSON lines and parameter sweeps (``dispatch submit --from``)."""

from __future__ import annotations

import json

import pytest

from dispatch.batch import MAX_JOBS, load_specs
from dispatch.errors import SpecError


def test_json_lines_one_spec_per_line() -> None:
    text = '# two jobs\n{"command": ["true"]}\n\n{"command": ["sleep", "1"], "nodes": 2}\n'
    specs = load_specs(text, "jobs.jsonl")
    assert [s.command for s in specs] == [("true",), ("sleep", "1")]
    assert specs[1].nodes == 2


def test_json_lines_error_names_the_line_and_field() -> None:
    with pytest.raises(SpecError, match=r"jobs.jsonl line 2: nodes"):
        load_specs('{"command": ["true"]}\n{"command": ["true"], "nodes": "x"}\n', "jobs.jsonl")
    with pytest.raises(SpecError, match="line 1"):
        load_specs("{not json\n", "jobs.jsonl")


def test_sweep_is_the_product_and_values_stay_one_argv_word() -> None:
    doc = {
        "sweep": {"lr": [0.1, 0.01], "opt": ["adam", "s g d; rm -rf /"]},
        "spec": {"command": ["python", "train.py", "--lr={lr}", "{opt}", "{unknown}"], "name": "lr{lr}-{opt}"},
    }
    specs = load_specs(json.dumps(doc, indent=1), "sweep.json")
    assert [s.command[2:4] for s in specs] == [
        ("--lr=0.1", "adam"),
        ("--lr=0.1", "s g d; rm -rf /"),
        ("--lr=0.01", "adam"),
        ("--lr=0.01", "s g d; rm -rf /"),
    ]
    assert all(s.command[4] == "{unknown}" for s in specs)
    assert specs[0].name == "lr0.1-adam"


def test_sweep_errors_name_the_combination_or_field() -> None:
    with pytest.raises(SpecError, match=r"sweep.json \(n=x\): nodes"):
        load_specs(json.dumps({"sweep": {"n": ["x"]}, "spec": {"command": ["true"], "nodes": "{n}"}}), "sweep.json")
    with pytest.raises(SpecError, match="sweep.lr"):
        load_specs(json.dumps({"sweep": {"lr": []}, "spec": {"command": ["true"]}}), "sweep.json")
    with pytest.raises(SpecError, match="more than"):
        load_specs(json.dumps({"sweep": {"a": list(range(MAX_JOBS + 1))}, "spec": {"command": ["true"]}}))
    with pytest.raises(SpecError, match="no job spec"):
        load_specs("\n")
