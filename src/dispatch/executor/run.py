"""The runner a :class:`dispatch.Executor` job starts on every rank: ``python run.py CALL_DIR``.

It needs the standard library, cloudpickle, and whatever the function itself imports; not dispatch (the
executor copies this file into the shared directory and runs that copy, so a cluster without dispatch
installed runs calls too; ``python -m dispatch.executor.run CALL_DIR`` is the same where it is installed).

``CALL_DIR/call.pkl`` holds the pickled call (a dict: ``fn``, ``args``, ``kwargs``, ``all_ranks``,
``max_result_bytes``). Every rank runs the function (a multi-rank function reads its place with
``dispatch.job.context()``); rank 0 writes ``CALL_DIR/result.0.pkl``, and with ``all_ranks`` every rank writes
``result.<rank>.pkl``. A result file is written whole or not at all (a temporary file renamed into place) and
holds a pickled dict:

* ``{"ok": True, "value": ...}`` when the function returned;
* ``{"ok": False, "error": exc or None, "type": ..., "message": ..., "traceback": ...}`` when it raised (``error``
  is None when the exception itself cannot be pickled; the text still travels);
* ``{"ok": False, "too_large": size, "cap": cap}`` when the pickled value is larger than the cap.

The process exits 0 when the function returned and 1 when it raised (so the job's outcome says so too), 2 when
the call file cannot be read.

A callable with a ``checkpoint`` method (submitit's convention) is asked for its resumable state when this
execution is about to be stopped: on SIGTERM, or on the warning signal of ``dispatch.CessationWarning``
(``DISPATCH_CESSATION_SIGNAL``). Rank 0 calls ``fn.checkpoint(*args, **kwargs)``: it returns the callable to run
next time with the same arguments, or an object with ``function``, ``args`` and ``kwargs`` (submitit's
``DelayedSubmission``), or None (nothing to save). That call replaces ``call.pkl``, whole or not at all, and the
process exits ``128 + SIGTERM`` as a killed one would: the job's rules resubmit or requeue it (a time limit, a
preemption) and the next execution runs the saved call.
"""

import os
import pickle
import signal
import sys
import traceback
from collections.abc import Mapping
from typing import Any

RANK_VARIABLES = ("DISPATCH_RANK", "RANK", "SLURM_PROCID")


def rank_of(environ: Mapping[str, str]) -> int:
    """This process's rank: the first of DISPATCH_RANK, RANK, SLURM_PROCID that is set, else 0."""
    for name in RANK_VARIABLES:
        value = environ.get(name)
        if value:
            return int(value)
    return 0


def result_name(rank: int) -> str:
    return f"result.{rank}.pkl"


def _dumps(value: Any) -> bytes:
    import cloudpickle  # type: ignore[import-untyped]

    data: bytes = cloudpickle.dumps(value)
    return data


def _write(path: str, data: bytes) -> None:
    """``data`` to ``path`` whole or not at all."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


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


def _on_cessation(call: dict[str, Any], call_dir: str, saves: bool) -> None:
    """Install the checkpoint handlers when the callable has a ``checkpoint`` method (see the module docstring)."""
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
        if saves:
            try:
                state = checkpoint(*call["args"], **call["kwargs"])
                if state is not None:
                    _write(os.path.join(call_dir, "call.pkl"), _dumps(_resumable(call, state)))
                    print(f"dispatch runner: checkpointed on {signal.Signals(signum).name}", file=sys.stderr)
            except Exception:
                traceback.print_exc()
        sys.stderr.flush()
        os._exit(128 + int(signal.SIGTERM))

    for sig in signals:
        signal.signal(sig, handle)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)  # the adapters start a rank with the warning blocked


def run(call_dir: str) -> int:
    """Run the call in ``call_dir`` on this rank; returns the exit status (see the module docstring)."""
    rank = rank_of(os.environ)
    try:
        with open(os.path.join(call_dir, "call.pkl"), "rb") as f:
            call = pickle.load(f)
    except Exception as exc:
        print(f"dispatch runner: cannot read the call in {call_dir}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    writes = rank == 0 or bool(call.get("all_ranks"))
    path = os.path.join(call_dir, result_name(rank))
    if writes and os.path.exists(path):
        os.remove(path)  # an earlier execution's answer is not this one's
    _on_cessation(call, call_dir, rank == 0)
    try:
        value = call["fn"](*call["args"], **call["kwargs"])
    except BaseException as exc:
        if writes:
            _write(path, _failure(exc))
        traceback.print_exc()
        return 1
    if writes:
        try:
            data = _dumps({"ok": True, "value": value})
        except Exception as exc:
            _write(path, _failure(exc))
            traceback.print_exc()
            return 1
        cap = call.get("max_result_bytes")
        size = len(data)
        if cap is not None and size > cap:
            _write(path, _dumps({"ok": False, "too_large": size, "cap": cap}))
            print(f"dispatch runner: the result is {size} bytes pickled, over the cap of {cap}", file=sys.stderr)
            return 1
        _write(path, data)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: run.py CALL_DIR", file=sys.stderr)
        return 2
    return run(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
