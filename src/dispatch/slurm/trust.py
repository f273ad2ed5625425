"""What the Slurm adapter writes to shared storage is its owner's alone, and what it reads back is checked first.

Writing: every script runs under ``umask 077`` (:meth:`dispatch.slurm.scripts.Script.render`) and so does every
batch script (:func:`dispatch.slurm.submit.build`), so each file dispatch or its job makes (pointers, marker maps,
output files, directories) is 0600 or 0700 whatever the caller's umask; the directories dispatch owns outright
(the pointers' and the maps') are also set to 0700 when they already exist (:data:`PREPARE`).

Reading: a file read back (a pointer, a marker map, an output file) is used only when :data:`TRUSTED` holds for it
and for its directory: it exists, is not a symbolic link, is owned by the user the script runs as, and is
writable by no one else (group and others); a pointer is also at most :data:`POINTER_MAX` bytes, and its content
must be a files' prefix dispatch writes (:func:`pointed_base`). Anything else is ignored with the reason logged,
or refused with an error naming the file: never followed.
"""

from __future__ import annotations

import posixpath
import re

from dispatch.adapterkit.programs import program

POINTER_MAX = 4096
"""The most bytes of a pointer file: one line, a path."""
MAP_MAX = 1 << 20
"""The most bytes of an array's marker map (:data:`dispatch.slurm.arrays.MAX_SCRIPT` tasks' markers fit)."""

TRUSTED = program("dispatch.slurm", "trusted.sh") + "\n"
"""A shell function (``programs/trusted.sh``): ``_dsp_trusted PATH`` is true when PATH exists, is no symbolic link,
is owned by the script's user and is writable by neither group nor others (``stat -c %a``: the group digit, then the
others')."""

PREPARE = TRUSTED + program("dispatch.slurm", "prepare.sh")
"""``programs/prepare.sh``, ``bash -c PREPARE _ <pointers' dir> <output dir>...``: make the directories (0700), check
the pointers' one and set it to 0700 (exit 1, naming it, when it is not the user's alone)."""

_MARKER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def pointed_base(text: str) -> tuple[str | None, str]:
    """The files' prefix ``<dir>/<marker>`` a pointer holds, or None and why it is not one: a normalised absolute
    path (no ``.``/``..`` component, no doubled ``/``) whose last component is a job name dispatch gives (a
    marker, or an array's name), at most :data:`POINTER_MAX` bytes, one line."""
    base = text.strip("\n")
    if not base:
        return None, "it is empty"
    if "\n" in base or len(base.encode("utf-8", "surrogateescape")) > POINTER_MAX:
        return None, "it is not one short line"
    if not base.startswith("/") or posixpath.normpath(base) != base or base.startswith("//"):
        return None, "it is not a normalised absolute path"
    if not _MARKER.fullmatch(posixpath.basename(base)):
        return None, "its last component is not a dispatch job name"
    return base, ""
