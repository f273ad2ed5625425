"""The kept login-node shell answers every script as a shell of its own would, and fails as a transport must."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dispatch.slurm.scripts import PAYLOAD_MIN, Script, parse_output
from dispatch.slurm.transport.base import Result, TransportFailure
from dispatch.slurm.transport.kept import KeptShells
from dispatch.slurm.transport.local import LocalExecutor

SCRIPTS = [
    "echo hi; echo err >&2; exit 3",
    "cat <<'EOF'\nline one\n$HOME stays literal\nEOF\n",
    "trap 'echo bye' EXIT; printf 'no newline'",
    "set -u; x=1; echo $x; false",
    "read -r line || echo 'stdin is empty'",
    "printf '%s\\n' \"$(umask)\"",
]


@pytest.fixture
def ex() -> Iterator[LocalExecutor]:
    executor = LocalExecutor()
    yield executor
    executor.close()


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_kept_shell_answers_as_a_shell_of_its_own(ex: LocalExecutor, script: str) -> None:
    kept = [ex.run(script, 10) for _ in range(2)]  # the second runs in the shell the first left
    assert kept[0] == kept[1] == ex._once(script, 10)


def test_a_script_leaves_nothing_behind_for_the_next(ex: LocalExecutor) -> None:
    mask = ex.run("umask", 10).stdout
    ex.run("leak=1; cd /; export LEAK=2; umask 000", 10)
    assert ex.run('echo "${leak:-}${LEAK:-}"; pwd; umask', 10).stdout == f"\n{os.getcwd()}\n{mask}"


def test_every_script_starts_in_the_callers_directory(ex: LocalExecutor, tmp_path: Path) -> None:
    before = os.getcwd()
    ex.run("true", 10)
    os.chdir(tmp_path)
    try:
        assert ex.run("pwd", 10).stdout.strip() == str(tmp_path)
    finally:
        os.chdir(before)


def test_a_script_past_its_timeout_is_cut_with_what_it_printed_and_the_next_gets_a_fresh_shell(
    ex: LocalExecutor,
) -> None:
    with pytest.raises(TransportFailure) as cut:
        ex.run("echo started; sleep 30", 1)
    assert cut.value.result.stdout == "started\n"
    assert ex.run("echo after", 10).stdout == "after\n"


def test_a_shell_that_died_between_scripts_is_replaced_and_the_script_runs_once(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    pid = int(ex.run("echo $$", 10).stdout)  # in a subshell, $$ is the kept shell
    os.kill(pid, signal.SIGKILL)
    count = tmp_path / "count"
    assert ex.run(f"echo x >> {count}; echo ran", 10).stdout == "ran\n"
    assert count.read_text() == "x\n"


def test_a_script_with_a_payload_runs_in_a_shell_of_its_own(ex: LocalExecutor) -> None:
    s = Script()
    body = "y" * PAYLOAD_MIN
    s.call(["wc", "-c"], stdin=body)
    out = parse_output(s.nonce, ex.run(s.render(), 30).stdout)
    call = out.call(0)
    # a kept shell would have read it from /dev/null: 0 bytes
    assert call is not None and call.ok and call.stdout.strip() == str(PAYLOAD_MIN)


def test_concurrent_callers_share_at_most_the_kept_shells_and_get_their_own_answers(ex: LocalExecutor) -> None:
    answers: dict[int, list[str]] = {}

    def caller(k: int) -> None:
        answers[k] = [ex.run(f"echo {k}-{n}; echo $$ >&2", 10).stdout for n in range(15)]

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == {k: [f"{k}-{n}\n" for n in range(15)] for k in range(4)}
    assert ex._shells._started <= 2


def test_the_kept_shells_files_are_private_and_gone_after_close(tmp_path: Path) -> None:
    ex = LocalExecutor({"TMPDIR": str(tmp_path)})
    s = Script()
    s.call(["sh", "-c", "echo oops >&2"])
    out = parse_output(s.nonce, ex.run(s.render(), 10).stdout)
    assert out.call(0) is not None and out.call(0).stderr == "oops\n"  # type: ignore[union-attr]
    files = list(tmp_path.iterdir())
    assert len(files) == 2 and all(f.stat().st_mode & 0o777 == 0o600 for f in files)
    ex.close()
    assert list(tmp_path.iterdir()) == []


def test_an_executor_dropped_without_close_leaves_no_shell_behind() -> None:
    import gc

    ex = LocalExecutor()
    pid = int(ex.run("echo $$", 10).stdout)
    shells = ex._shells
    del ex
    gc.collect()
    assert shells._started == 0
    with pytest.raises(ProcessLookupError):
        for _ in range(50):  # the shell reads the end of its input and exits
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, 0)


def test_a_process_with_more_than_1024_open_files_still_reads_its_shells(ex: LocalExecutor) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        assert ex.run("echo far", 10).stdout == "far\n"  # the shell's pipes are numbered above 1024
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_shell_that_goes_silent_after_a_script_was_sent_is_never_sent_it_again(tmp_path: Path) -> None:
    """An SSH session whose output is lost after the remote ran the script looks like a shell that answers
    nothing: the script may have run, so the answer is TransportFailure (the outcome unknown), never a second
    run in a shell of its own."""
    handed: list[str] = []

    def once(script: str, timeout: float) -> Result:
        handed.append(script)
        return Result("", "", 0)

    kept = KeptShells(["bash", "-s"], once, keep=1)
    try:
        pid = int(kept.run("echo $$", 10).stdout)  # started, and known to answer
        os.kill(pid, signal.SIGSTOP)  # it goes silent: the next script is sent, and its answer never comes
        with pytest.raises(TransportFailure):
            kept.run(f"echo x >> {tmp_path / 'ran'}", 2)
    finally:
        kept.close()
    assert handed == []


def test_a_timed_out_call_is_killed_with_the_process_group_timeout_made_for_it(ex: LocalExecutor) -> None:
    """GNU ``timeout`` moves itself and its command into a process group of their own; the kill at the
    script's deadline covers the shell's whole session, so the call does not run on past it."""
    s = Script(call_timeout=30)
    marker = f"dispatch-kept-test-{os.getpid()}-{time.monotonic_ns()}"
    s.call(["bash", "-c", f"exec -a {marker} sleep 77"])
    with pytest.raises(TransportFailure):
        ex.run(s.render(), 1)
    deadline = time.monotonic() + 5
    while _running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(marker)


def _running(name: str) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0] == name.encode():
                    return True
    return False


def test_a_script_sent_to_a_shell_that_stopped_reading_keeps_its_deadline() -> None:
    """A script larger than the pipe, sent to a shell that no longer reads (bash stuck on a hung home directory):
    the write waits no longer than the script's timeout, and the script, never read whole, never ran there."""
    handed: list[float] = []
    t0 = time.monotonic()

    def once(script: str, timeout: float) -> Result:
        handed.append(time.monotonic() - t0)
        return Result("ran alone", "", 0)

    answers_then_stops = 'while read -r line; do case $line in printf*) eval "$line"; break;; esac; done; sleep 30'
    kept = KeptShells(["bash", "-c", answers_then_stops], once, keep=1)
    try:
        result = kept.run("true\n" * 200_000, 2)
    finally:
        kept.close()
    assert result.stdout == "ran alone"
    assert len(handed) == 1 and handed[0] < 6, handed


def test_a_kept_shells_own_file_comes_back_private_after_something_removed_it(tmp_path: Path) -> None:
    ex = LocalExecutor(env={**os.environ, "TMPDIR": str(tmp_path)}, keep=1)
    try:
        ex.run("true", 10)
        for f in tmp_path.iterdir():
            f.unlink()  # a /tmp cleaner
        ex.run("echo to-stderr >&2", 10)
        modes = {f.name: f.stat().st_mode & 0o777 for f in tmp_path.iterdir()}
    finally:
        ex.close()
    assert modes and set(modes.values()) == {0o600}, modes
