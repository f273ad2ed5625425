import os
import re
import tempfile
from pathlib import Path

import pytest

from dispatch.errors import ConfigError
from dispatch.settings import decode
from dispatch.slurm import schema
from dispatch.slurm.settings import SlurmSettings
from dispatch.slurm.transport.ssh import control_dir

DOC = Path(__file__).resolve().parents[2] / "docs" / "adapters" / "slurm.md"


def test_defaults_are_local_and_pass_path() -> None:
    s = decode(SlurmSettings, {})
    assert s.transport == "local"
    assert s.environment.names == ["PATH"]


def test_empty_pass_list_passes_nothing() -> None:
    s = decode(SlurmSettings, {"environment": {"pass": []}})
    assert s.environment.names == []


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"transport": "ssh"}, "ssh"),
        ({"transport": "ssh", "ssh": {"host": "-oProxyCommand=x"}}, "ssh.host"),
        ({"transport": "ssh", "ssh": {"host": "h; rm -rf /"}}, "ssh.host"),
        ({"transport": "ssh", "ssh": {"host": "h", "user": "a b"}}, "ssh.user"),
        ({"transport": "ssh", "ssh": {"host": "h", "port": 70000}}, "ssh.port"),
        ({"transport": "ssh", "ssh": {"host": "h", "options": ["ProxyCommand=nc x"]}}, "ssh.options[0]"),
        ({"output": {"dir": "relative"}}, "output.dir"),
        ({"output": {"dir": "/a/%j"}}, "output.dir"),
        ({"output": {"dir": "/a\\b"}}, "output.dir"),
        ({"environment": {"pass": ["OK", "1BAD"]}}, "environment.pass[1]"),
        ({"defaults": {"partition": "-x"}}, "defaults.partition"),
        ({"preflight": {"cacheDir": "rel"}}, "preflight.cacheDir"),
        ({"timeouts": {"call": "soon"}}, "timeouts.call"),
        ({"nope": 1}, "nope"),
    ],
)
def test_bad_settings_name_the_key(value: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        decode(SlurmSettings, value)
    assert err.value.path == key


def test_durations_and_ssh_decode() -> None:
    s = decode(
        SlurmSettings,
        {"transport": "ssh", "ssh": {"host": "127.0.0.1", "user": "ada", "port": 2222, "controlPersist": "2m"}},
    )
    assert s.ssh is not None and s.ssh.control_persist == 120.0 and s.ssh.port == 2222


def test_schema_lists_keys() -> None:
    sc = schema()
    props = sc["properties"]
    assert {"transport", "ssh", "defaults", "environment", "preflight", "output", "timeouts", "cessation"} <= set(props)
    assert props["transport"]["enum"] == ["local", "ssh"]
    assert "pass" in props["environment"]["properties"]


def test_unknown_transport_is_refused_at_new() -> None:
    import dispatch.slurm as slurm

    with pytest.raises(ConfigError) as err:
        slurm.new({"transport": "carrier-pigeon"})
    assert err.value.path == "transport"


def test_the_ssh_control_directory_is_the_same_in_the_schema_the_docs_and_the_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssh = schema()["properties"]["ssh"]["anyOf"][0]["properties"]
    said = re.search(r"\(default: ([^)]+)\)", ssh["controlDir"]["description"])
    assert said is not None
    row = next(ln for ln in DOC.read_text().splitlines() if ln.startswith("| `ssh.controlDir` |"))
    assert row.split("|")[2].strip() == f"`{said.group(1)}`"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    expected = said.group(1).replace("$TMPDIR", str(tmp_path)).replace("<uid>", str(os.getuid()))
    assert control_dir() == expected
