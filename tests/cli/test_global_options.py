"""The group's options (-c/--cluster, --config, --debug) work before the subcommand and after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dispatch.cli.main import cli, main


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"), "NO_COLOR": "1"}


@pytest.mark.parametrize(
    "args",
    [
        ["-c", "nosuch", "status"],
        ["status", "-c", "nosuch"],
        ["status", "--cluster", "nosuch"],
        ["capabilities", "--cluster=nosuch"],
        ["run", "-c", "nosuch", "--", "true"],
    ],
)
def test_cluster_before_or_after_the_subcommand(env: dict[str, str], args: list[str]) -> None:
    r = CliRunner().invoke(cli, args, env=env, standalone_mode=False)
    assert "No such option" not in str(r.exception) + r.output
    assert "no cluster named 'nosuch'" in str(r.exception)


def test_after_the_subcommand_wins(env: dict[str, str], tmp_path: Path) -> None:
    r = CliRunner().invoke(cli, ["-c", "local", "status", "-c", "nosuch"], env=env, standalone_mode=False)
    assert "no cluster named 'nosuch'" in str(r.exception)


def test_config_and_debug_after_the_subcommand(env: dict[str, str], tmp_path: Path) -> None:
    missing = str(tmp_path / "none.toml")
    r = CliRunner().invoke(cli, ["status", "--config", missing], env=env, standalone_mode=False)
    assert f"the config file {missing} does not exist" in str(r.exception)
    with pytest.raises(Exception, match="does not exist"):  # --debug: the error is raised, not turned into a line
        main(["status", "--config", missing, "--debug"])


def test_run_command_keeps_its_own_dash_c(env: dict[str, str]) -> None:
    """After the command starts, ``-c`` belongs to it: ``dispatch run python3 -c ...``."""
    r = CliRunner().invoke(cli, ["run", "--dry-run", "python3", "-c", "print(1)"], env=env)
    assert r.exit_code == 0, r.output
    assert "python3 -c 'print(1)'" in r.output


def test_supervise_keeps_its_own_cluster_option() -> None:
    names = [o for p in cli.commands["supervise"].params for o in p.opts]
    assert names.count("--cluster") == 1 and "-c" not in names
