"""JobSpec validation names the bad field; specs round-trip through JSON; fuzzing never escapes SpecError."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch import Image, JobSpec, Output, SharedCheckpoint, SpecError


def test_valid_spec_round_trips() -> None:
    spec = JobSpec(
        command=("torchrun", "train.py", "--lr", "1e-3"),
        nodes=2,
        procs_per_node=4,
        working_dir="/work",
        env={"A": "1"},
        time_limit=3600,
        name="exp-1",
        extensions=(Image("reg/img:1"), Output("/out"), SharedCheckpoint("/ckpt")),
        umask=0o027,
    )
    assert JobSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    assert spec.to_json()["umask"] == 0o027
    assert spec.world_size == 8
    assert spec.extension(Output) == Output("/out")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"command": ()}, "command"),
        ({"command": "python train.py"}, "command"),
        ({"command": ("a", 3)}, "command[1]"),
        ({"command": ("a\x00b",)}, "command[0]"),
        ({"command": ("",)}, "command[0]"),
        ({"command": ("a",), "nodes": 0}, "nodes"),
        ({"command": ("a",), "nodes": True}, "nodes"),
        ({"command": ("a",), "procs_per_node": 10**6}, "procsPerNode"),
        ({"command": ("a",), "working_dir": "relative"}, "workingDir"),
        ({"command": ("a",), "env": {"1BAD": "x"}}, "env.1BAD"),
        ({"command": ("a",), "env": {"OK": 1}}, "env.OK"),
        ({"command": ("a",), "env": {"DISPATCH_EXECUTION": "1.2.3"}}, "env.DISPATCH_EXECUTION"),
        ({"command": ("a",), "env": {"DISPATCH_JOB": "someone-else"}}, "env.DISPATCH_JOB"),
        ({"command": ("a",), "time_limit": -1}, "timeLimit"),
        ({"command": ("a",), "time_limit": float("inf")}, "timeLimit"),
        ({"command": ("a",), "name": "two\nlines"}, "name"),
        ({"command": ("a",), "extensions": (Image("a"), Image("b"))}, "extensions[1]"),
        ({"command": ("a",), "extensions": ("notext",)}, "extensions[0]"),
        ({"command": ("a",), "umask": 0o1000}, "umask"),
        ({"command": ("a",), "umask": -1}, "umask"),
        ({"command": ("a",), "umask": "022"}, "umask"),
        ({"command": ("a",), "umask": True}, "umask"),
    ],
)
def test_bad_fields_are_named(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        JobSpec(**kwargs)
    assert err.value.path == field


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"command": ["a"], "bogus": 1}, "bogus"),
        ({}, "command"),
        ({"command": ["a"], "extensions": [{"kind": "nope"}]}, "extensions[0].kind"),
        ({"command": ["a"], "extensions": [{"kind": "dispatch.Image"}]}, "extensions[0].ref"),
        ({"command": ["a"], "extensions": [{"kind": "dispatch.Output", "dir": "rel"}]}, ""),
        ({"command": ["a"], "extensions": [{"kind": "dispatch.Image", "ref": "x", "extra": 1}]}, "extensions[0].extra"),
    ],
)
def test_from_json_names_the_field(data: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        JobSpec.from_json(data)
    assert field in err.value.path or (field == "" and "absolute" in str(err.value))


def test_image_rejects_whitespace() -> None:
    with pytest.raises(SpecError, match="ref"):
        Image("a b")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
spec_keys = st.sampled_from(
    ["command", "nodes", "procsPerNode", "workingDir", "env", "timeLimit", "name", "extensions", "junk"]
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(spec_keys, json_values, max_size=8))
def test_fuzzed_specs_give_spec_errors_only(data: dict[str, Any]) -> None:
    try:
        spec = JobSpec.from_json(data)
    except SpecError as exc:
        assert exc.path is not None
        assert str(exc)
    else:
        assert JobSpec.from_json(spec.to_json()) == spec


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(), min_size=1, max_size=6))
def test_any_printable_argv_survives_json(argv: list[str]) -> None:
    try:
        spec = JobSpec(command=tuple(argv))
    except SpecError:
        assert any("\x00" in a for a in argv) or argv[0] == ""
        return
    assert JobSpec.from_json(json.loads(json.dumps(spec.to_json()))).command == tuple(argv)
