"""The local adapter's cessation warning (``dispatch.CessationWarning``): the warning signal reaches every rank
its seconds before the time limit, and before the SIGTERM of a stop; the context variables reach the ranks."""

from __future__ import annotations

import json
import sys
import time

from dispatch.extensions import CessationWarning, SharedCheckpoint
from dispatch.local import LocalBackend
from dispatch.outcome import Cause, State
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

# each rank prints its context, then one line per notice (signal name, seconds since start), and exits 143 on
# SIGTERM the way dispatch.job asks a script to
RANK = (
    "import json, sys, time\n"
    "from dispatch import job\n"
    "t0 = time.time(); c = job.context()\n"
    "print(json.dumps({'rank': c.rank, 'ckpt': c.checkpoint_dir, 'left': c.seconds_left(),"
    " 'sig': c.warning_signal, 'grace': c.warning_grace}), flush=True)\n"
    "job.on_cessation(lambda n: print(n.name, round(n.at - t0, 2), flush=True))\n"
    "while True:\n"
    "    n = job.cessation()\n"
    "    if n is not None and n.terminating:\n"
    "        sys.exit(n.exit_code)\n"
    "    time.sleep(0.02)\n"
)


def _run(b: LocalBackend, spec: JobSpec) -> str:
    sid = b.start(StartRequest("cess", 1, "dsp-cess-1", spec))
    b.open(sid)
    return sid


def _lines(b: LocalBackend, sid: str, rank: int) -> list[str]:
    return b"".join(c for _, c in b.lines(sid, "stdout", ranks=[rank])).decode().splitlines()


def test_warning_before_the_time_limit_then_sigterm(backend: LocalBackend) -> None:
    spec = JobSpec(
        (sys.executable, "-c", RANK),
        nodes=2,
        time_limit=6,
        extensions=(CessationWarning(seconds=2), SharedCheckpoint(path="/tmp/ck")),
    )
    sid = _run(backend, spec)
    ev = backend.wait_ended(sid, 30)
    assert ev.outcome.state is State.FAILED and ev.outcome.cause is Cause.TIMEOUT
    for rank in (0, 1):
        first, warned, term = _lines(backend, sid, rank)
        ctx = json.loads(first)
        assert (ctx["rank"], ctx["ckpt"], ctx["sig"], ctx["grace"]) == (rank, "/tmp/ck", "USR1", 2.0)
        assert 0 < ctx["left"] <= 6
        name, at = warned.split()
        assert name == "SIGUSR1" and float(at) > 0
        name, term_at = term.split()
        assert name == "SIGTERM" and 1.0 <= float(term_at) - float(at) <= 4.0  # 2 s before the limit, or near it


def test_stop_warns_then_terminates_after_the_warning_seconds(backend: LocalBackend) -> None:
    spec = JobSpec((sys.executable, "-c", RANK), extensions=(CessationWarning(seconds=1.5),))
    sid = _run(backend, spec)
    deadline = time.monotonic() + 15
    while len(_lines(backend, sid, 0)) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    t = time.time()
    bound = backend.stop_job(sid)
    assert bound >= 1.5 + backend.grace
    ev = backend.wait_ended(sid, 30)
    assert ev.outcome.state is State.CANCELLED
    _, warned, term = _lines(backend, sid, 0)
    assert warned.split()[0] == "SIGUSR1" and term.split()[0] == "SIGTERM"
    assert float(term.split()[1]) - float(warned.split()[1]) >= 1.4
    assert time.time() - t < bound + 2


def test_without_the_extension_a_stop_is_sigterm_only(backend: LocalBackend) -> None:
    sid = _run(backend, JobSpec((sys.executable, "-c", RANK)))
    deadline = time.monotonic() + 15
    while len(_lines(backend, sid, 0)) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    backend.stop_job(sid)
    backend.wait_ended(sid, 30)
    first, term = _lines(backend, sid, 0)
    assert json.loads(first)["sig"] is None and term.split()[0] == "SIGTERM"


def test_a_warning_before_the_rank_listens_reaches_its_handler_once_installed(backend: LocalBackend) -> None:
    """A stop right after the start warns a rank that has not imported dispatch.job yet: the rank started with
    the warning signal blocked, so it is neither killed by the signal's default action nor loses the warning."""
    late = "import time\nprint('started', flush=True)\ntime.sleep(1.5)\n" + RANK
    sid = _run(backend, JobSpec((sys.executable, "-c", late), extensions=(CessationWarning(seconds=3),)))
    deadline = time.monotonic() + 15
    while len(_lines(backend, sid, 0)) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    backend.stop_job(sid)  # the warning goes out now, while the rank sleeps before it listens
    ev = backend.wait_ended(sid, 30)
    assert ev.outcome.state is State.CANCELLED
    lines = _lines(backend, sid, 0)
    assert len(lines) == 4 and lines[0] == "started", lines
    warned, term = lines[2].split(), lines[3].split()
    assert warned[0] == "SIGUSR1" and float(warned[1]) < 0.5, warned  # delivered as the handler was installed
    assert term[0] == "SIGTERM", term
