"""The shell and awk programs an adapter runs on a login node, kept as files in its package and read once.

Each program is a file in the ``programs`` directory of the adapter's package (``dispatch/slurm/programs/``,
``dispatch/gridengine/programs/``), shipped in the wheel as package data and checked by ``shellcheck`` in the lint
step (``scripts/lint.sh``). A file opens with a header: its ``#!`` line and the comment lines right after it
(its contract, shellcheck's directives). :func:`program` returns the text after that header, which is what the
adapter runs (``bash -c TEXT _ ARG...``, or ``awk TEXT``): the header never travels to the cluster.

Values reach a program as its arguments (``$1``, ``$2``...), never spliced into its text. The one exception is a
constant of the adapter's that the program shares with its Python side (a size limit, a file name prefix): the
program holds it as a plain assignment line, ``name=value``, with the value the file is linted and tested with, and
:func:`program` replaces that line's value with the Python constant's (shell-quoted), so the constant is written
once. Nothing a user types is ever such a constant.
"""

from __future__ import annotations

import functools
import re
import shlex
from importlib import resources

DIRECTORY = "programs"
"""The directory, inside an adapter's package, of its programs."""


@functools.cache
def _text(package: str, name: str) -> str:
    return resources.files(package).joinpath(DIRECTORY, name).read_text(encoding="utf-8")


def body(text: str) -> str:
    """``text`` without its header (the ``#!`` line and the comment lines after it) and its final newline."""
    lines = text.split("\n")
    k = 0
    while k < len(lines) and lines[k].startswith("#"):
        k += 1
    return "\n".join(lines[k:]).removesuffix("\n")


@functools.cache
def program(package: str, name: str, **constants: str | int) -> str:
    """The program ``name`` of ``package`` (``"dispatch.slurm"``) as it runs: its file's text after the header,
    with each of ``constants`` set on its one ``<name>=`` line. ValueError when a constant has no such line, or
    more than one."""
    text = body(_text(package, name))
    for key, value in constants.items():
        line = re.compile(rf"^{re.escape(key)}=.*$", re.MULTILINE)
        setting = f"{key}={shlex.quote(str(value))}".replace("\\", "\\\\")  # subn reads escapes in it
        text, n = line.subn(setting, text)
        if n != 1:
            raise ValueError(f"{package}/{DIRECTORY}/{name}: {n} lines set {key}, not one")
    return text


def names(package: str) -> list[str]:
    """The programs of ``package``, by file name."""
    return sorted(p.name for p in resources.files(package).joinpath(DIRECTORY).iterdir() if p.is_file())
