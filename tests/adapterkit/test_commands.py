import shlex
import sys
from pathlib import Path

import pytest

from dispatch.adapterkit import CommandRunner
from dispatch.errors import OutcomeUnknown, Unavailable

PY = sys.executable


def test_an_answer_is_returned_whatever_its_status() -> None:
    r = CommandRunner(timeout=10).read(
        [PY, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"]
    )
    assert (r.returncode, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)


def test_stdin_and_arguments_travel_verbatim() -> None:
    odd = "a b; $(rm -rf /) 'q' \"d\" \n"
    r = CommandRunner(timeout=10).write(
        [PY, "-c", "import sys; print(repr(sys.argv[1])); print(sys.stdin.read(), end='')", odd], stdin="line\n"
    )
    assert r.stdout == f"{odd!r}\nline\n"


def test_a_read_that_times_out_is_unavailable() -> None:
    with pytest.raises(Unavailable, match="did not answer"):
        CommandRunner(timeout=0.3).read([PY, "-c", "import time; time.sleep(5)"])


def test_a_write_that_times_out_is_outcome_unknown() -> None:
    with pytest.raises(OutcomeUnknown, match="may have acted"):
        CommandRunner(timeout=0.3).write([PY, "-c", "import time; time.sleep(5)"])


@pytest.mark.parametrize("write", [False, True])
def test_a_command_that_cannot_start_is_unavailable_even_for_a_write(write: bool) -> None:
    runner = CommandRunner(timeout=5)
    with pytest.raises(Unavailable, match="could not be run"):
        (runner.write if write else runner.read)(["/nonexistent/qsub"])


def test_a_prefix_gets_one_quoted_word() -> None:
    runner = CommandRunner(prefix=("ssh", "login1"))
    assert runner.argv_for(["qstat", "-u", "a b;c"]) == ["ssh", "login1", "qstat -u 'a b;c'"]


def test_through_a_shell_prefix_the_words_arrive_intact() -> None:
    odd = "x; echo pwned $HOME"
    r = CommandRunner(timeout=10, prefix=("bash", "-c")).read([PY, "-c", "import sys; print(sys.argv[1])", odd])
    assert r.stdout == odd + "\n"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        CommandRunner(timeout=0)
    with pytest.raises(ValueError):
        CommandRunner().argv_for([])


def fake_ssh(tmp_path: Path, stderr: str) -> str:
    """An ``ssh`` that fails as OpenSSH does (exit 255) with ``stderr``."""
    path = tmp_path / "ssh"
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' {shlex.quote(stderr)} >&2\nexit 255\n")
    path.chmod(0o755)
    return str(path)


def test_a_refused_connection_is_unavailable_even_for_a_write() -> None:
    """Real OpenSSH to a port nobody listens on: nothing ran, so a write is Unavailable, not OutcomeUnknown."""
    runner = CommandRunner(prefix=("ssh", "-p", "1", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "127.0.0.1"))
    with pytest.raises(Unavailable, match="before qsub could run.*Connection refused"):
        runner.write(["qsub", "job.sh"])


@pytest.mark.parametrize(
    "said",
    [
        "Permission denied (publickey,password).",
        "Host key verification failed.",
        "ssh: Could not resolve hostname login9: Name or service not known",
    ],
)
def test_a_session_ssh_never_had_is_unavailable(tmp_path: Path, said: str) -> None:
    runner = CommandRunner(prefix=(fake_ssh(tmp_path, said), "login1"))
    with pytest.raises(Unavailable):
        runner.write(["qhold", "42"])


@pytest.mark.parametrize(
    "said",
    [
        "Connection to login1 closed by remote host.",
        "client_loop: send disconnect: Broken pipe",
        "qsub: Connection refused",  # the remote command's own words, not ssh's: it may have acted
    ],
)
def test_a_session_lost_while_a_write_ran_is_outcome_unknown(tmp_path: Path, said: str) -> None:
    runner = CommandRunner(prefix=(fake_ssh(tmp_path, said), "login1"))
    with pytest.raises(OutcomeUnknown, match="may have acted"):
        runner.write(["qsub", "job.sh"])
    with pytest.raises(Unavailable):
        runner.read(["qstat"])


def test_a_remote_command_exiting_255_reads_as_sshs_own_failure(tmp_path: Path) -> None:
    """An ``ssh`` that runs the command as OpenSSH does (through a shell) and passes its status on: 255 from the
    command itself cannot be told from ssh's own failure (docs/spi.md says so)."""
    path = tmp_path / "ssh"
    path.write_text('#!/bin/sh\nshift\nexec sh -c "$1"\n')
    path.chmod(0o755)
    runner = CommandRunner(prefix=(str(path), "login1"))
    assert runner.write(["sh", "-c", "exit 254"]).returncode == 254
    with pytest.raises(OutcomeUnknown, match="may have acted"):
        runner.write(["sh", "-c", "exit 255"])
    with pytest.raises(Unavailable, match="ssh failed"):
        runner.read(["sh", "-c", "exit 255"])
