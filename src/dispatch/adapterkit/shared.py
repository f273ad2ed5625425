"""Small durable state shared by every process of an adapter: one JSON object in one file.

An adapter often has to remember something the scheduler cannot store (which hold instance a number stood for,
which jobs dispatch deleted, which host ran which rank), and every process that opens the backend (the CLI,
each supervisor replica) must see the same answer. :class:`SharedState` is that, and nothing more:

* :meth:`SharedState.read` returns the object as last written, without a lock: every write replaces the file
  whole (a temporary file, ``fsync``, ``rename``), so a reader sees the old object or the new, never half;
* :meth:`SharedState.update` is a read-modify-write under an exclusive advisory lock (``flock`` on
  ``<path>.lock``): two processes updating at once are serialised, and neither loses the other's change;
  the new object is written (and ``fsync``-ed, with its directory) only when it changed;
* a missing file is the empty object. A file that is not a JSON object raises ValueError naming it, unless
  the state was opened ``tolerant`` (then it reads as empty, and the next update replaces it): for state that
  only saves work, such as :class:`~dispatch.adapterkit.holds.InstanceBook`'s names.

Keep it small (it is read and written whole) and keyed so that concurrent writers touch different keys.
The directory is created with mode 0700 and the files with 0600: state is the user's own.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class SharedState:
    """The JSON object in ``path``, shared by every process that opens the same path."""

    def __init__(self, path: str | os.PathLike[str], *, tolerant: bool = False) -> None:
        self.path = Path(path)
        self.tolerant = tolerant

    def read(self) -> dict[str, Any]:
        """The object as last written ({} when the file does not exist)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except OSError as exc:
            if self.tolerant:
                return {}
            raise ValueError(f"{self.path}: cannot be read: {exc}") from None
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            return data
        if self.tolerant:
            return {}
        raise ValueError(f"{self.path} does not hold a JSON object; move it aside to start afresh")

    @contextmanager
    def update(self) -> Iterator[dict[str, Any]]:
        """Lock, read, hand the object to the caller to change in place, and write it back if it changed.
        An exception inside the block writes nothing."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            data = self.read()
            before = json.dumps(data, sort_keys=True)
            yield data
            if json.dumps(data, sort_keys=True) != before:
                self._write(data)
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _write(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_name(f"{self.path.name}.tmp")  # one writer at a time: under the lock
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # the rename itself survives a crash
        finally:
            os.close(dir_fd)
