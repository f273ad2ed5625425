"""The caller's side of trusting the shared directory: who owns what the executor writes there, with which
modes, and the bootstrap each rank runs first.

Private (the default): directories 0700, files 0600, and a result is read only when this user owns it. With a
``group`` (for jobs that run as another user of that group, the cluster's user through a mount): the session
directory is 2750 and a call directory 2770 in that group (the job writes its result there), files 0640. In
both, a result is read only when nobody outside the owner and that group may write it, no link is followed, and
its seal (:func:`dispatch.executor.run.seal`, the call's key) holds: checked before it is unpickled.
"""

from __future__ import annotations

import grp
import os
from dataclasses import dataclass

from dispatch.executor.run import open_trusted

BOOTSTRAP = (
    "import os,sys;a=sys.argv;o={os.getuid(),int(a[3])};g=int(a[4]);"
    "t=lambda s:(s.st_uid in o or s.st_gid==g) and not s.st_mode&2 and (not s.st_mode&16 or s.st_gid==g);"
    "d=os.open(a[1],os.O_RDONLY|os.O_DIRECTORY|os.O_NOFOLLOW);f=os.open('run.py',os.O_RDONLY|os.O_NOFOLLOW,dir_fd=d);"
    "t(os.fstat(d)) and t(os.fstat(f)) or sys.exit('dispatch runner: '+a[1]+'/run.py is refused: it is not the"
    " caller\\'s own, or others may write it');"
    "c=os.fdopen(f,'rb').read();sys.argv=['run.py',a[1]+'/'+a[2],a[3],a[4]];"
    "exec(compile(c,a[1]+'/run.py','exec'),{'__name__':'__main__'})"
)
"""``python -c BOOTSTRAP SESSION CALL OWNER_UID GID``: runs ``SESSION/run.py`` only when the session directory
and the file are trusted as :func:`dispatch.executor.run.untrusted` says (a session directory another user put
in its place on a shared directory anyone may write is refused, not run)."""


@dataclass(frozen=True)
class Trust:
    """Who may read and write the executor's files: this user (``owner``) alone, or with group ``gid``."""

    owner: int
    gid: int | None = None

    @classmethod
    def of(cls, group: str | int | None) -> Trust:
        """This user's trust, with ``group`` (a name or a number) when given; ValueError naming an unknown one."""
        if group is None:
            return cls(os.getuid())
        if isinstance(group, int):
            return cls(os.getuid(), group)
        try:
            return cls(os.getuid(), grp.getgrnam(group).gr_gid)
        except KeyError:
            raise ValueError(f"group {group!r} is no group of this machine (give its number instead)") from None

    @property
    def session_mode(self) -> int:
        return 0o700 if self.gid is None else 0o2750

    @property
    def call_mode(self) -> int:
        return 0o700 if self.gid is None else 0o2770

    @property
    def file_mode(self) -> int:
        return 0o600 if self.gid is None else 0o640

    @property
    def gid_arg(self) -> int:
        return -1 if self.gid is None else self.gid

    def make_dir(self, name: str, mode: int, *, dir_fd: int | None = None) -> int:
        """A new directory ``name`` (FileExistsError when anything has the name already), with ``mode`` and
        this trust's group; returns its descriptor, checked."""
        os.mkdir(name, 0o700, dir_fd=dir_fd)
        fd = self.open(name, dir_fd=dir_fd, directory=True)
        try:
            if self.gid is not None:
                os.fchown(fd, -1, self.gid)
            os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open(self, name: str, *, dir_fd: int | None = None, directory: bool = False) -> int:
        """``name`` opened read-only when trusted (:func:`~dispatch.executor.run.open_trusted`)."""
        return open_trusted(name, {self.owner}, self.gid_arg, dir_fd=dir_fd, directory=directory)
