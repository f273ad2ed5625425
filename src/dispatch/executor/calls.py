"""The caller's side of a call's files in the shared directory: the pickled call in, the result out.

Layout, under the cluster's shared directory (:class:`~dispatch.spi.StoragePaths`)::

    <shared>/<session>/run.py            the runner (a copy of dispatch/executor/run.py)
    <shared>/<session>/<call>/call.pkl   the pickled function, arguments and options
    <shared>/<session>/<call>/key        the call's secret key, which seals call.pkl and every result
    <shared>/<session>/<call>/result.<rank>.pkl

A session is one :class:`~dispatch.executor.Executor`. Whatever the shared directory's own bits, what is made
here is this user's alone (or shared with one group): see :mod:`dispatch.executor.seal`.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cloudpickle  # type: ignore[import-untyped]

from dispatch.errors import DispatchError
from dispatch.executor import run
from dispatch.executor.seal import BOOTSTRAP, Trust
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


class FileRefused(CallError):
    """A file or directory of the shared directory that is not to be trusted: not this user's own (nor the
    configured group's), writable by others, a link, or a result whose seal fails. Checked before it is used."""


@dataclass(frozen=True)
class Session:
    """One executor's directory in the shared storage, both as this process sees it and as the job does, and
    who may use it (:class:`~dispatch.executor.seal.Trust`)."""

    local: Path
    remote: str
    trust: Trust

    @classmethod
    def create(cls, paths: StoragePaths, trust: Trust) -> Session:
        """A new session directory (the shared directory is made if missing) holding a copy of the runner."""
        root = Path(paths.local)
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            name = secrets.token_hex(8)
            session = cls(root / name, f"{paths.remote.rstrip('/')}/{name}", trust)
            fd = trust.make_dir(str(session.local), trust.session_mode)
            try:
                run.write_new(fd, "run.py", Path(run.__file__).read_bytes(), trust.file_mode)
            finally:
                os.close(fd)
        except (OSError, run.Refused) as exc:
            raise CallError(f"cannot use the shared directory {paths.local}: {exc}") from exc
        return session

    def command(self, python: str, call: Call) -> tuple[str, ...]:
        """The command each rank of ``call``'s job runs: the bootstrap, then the runner."""
        t = self.trust
        return (python, "-c", BOOTSTRAP, self.remote, call.name, str(t.owner), str(t.gid_arg))

    def open(self) -> int:
        """The session directory's descriptor; FileRefused when it is no longer this executor's own."""
        try:
            return self.trust.open(str(self.local), directory=True)
        except (OSError, run.Refused) as exc:
            raise FileRefused(
                f"the session directory {self.local} is refused ({exc}): another user may have replaced it"
            ) from exc

    def new_call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any], options: Mapping[str, Any]
    ) -> Call:
        """Pickle the call (CallError when it cannot be pickled: nothing is written then) and write it, sealed
        with a new key."""
        try:
            options = {**options, "file_mode": self.trust.file_mode}
            data = cloudpickle.dumps({"fn": fn, "args": args, "kwargs": dict(kwargs), **options})
        except Exception as exc:
            raise CallError(f"cannot pickle the call to {_name(fn)}: {type(exc).__name__}: {exc}") from exc
        call = Call(self, secrets.token_hex(8), secrets.token_bytes(32))
        session = self.open()
        try:
            fd = self.trust.make_dir(call.name, self.trust.call_mode, dir_fd=session)
            try:
                run.write_new(fd, run.KEY_FILE, call.key, self.trust.file_mode)
                run.write_new(fd, run.CALL_FILE, run.seal(call.key, "call", data), self.trust.file_mode)
            finally:
                os.close(fd)
        except (OSError, run.Refused) as exc:
            call.remove()
            raise CallError(f"cannot write the call to {_name(fn)} in {call.local}: {exc}") from exc
        finally:
            os.close(session)
        return call

    def remove(self) -> None:
        """Remove the session's directory if no call is left in it."""
        try:
            fd = self.open()
        except CallError:
            return
        try:
            if [n for n in os.listdir(fd) if n != "run.py"]:
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink("run.py", dir_fd=fd)
        finally:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.rmdir(self.local)


@dataclass(frozen=True)
class Call:
    """One call's directory (``name`` in its session) and its key."""

    session: Session
    name: str
    key: bytes = field(repr=False)

    @property
    def local(self) -> Path:
        return self.session.local / self.name

    @property
    def remote(self) -> str:
        return f"{self.session.remote}/{self.name}"

    def results(self, ranks: range, cap: int | None) -> dict[int, dict[str, Any]]:
        """The result dicts (:mod:`dispatch.executor.run`) of ``ranks`` that wrote one; FileRefused for one
        that is not to be trusted (checked before it is unpickled), ResultTooLarge for a file over ``cap`` (plus
        a margin for the envelope), CallError for one that cannot be read."""
        trust = self.session.trust
        session = self.session.open()
        try:
            try:
                fd = trust.open(self.name, dir_fd=session, directory=True)
            except FileNotFoundError:
                return {}
            except run.Refused as exc:
                raise FileRefused(f"the call directory {self.local} is refused: {exc}") from exc
        finally:
            os.close(session)
        try:
            return {rank: r for rank in ranks if (r := self._result(fd, rank, cap)) is not None}
        finally:
            os.close(fd)

    def _result(self, call_fd: int, rank: int, cap: int | None) -> dict[str, Any] | None:
        name = run.result_name(rank)
        path = self.local / name
        try:
            fd = self.session.trust.open(name, dir_fd=call_fd)
        except FileNotFoundError:
            return None
        except (OSError, run.Refused) as exc:
            raise FileRefused(f"the result of rank {rank} ({path}) is refused: {exc}") from exc
        size = os.fstat(fd).st_size
        if cap is not None and size > cap + 4096:
            os.close(fd)
            raise ResultTooLarge(f"the result of rank {rank} ({path}) is {size} bytes, over the cap of {cap}")
        try:
            payload = run.unseal(self.key, f"result.{rank}", run.read_fd(fd), name)
        except run.Refused as exc:
            raise FileRefused(f"the result of rank {rank} ({path}) is refused: {exc}") from exc
        try:
            out: dict[str, Any] = pickle.loads(payload)
        except Exception as exc:
            raise CallError(f"cannot read the result of rank {rank} ({path}): {type(exc).__name__}: {exc}") from exc
        return out

    def remove(self) -> None:
        try:
            session = self.session.open()
        except CallError:
            return
        try:
            shutil.rmtree(self.name, dir_fd=session, ignore_errors=True)
        finally:
            os.close(session)


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
