"""Help texts that name the adapters, filled from the registry when they are read.

A help text (a command's or an option's) written with ``{adapters}`` shows every adapter
:func:`dispatch.registry.registered` lists: the built-in ones and those installed through the
``dispatch.adapters`` entry points, read when the help is shown (entry points are listed, never imported).
"""

from __future__ import annotations

import click

PLACEHOLDER = "{adapters}"


def adapter_names() -> str:
    """The adapter names this installation can open, comma-separated."""
    from dispatch.registry import registered

    return ", ".join(registered())


def _fill(text: str | None) -> str | None:
    if text and PLACEHOLDER in text:
        return text.replace(PLACEHOLDER, adapter_names())
    return text


class _HelpNamesAdapters:
    """Mixin: the help text may name the adapters with ``{adapters}``, filled when the help is read."""

    _help_text: str | None

    @property
    def help(self) -> str | None:
        return _fill(self._help_text)

    @help.setter
    def help(self, value: str | None) -> None:
        self._help_text = value


class ListsAdapters(_HelpNamesAdapters, click.Command):
    """A command whose help text may name the adapters with ``{adapters}``."""


class AdapterOption(_HelpNamesAdapters, click.Option):
    """An option whose help text may name the adapters with ``{adapters}``."""
