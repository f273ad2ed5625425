import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.slurm.scripts import PAYLOAD_MIN, Script, parse_output
from dispatch.slurm.transport.local import LocalExecutor

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)


def run(script: Script) -> str:
    return subprocess.run(
        ["bash", "-s"], input=script.render().encode(), capture_output=True, check=True
    ).stdout.decode()


def test_calls_are_framed_with_status() -> None:
    s = Script()
    s.call(["printf", "%s", "no newline"])
    s.shell("echo oops >&2; exit 7")
    out = parse_output(s.nonce, run(s))
    assert out.started
    assert out.calls[0].stdout == "no newline" and out.calls[0].status == 0
    assert out.calls[1].stderr == "oops\n" and out.calls[1].status == 7


def test_deadline_passed_means_not_run() -> None:
    s = Script(deadline=1.0)
    s.call(["touch", "/tmp/should-not-exist-dispatch"])
    out = parse_output(s.nonce, run(s))
    assert out.calls[0].not_run and out.calls[0].status is None


def test_call_timeout_reports_124() -> None:
    s = Script()
    s.call(["sleep", "5"], timeout=1)
    out = parse_output(s.nonce, run(s))
    assert out.calls[0].expired


def test_cut_output_has_no_status() -> None:
    s = Script()
    s.call(["echo", "x"])
    text = run(s)
    cut = text[: text.index(":0:err")]
    out = parse_output(s.nonce, cut)
    assert out.calls[0].status is None


@settings(max_examples=40, deadline=None)
@given(st.lists(_text, min_size=1, max_size=4), _text)
def test_hostile_values_are_quoted_byte_for_byte(args: list[str], stdin: str) -> None:
    s = Script()
    s.call(["printf", "%s\\0", *args])
    s.call(["cat"], stdin=stdin + "\n")
    out = parse_output(s.nonce, run(s))
    assert out.calls[0].stdout.split("\0")[:-1] == args
    assert out.calls[1].stdout == stdin + "\n"


def test_concurrent_calls_report_in_order_each_its_own_answer() -> None:
    s = Script(width=3)
    s.call(["printf", "first"])
    for i in range(7):
        s.call_concurrently(["bash", "-c", f"sleep 0.{7 - i}; printf 'out {i}'; echo 'err {i}' >&2; exit {i}"])
    s.call_concurrently(["cat"], stdin="heredoc body\n")
    s.call(["printf", "last"])
    out = parse_output(s.nonce, run(s))
    assert out.calls[0].stdout == "first" and out.calls[9].stdout == "last"
    for i in range(7):
        c = out.calls[1 + i]
        assert (c.stdout, c.stderr, c.status) == (f"out {i}", f"err {i}\n", i)
    assert out.calls[8].stdout == "heredoc body\n" and out.calls[8].status == 0


def test_concurrent_calls_past_the_deadline_do_not_run() -> None:
    s = Script(deadline=1.0)
    s.call_concurrently(["touch", "/tmp/should-not-exist-dispatch"])
    out = parse_output(s.nonce, run(s))
    assert out.calls[0].not_run and out.calls[0].status is None


def test_concurrent_calls_run_at_once(tmp_path) -> None:
    """A rendezvous, not a stopwatch: each call arrives, then waits (up to 30 s) until all four have arrived,
    which only calls running at the same time can do; run one after another, the first would give up."""
    meet = 'touch "$1/$2"; for _ in $(seq 300); do [ $(ls "$1" | wc -l) -ge 4 ] && exit 0; sleep 0.1; done; exit 7'
    s = Script(width=4)
    for i in range(4):
        s.call_concurrently(["sh", "-c", meet, "meet", str(tmp_path), str(i)])
    out = parse_output(s.nonce, run(s))
    assert [out.calls[i].status for i in range(4)] == [0, 0, 0, 0]


def test_a_large_stdin_travels_as_a_payload_byte_for_byte(tmp_path) -> None:
    """A megabyte with no final newline, bytes that are not UTF-8, and the heredoc terminator in it: the calls
    read exactly it, an ordinary and a concurrent one, and the calls after them run."""
    big = ("line é \udcff END_x \\ $(touch nope) '\n" * 40_000)[:-1]
    assert len(big) > PAYLOAD_MIN
    s = Script()
    s.call(["cat"], stdin=big)
    s.call_concurrently(["wc", "-c"], stdin=big)
    s.call(["printf", "after"])
    script = s.render()
    assert "<<" not in script.split("\n_dsp_call 0", 1)[1].split("\n", 1)[0], "no heredoc for the payload"
    out = parse_output(s.nonce, LocalExecutor().run(script, 120).stdout)  # the local transport, as the backend
    assert out.calls[0].stdout == big and out.calls[0].status == 0
    assert int(out.calls[1].stdout) == len(big.encode("utf-8", "surrogateescape"))
    assert out.calls[2].stdout == "after"


def test_a_script_cut_inside_a_payload_runs_nothing_after_it(tmp_path) -> None:
    s = Script()
    s.call(["touch", str(tmp_path / "before")])
    s.call(["sh", "-c", f"cat >/dev/null; touch {tmp_path / 'fed'}"], stdin="x" * (2 * PAYLOAD_MIN))
    s.call(["touch", str(tmp_path / "after")])
    text = s.render()
    cut = text[: text.index("x" * PAYLOAD_MIN) + 10].encode()
    subprocess.run(["bash", "-s"], input=cut, capture_output=True)
    assert (tmp_path / "before").exists()
    assert not (tmp_path / "fed").exists() and not (tmp_path / "after").exists()


def _parse_by_pattern(nonce: str, stdout: str) -> dict[int, tuple[str, str, int | None, bool]]:
    """The reading :func:`parse_output` must agree with, written with patterns (how it was first written)."""
    import re

    calls: dict[int, tuple[str, str, int | None, bool]] = {}
    for m in re.finditer(rf"(?:^|\n)@@{nonce}:(\d+):out\n", stdout):
        i = int(m.group(1))
        rest = stdout[m.end() :]
        e = rest.find(f"\n@@{nonce}:{i}:err\n")
        if e < 0:
            calls[i] = (rest, "", None, False)
            continue
        after = rest[e + len(f"\n@@{nonce}:{i}:err\n") :]
        shift = 1 if after.startswith("@@") else 0
        s = re.search(rf"\n@@{nonce}:{i}:status:(notrun|\d+)\n", "\n" + after if shift else after)
        if s is None:
            calls[i] = (rest[:e], after, None, False)
        else:
            word = s.group(1)
            err = after[: max(0, s.start() - shift)]
            calls[i] = (rest[:e], err, None if word == "notrun" else int(word), word == "notrun")
    return calls


_frame = st.sampled_from(["out", "err", "status:0", "status:7", "status:notrun", "status:x", "start", "done"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_text, st.tuples(st.integers(0, 2), _frame)), max_size=12))
def test_the_reading_agrees_with_the_patterns_on_any_framing(pieces: list[object]) -> None:
    """Markers in any order, cut anywhere, with text between: both readings give the same calls."""
    nonce = "dsn0123456789abcdef"
    stdout = "".join(
        f"\n@@{nonce}:{p[1]}\n" if isinstance(p, tuple) and p[1] in ("start", "done") else
        f"\n@@{nonce}:{p[0]}:{p[1]}\n" if isinstance(p, tuple) else str(p)
        for p in pieces
    )  # fmt: skip
    got = {i: (c.stdout, c.stderr, c.status, c.not_run) for i, c in parse_output(nonce, stdout).calls.items()}
    assert got == _parse_by_pattern(nonce, stdout)
