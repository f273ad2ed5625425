"""The runner a :class:`dispatch.Executor` job starts on every rank, and the seal both sides put on the files they
share.

It needs the standard library, cloudpickle, and whatever the function itself imports; not dispatch (the
executor copies this file into the shared directory and runs that copy, so a cluster without dispatch
installed runs calls too). The job's command is a short bootstrap (:data:`dispatch.executor.seal.BOOTSTRAP`)
that opens ``SESSION/run.py`` only when the session directory and the file are trusted (:func:`untrusted`) and
runs it as ``run.py CALL_DIR OWNER_UID GID``; ``python -m dispatch.executor.run CALL_DIR`` is the same where
dispatch is installed.

Trust, on both sides: a file or directory is read only when it is owned by this user or the caller
(``OWNER_UID``) or carries the configured group (``GID``, -1 for none), nobody else may write it (the group only
when it is the configured one), and it is no symbolic link (``O_NOFOLLOW``). ``CALL_DIR/key`` holds the call's
secret key (mode 0600, 0640 with a group; never in argv or the environment); ``call.pkl`` and every result are
sealed with it (:func:`seal`: an HMAC-SHA256 over the file's role and payload), and a seal is checked before
anything is unpickled.

``CALL_DIR/call.pkl`` holds the pickled call (a dict: ``fn``, ``args``, ``kwargs``, ``all_ranks``,
``max_result_bytes``, ``file_mode``). Every rank runs the function (a multi-rank function reads its place with
``dispatch.job.context()``); rank 0 writes ``CALL_DIR/result.0.pkl``, and with ``all_ranks`` every rank writes
``result.<rank>.pkl``. A result file is written whole or not at all (a fresh temporary file renamed into place)
and holds a pickled dict:

* ``{"ok": True, "value": ...}`` when the function returned;
* ``{"ok": False, "error": exc or None, "type": ..., "message": ..., "traceback": ...}`` when it raised (``error``
  is None when the exception itself cannot be pickled; the text still travels);
* ``{"ok": False, "too_large": size, "cap": cap}`` when the pickled value is larger than the cap.

The process exits 0 when the function returned and 1 when it raised (so the job's outcome says so too), 2 when
the call cannot be read or is refused (untrusted, or its seal does not hold).

A callable with a ``checkpoint`` method (submitit's convention) is asked for its resumable state when this
execution is about to be stopped: on SIGTERM, or on the warning signal of ``dispatch.CessationWarning``
(``DISPATCH_CESSATION_SIGNAL``). Rank 0 calls ``fn.checkpoint(*args, **kwargs)``: it returns the callable to run
next time with the same arguments, or an object with ``function``, ``args`` and ``kwargs`` (submitit's
``DelayedSubmission``), or None (nothing to save). That call replaces ``call.pkl`` (sealed), whole or not at all,
and the process exits ``128 + SIGTERM`` as a killed one would: the job's rules resubmit or requeue it (a time
limit, a preemption) and the next execution runs the saved call.
"""

import contextlib
import hashlib
import hmac
import os
import pickle
import signal
import stat
import sys
import traceback
from collections.abc import Mapping
from typing import Any

RANK_VARIABLES = ("DISPATCH_RANK", "RANK", "SLURM_PROCID")
CALL_FILE = "call.pkl"
KEY_FILE = "key"
SEAL_MAGIC = b"dispatch-seal-1\n"
_TAG = 32
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """A file of the shared directory that is not to be trusted (the message says which and why)."""


def rank_of(environ: Mapping[str, str]) -> int:
    """This process's rank: the first of DISPATCH_RANK, RANK, SLURM_PROCID that is set, else 0."""
    for name in RANK_VARIABLES:
        value = environ.get(name)
        if value:
            return int(value)
    return 0


def result_name(rank: int) -> str:
    return f"result.{rank}.pkl"


def _tag(key: bytes, role: str, payload: bytes) -> bytes:
    return hmac.new(key, role.encode() + b"\0" + payload, hashlib.sha256).digest()


def seal(key: bytes, role: str, payload: bytes) -> bytes:
    """``payload`` sealed with ``key`` for ``role`` (``call``, ``result.<rank>``): a file moved to another role's
    name fails its seal too."""
    return SEAL_MAGIC + _tag(key, role, payload) + payload


def unseal(key: bytes, role: str, data: bytes, where: str) -> bytes:
    """The payload of sealed ``data``; Refused when it is not sealed with ``key`` for ``role``."""
    head = len(SEAL_MAGIC) + _TAG
    if not data.startswith(SEAL_MAGIC) or len(data) < head:
        raise Refused(f"{where} carries no seal: it was not written by this call")
    if not hmac.compare_digest(data[len(SEAL_MAGIC) : head], _tag(key, role, data[head:])):
        raise Refused(f"{where} fails its seal: it was not written with this call's key (forged or altered)")
    return data[head:]


def untrusted(st: os.stat_result, owners: "set[int]", gid: int) -> "str | None":
    """Why a file or directory with status ``st`` is not to be trusted, or None: it must be owned by one of
    ``owners`` or carry group ``gid`` (-1: none), and nobody else may write it (its group only when it is
    ``gid``)."""
    mode = st.st_mode & 0o7777
    if st.st_uid not in owners and st.st_gid != gid:
        return f"it is owned by uid {st.st_uid}, not by uid {' or '.join(str(o) for o in sorted(owners))}"
    if mode & stat.S_IWOTH:
        return f"every user may write it (mode {mode:04o})"
    if mode & stat.S_IWGRP and st.st_gid != gid:
        return f"group {st.st_gid} may write it (mode {mode:04o})"
    return None


def open_trusted(
    name: str, owners: "set[int]", gid: int, *, dir_fd: "int | None" = None, directory: bool = False
) -> int:
    """A read-only descriptor of ``name`` (relative to ``dir_fd``), no symbolic link followed; Refused when it
    is not a regular file (a directory with ``directory``) or not trusted (:func:`untrusted`). FileNotFoundError
    as os.open raises it."""
    flags = os.O_RDONLY | _NOFOLLOW | (os.O_DIRECTORY if directory else 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise Refused(f"{name}: cannot be opened without following a link: {exc.strerror}") from exc
    st = os.fstat(fd)
    kind = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    why = untrusted(st, owners, gid) if kind else f"it is not a {'directory' if directory else 'regular file'}"
    if why is not None:
        os.close(fd)
        raise Refused(f"{name}: {why}")
    return fd


def read_fd(fd: int) -> bytes:
    """Everything in ``fd``, which is closed."""
    with os.fdopen(fd, "rb") as f:
        return f.read()


def read_key(call_fd: int, owners: "set[int]", gid: int) -> bytes:
    """The call's key (``key`` in the call directory ``call_fd``); Refused when others may read it."""
    fd = open_trusted(KEY_FILE, owners, gid, dir_fd=call_fd)
    if os.fstat(fd).st_mode & stat.S_IROTH:
        os.close(fd)
        raise Refused(f"{KEY_FILE}: every user may read it")
    return read_fd(fd)


def write_new(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """``data`` to ``name`` in the directory ``dir_fd``, whole or not at all, with exactly ``mode``: a fresh
    temporary file (``O_EXCL``, no link followed) renamed over it."""
    tmp = f"{name}.tmp.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _dumps(value: Any) -> bytes:
    import cloudpickle  # type: ignore[import-untyped]

    data: bytes = cloudpickle.dumps(value)
    return data


def _failure(exc: BaseException) -> bytes:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    out: dict[str, Any] = {
        "ok": False,
        "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": str(exc),
        "traceback": text,
    }
    try:
        return _dumps({**out, "error": exc})
    except Exception:  # an exception that does not pickle: its text still travels
        return _dumps({**out, "error": None})


def _resumable(call: dict[str, Any], state: Any) -> dict[str, Any]:
    """The call to save for the next execution, from what ``checkpoint`` returned."""
    if all(hasattr(state, a) for a in ("function", "args", "kwargs")):
        return {**call, "fn": state.function, "args": tuple(state.args), "kwargs": dict(state.kwargs)}
    return {**call, "fn": state}


def _on_cessation(call: dict[str, Any], save: "Any") -> None:
    """Install the checkpoint handlers when the callable has a ``checkpoint`` method (see the module docstring);
    ``save`` writes a call (rank 0's), None on the other ranks."""
    checkpoint = getattr(call["fn"], "checkpoint", None)
    if not callable(checkpoint):
        return
    signals = [signal.SIGTERM]
    warning = os.environ.get("DISPATCH_CESSATION_SIGNAL")
    if warning:
        signals.append(signal.Signals["SIG" + warning.removeprefix("SIG")])

    def handle(signum: int, frame: object) -> None:
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)  # one checkpoint: Slurm repeats SIGTERM
        if save is not None:
            try:
                state = checkpoint(*call["args"], **call["kwargs"])
                if state is not None:
                    save(_resumable(call, state))
                    print(f"dispatch runner: checkpointed on {signal.Signals(signum).name}", file=sys.stderr)
            except Exception:
                traceback.print_exc()
        sys.stderr.flush()
        os._exit(128 + int(signal.SIGTERM))

    for sig in signals:
        signal.signal(sig, handle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)  # the adapters start a rank with the warning blocked


def _open_call(call_dir: str, owners: "set[int]", gid: int) -> "tuple[int, bytes, dict[str, Any]]":
    """The call directory's descriptor, the key and the call, each checked (Refused) before it is used."""
    parent, name = os.path.split(call_dir.rstrip("/"))
    session = open_trusted(parent or ".", owners, gid, directory=True)
    try:
        fd = open_trusted(name, owners, gid, dir_fd=session, directory=True)
    finally:
        os.close(session)
    try:
        key = read_key(fd, owners, gid)
        data = read_fd(open_trusted(CALL_FILE, owners, gid, dir_fd=fd))
        call: dict[str, Any] = pickle.loads(unseal(key, "call", data, CALL_FILE))
    except BaseException:
        os.close(fd)
        raise
    return fd, key, call


def run(call_dir: str, owner: "int | None" = None, gid: int = -1) -> int:
    """Run the call in ``call_dir`` on this rank, trusting files of this user, of ``owner`` (the caller) and of
    group ``gid``; returns the exit status (see the module docstring)."""
    rank = rank_of(os.environ)
    owners = {os.getuid()} | ({owner} if owner is not None else set())
    try:
        fd, key, call = _open_call(call_dir, owners, gid)
    except Refused as exc:
        print(f"dispatch runner: the call in {call_dir} is refused: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"dispatch runner: cannot read the call in {call_dir}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    mode = int(call.get("file_mode", 0o600))
    writes = rank == 0 or bool(call.get("all_ranks"))
    name = result_name(rank)

    def answer(data: bytes) -> None:
        write_new(fd, name, seal(key, f"result.{rank}", data), mode)

    if writes:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)  # an earlier execution's answer is not this one's
    save = (lambda c: write_new(fd, CALL_FILE, seal(key, "call", _dumps(c)), mode)) if rank == 0 else None
    _on_cessation(call, save)
    try:
        value = call["fn"](*call["args"], **call["kwargs"])
    except BaseException as exc:
        if writes:
            answer(_failure(exc))
        traceback.print_exc()
        return 1
    if writes:
        try:
            data = _dumps({"ok": True, "value": value})
        except Exception as exc:
            answer(_failure(exc))
            traceback.print_exc()
            return 1
        cap = call.get("max_result_bytes")
        size = len(data)
        if cap is not None and size > cap:
            answer(_dumps({"ok": False, "too_large": size, "cap": cap}))
            print(f"dispatch runner: the result is {size} bytes pickled, over the cap of {cap}", file=sys.stderr)
            return 1
        answer(data)
    return 0


def main(argv: "list[str]") -> int:
    if not 1 <= len(argv) <= 3:
        print("usage: run.py CALL_DIR [OWNER_UID [GID]]", file=sys.stderr)
        return 2
    try:
        owner = int(argv[1]) if len(argv) > 1 else None
        gid = int(argv[2]) if len(argv) > 2 else -1
    except ValueError:
        print(f"run.py: OWNER_UID and GID are numbers, not {argv[1:]}", file=sys.stderr)
        return 2
    return run(argv[0], owner, gid)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
