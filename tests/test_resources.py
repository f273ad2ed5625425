"""The portable ``resources`` part of a JobSpec: validation naming the field, JSON, old specs still read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.errors import SpecError
from dispatch.resources import Resources, format_memory, parse_gpus, parse_memory
from dispatch.spec import JobSpec


def test_a_full_request_round_trips_through_json() -> None:
    res = Resources(gpus_per_node=4, gpu_type="a100", cpus_per_proc=8, mem_per_node=parse_memory("64Gi", "m"))
    spec = JobSpec(("python", "train.py"), nodes=2, resources=Resources(**{**res.__dict__, "exclusive": True}))
    data = json.loads(json.dumps(spec.to_json()))
    assert data["resources"] == {
        "gpusPerNode": 4,
        "gpuType": "a100",
        "cpusPerProc": 8,
        "memPerNode": "64G",
        "exclusive": True,
    }
    assert JobSpec.from_json(data) == spec


def test_a_spec_without_resources_keeps_its_old_json_and_old_json_reads() -> None:
    old = {"command": ["true"], "nodes": 1, "procsPerNode": 1}
    spec = JobSpec.from_json(old)
    assert spec.resources == Resources() and spec.resources.empty
    assert spec.to_json() == old


@pytest.mark.parametrize(
    ("text", "mib"),
    [("512M", 512), ("64G", 65536), ("64Gi", 65536), ("64GiB", 65536), ("64GB", 65536), ("1T", 1 << 20),
     ("2048K", 2), ("100", 100), (100, 100)],
)  # fmt: skip
def test_memory_sizes_are_binary_and_exact(text: Any, mib: int) -> None:
    assert parse_memory(text, "m") == mib
    assert parse_memory(format_memory(mib), "m") == mib


@pytest.mark.parametrize(
    ("resources", "field", "words"),
    [
        ({"gpusPerNode": -1}, "resources.gpusPerNode", "from 0"),
        ({"gpusPerNode": True}, "resources.gpusPerNode", "integer"),
        ({"gpusPerNode": 2, "gpuType": "a 100"}, "resources.gpuType", "word"),
        ({"gpuType": "a100"}, "resources.gpuType", "gpusPerNode"),
        ({"cpusPerProc": 0}, "resources.cpusPerProc", "from 1"),
        ({"memPerNode": "4X"}, "resources.memPerNode", "unknown unit"),
        ({"memPerNode": "1000K"}, "resources.memPerNode", "whole number of MiB"),
        ({"memPerNode": "-4G"}, "resources.memPerNode", "memory size"),
        ({"memPerNode": 0}, "resources.memPerNode", "between"),
        ({"exclusive": "yes"}, "resources.exclusive", "true or false"),
        ({"gpus": 4}, "resources.gpus", "unknown field"),
        ([], "resources", "object"),
    ],
)
def test_bad_resources_name_the_field(resources: Any, field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        JobSpec.from_json({"command": ["a"], "resources": resources})
    assert err.value.path == field
    assert words in err.value.message


def test_gpus_are_written_type_colon_count() -> None:
    assert parse_gpus("4") == (4, None)
    assert parse_gpus("h100-80gb:8") == (8, "h100-80gb")
    with pytest.raises(SpecError, match="--gpus-per-node"):
        parse_gpus("a100:", "--gpus-per-node")
    assert Resources(gpus_per_node=8, gpu_type="h100").gpus == "h100:8"
    assert Resources().gpus == ""


def test_the_spec_refuses_something_else_as_resources() -> None:
    with pytest.raises(SpecError, match="resources"):
        JobSpec(("a",), resources={"gpusPerNode": 1})  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["gpusPerNode", "gpuType", "cpusPerProc", "memPerNode", "exclusive", "junk"]),
        st.none() | st.booleans() | st.integers(-3, 5000) | st.text(max_size=8),
        max_size=5,
    )
)
def test_fuzzed_resources_give_spec_errors_or_round_trip(data: dict[str, Any]) -> None:
    try:
        spec = JobSpec.from_json({"command": ["a"], "resources": data})
    except SpecError as exc:
        assert exc.path.startswith("resources")
    else:
        assert JobSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
