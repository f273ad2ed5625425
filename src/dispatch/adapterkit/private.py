"""Directories on shared storage that are their owner's alone, made and checked from this process.

An adapter that writes from this machine (the Grid Engine adapter's output directory, say) makes its directories
0700, whatever the umask, and refuses one that already exists but is not the user's alone: a symbolic link,
another user's directory, or one others may write to (they could plant or replace files in it).

A job's own files (its output, its progress) are made under ``umask 077`` on the node; the user's program then
runs under the umask of the process that submitted it (:func:`caller_umask`), as a bare ``sbatch`` or ``qsub``
would run it, so a checkpoint the team shares is not made private behind the user's back.
"""

from __future__ import annotations

import os
import stat

from dispatch.errors import ConfigError
from dispatch.umask import caller_umask


def private_dir(path: str, setting: str) -> None:
    """Make ``path`` and its missing parents, each 0700; ConfigError naming ``setting`` when ``path`` exists and
    is not a directory of the user's alone."""
    missing: list[str] = []
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue  # made meanwhile: checked below when it is the directory itself
        os.chmod(d, 0o700)  # the umask may have taken bits away
    why = not_private(path)
    if why:
        raise ConfigError(setting, f"{path} {why}: fix it or choose another directory")


def not_private(path: str, *, directory: bool = True) -> str:
    """Why ``path`` is not a directory (with ``directory`` False: a regular file) of the user's alone ("" when it
    is)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if directory and not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if not directory and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid != os.geteuid():
        return "belongs to another user"
    if st.st_mode & 0o022:
        return "may be written by others (group or world)"
    return ""


def umask_line(mask: int | None = None) -> str:
    """The shell line that gives the user's program the caller's umask (:func:`caller_umask` when ``mask`` is
    None): the last line before it starts, after every file of dispatch's own is made."""
    return f"umask {caller_umask() if mask is None else mask:04o}"
