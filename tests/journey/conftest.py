"""The CLI fixture of tests/cli (a home with XDG directories, ``dispatch`` as a real subprocess)."""

from tests.cli.conftest import cli

__all__ = ["cli"]
