"""A bad option value is one line on stderr naming the option and the value, and exit 2 (docs/cli.md): the same
for click's own checks (ranges, integers, unknown options, a missing argument) as for dispatch's."""

from __future__ import annotations

import pytest

from dispatch.cli.exitcodes import Exit

from .conftest import Env

BAD = [
    (("-N", "0"), ("'--nodes'", "0")),
    (("--nodes", "two"), ("'--nodes'", "'two'")),
    (("-p", "0"), ("'--procs-per-node'", "0")),
    (("--memory-mb", "-3"), ("'--memory-mb'", "-3")),
    (("--cpus-per-proc", "0"), ("'--cpus-per-proc'", "0")),
    (("--gpus-per-node", "-1"), ("'--gpus-per-node'", "'-1'")),
    (("--mem-per-node", "4X"), ("'--mem-per-node'", "'4X'")),
    (("-t", "5x"), ("'--time-limit'", "'5x'")),
    (("--no-such-option",), ("'--no-such-option'",)),
]


@pytest.mark.parametrize("command", ["run", "submit"])
@pytest.mark.parametrize(("args", "words"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_option_value_is_one_line_naming_it(
    cli: Env, command: str, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    p = cli.run(command, *args, "--", "true")
    assert p.returncode == Exit.USAGE, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("dispatch: error: "), lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    assert p.stdout == ""


def test_a_missing_command_is_one_line_pointing_at_the_help(cli: Env) -> None:
    p = cli.run("run")
    assert p.returncode == Exit.USAGE
    assert p.stderr.splitlines() == ["dispatch: error: Missing argument 'COMMAND...' (see 'dispatch run --help')"]
