"""Strict settings decoding: unknown and mistyped keys are ConfigErrors naming the dotted key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch import ConfigError
from dispatch.settings import decode, encode, parse_duration, schema


@dataclass(frozen=True)
class SSH:
    host: str
    port: int = 22
    options: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Env:
    pass_: list[str] | None = field(default=None, metadata={"key": "pass"})


@dataclass(frozen=True)
class Sample:
    transport: Literal["local", "ssh"] = "local"
    ssh: SSH | None = None
    environment: Env = field(default_factory=Env)
    cache_dir: str | None = None
    timeout: float = field(default=30.0, metadata={"duration": True})
    flags: dict[str, bool] = field(default_factory=dict)


def test_decodes_mapping_json_and_instance() -> None:
    data = {"transport": "ssh", "ssh": {"host": "h", "port": 2222}, "environment": {"pass": []}, "timeout": "1m30s"}
    a = decode(Sample, data)
    b = decode(
        Sample, '{"transport": "ssh", "ssh": {"host": "h", "port": 2222}, "environment": {"pass": []}, "timeout": 90}'
    )
    assert a == b
    assert a.environment.pass_ == []
    assert decode(Sample, a) == a
    assert decode(Sample, encode(a)) == a
    assert decode(Sample, None) == Sample()


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"bogus": 1}, "bogus"),
        ({"ssh": {"host": "h", "prot": 1}}, "ssh.prot"),
        ({"ssh": {"port": 22}}, "ssh.host"),
        ({"ssh": {"host": "h", "port": "22"}}, "ssh.port"),
        ({"ssh": {"host": "h", "options": ["a", 3]}}, "ssh.options[1]"),
        ({"transport": "carrier-pigeon"}, "transport"),
        ({"timeout": "soon"}, "timeout"),
        ({"timeout": -1}, "timeout"),
        ({"environment": {"pass": "PATH"}}, "environment.pass"),
        ({"flags": {"a": "yes"}}, "flags.a"),
        ({"cacheDir": True}, "cacheDir"),
    ],
)
def test_errors_name_the_key(data: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        decode(Sample, data)
    assert err.value.path == path
    assert path in str(err.value)


def test_bad_json_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="not valid JSON"):
        decode(Sample, "{nope")


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), (7, 7)])
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_schema_is_closed_and_typed() -> None:
    s = schema(Sample, title="sample")
    assert s["additionalProperties"] is False
    assert s["properties"]["transport"] == {"enum": ["local", "ssh"], "default": "local"}
    assert "pass" in s["properties"]["environment"]["properties"]
    assert s["properties"]["ssh"]["anyOf"][0]["required"] == ["host"]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["transport", "ssh", "environment", "cacheDir", "timeout", "flags", "x"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
            max_leaves=8,
        ),
        max_size=6,
    )
)
def test_fuzzed_settings_never_escape_config_error(data: dict[str, Any]) -> None:
    try:
        decode(Sample, data)
    except ConfigError as exc:
        assert str(exc)


def _properties(node: object, path: str = "") -> list[tuple[str, dict[str, object], bool]]:
    """Every property of a schema, nested objects included: (key path, its schema, whether it is required)."""
    out: list[tuple[str, dict[str, object], bool]] = []
    if not isinstance(node, dict):
        return out
    for alt in node.get("anyOf", []):
        out += _properties(alt, path)
    required = set(node.get("required", []))
    for key, sub in node.get("properties", {}).items():
        out.append((path + key, sub, key in required))
        out += _properties(sub, path + key + ".")
    return out


@pytest.mark.parametrize("name", ["memory", "local", "slurm", "kubeflow"])
def test_every_adapter_schema_names_each_fields_meaning_and_default(name: str) -> None:
    """What `dispatch schema NAME` prints: editors and readers see what each key means and its default."""
    from dispatch.registry import adapter

    info = adapter(name)
    assert info.settings is not None
    props = _properties(schema(info.settings))
    assert len(props) >= 3
    undocumented = [key for key, sub, _ in props if not sub.get("description")]
    assert not undocumented, f"{name}: keys without a description: {undocumented}"
    no_default = [key for key, sub, required in props if not required and "default" not in sub]
    assert not no_default, f"{name}: optional keys without a default: {no_default}"
    decode(info.settings, {key: sub["default"] for key, sub, req in props if "." not in key and not req})
