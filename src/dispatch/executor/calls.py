"""The caller's side of a call's files in the shared directory: the pickled call in, the result out.

Layout, under the cluster's shared directory (:class:`~dispatch.spi.StoragePaths`)::

    <shared>/<session>/run.py            the runner (a copy of dispatch/executor/run.py)
    <shared>/<session>/<call>/call.pkl   the pickled function, arguments and options
    <shared>/<session>/<call>/result.<rank>.pkl

A session is one :class:`~dispatch.executor.Executor`. Directories made here take the shared directory's own
permission bits, so a shared directory that a group (or the cluster's user, through a mount) may write lets the
job write its result; a private one (0700) keeps them private.
"""

from __future__ import annotations

import os
import pickle
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle  # type: ignore[import-untyped]

from dispatch.errors import DispatchError
from dispatch.executor import run
from dispatch.spi import StoragePaths


class CallError(DispatchError):
    """A call could not be made, or ended without an answer to give (the message says which and why)."""


class ResultTooLarge(CallError):
    """The function's result pickled to more than the executor's ``max_result_bytes``."""


class RemoteTraceback(Exception):
    """The remote traceback of a re-raised exception, set as its ``__cause__`` (so it prints after it)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class RemoteError(CallError):
    """The function raised an exception that could not travel back pickled: its type, message and traceback."""

    def __init__(self, type_name: str, message: str, text: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.remote_message = message
        self.traceback = text


def _mkdir(path: Path, mode: int) -> None:
    path.mkdir(exist_ok=True)
    os.chmod(path, mode)


@dataclass(frozen=True)
class Session:
    """One executor's directory in the shared storage, both as this process sees it and as the job does."""

    local: Path
    remote: str
    mode: int

    @classmethod
    def create(cls, paths: StoragePaths) -> Session:
        """A new session directory (the shared directory is made if missing) holding a copy of the runner."""
        root = Path(paths.local)
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            mode = root.stat().st_mode & 0o7777
            name = secrets.token_hex(6)
            session = cls(root / name, f"{paths.remote.rstrip('/')}/{name}", mode)
            _mkdir(session.local, mode)
            shutil.copyfile(run.__file__, session.local / "run.py")
            os.chmod(session.local / "run.py", 0o644)
        except OSError as exc:
            raise CallError(f"cannot use the shared directory {paths.local}: {exc}") from exc
        return session

    @property
    def runner(self) -> str:
        """The runner's path as the job sees it."""
        return f"{self.remote}/run.py"

    def new_call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any], options: Mapping[str, Any]
    ) -> Call:
        """Pickle the call (CallError when it cannot be pickled: nothing is written then) and write it."""
        try:
            data = cloudpickle.dumps({"fn": fn, "args": args, "kwargs": dict(kwargs), **options})
        except Exception as exc:
            raise CallError(f"cannot pickle the call to {_name(fn)}: {type(exc).__name__}: {exc}") from exc
        name = secrets.token_hex(6)
        call = Call(self.local / name, f"{self.remote}/{name}")
        try:
            _mkdir(call.local, self.mode)
            tmp = call.local / "call.pkl.tmp"
            tmp.write_bytes(data)
            os.replace(tmp, call.local / "call.pkl")
        except OSError as exc:
            raise CallError(f"cannot write the call to {_name(fn)} in {call.local}: {exc}") from exc
        return call

    def remove(self) -> None:
        """Remove the session's directory if no call is left in it."""
        leftover = [p for p in self.local.iterdir() if p.name != "run.py"] if self.local.exists() else []
        if not leftover:
            shutil.rmtree(self.local, ignore_errors=True)


@dataclass(frozen=True)
class Call:
    """One call's directory."""

    local: Path
    remote: str

    def results(self, ranks: range, cap: int | None) -> dict[int, dict[str, Any]]:
        """The result dicts (:mod:`dispatch.executor.run`) of ``ranks`` that wrote one; ResultTooLarge for a
        file over ``cap`` (plus a margin for the envelope), CallError for one that cannot be read."""
        out: dict[int, dict[str, Any]] = {}
        for rank in ranks:
            path = self.local / run.result_name(rank)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if cap is not None and size > cap + 4096:
                raise ResultTooLarge(f"the result of rank {rank} ({path}) is {size} bytes, over the cap of {cap}")
            try:
                out[rank] = pickle.loads(path.read_bytes())
            except Exception as exc:
                raise CallError(f"cannot read the result of rank {rank} ({path}): {type(exc).__name__}: {exc}") from exc
        return out

    def remove(self) -> None:
        shutil.rmtree(self.local, ignore_errors=True)


def value_of(result: Mapping[str, Any]) -> Any:
    """The value a result dict carries, or raise what it says: the remote exception (its remote traceback as
    the cause), RemoteError when the exception itself could not travel, ResultTooLarge."""
    if result.get("ok"):
        return result.get("value")
    if "too_large" in result:
        raise ResultTooLarge(
            f"the function's result is {result['too_large']} bytes pickled, over the cap of {result['cap']}"
            " (max_result_bytes): write large results to a file and return its path"
        )
    error = result.get("error")
    text = str(result.get("traceback", ""))
    if isinstance(error, BaseException):
        raise error from RemoteTraceback(text)
    raise RemoteError(str(result.get("type")), str(result.get("message")), text) from RemoteTraceback(text)


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__)


def call_name(fn: Callable[..., Any]) -> str:
    """A job name for a call of ``fn`` (at most 128 printable characters)."""
    return f"call {_name(fn)}"[:128]
