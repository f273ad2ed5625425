import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.slurm.scripts import Script, parse_output

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


def test_concurrent_calls_run_at_once() -> None:
    import time

    s = Script(width=4)
    for _ in range(4):
        s.call_concurrently(["sleep", "0.5"])
    t0 = time.perf_counter()
    out = parse_output(s.nonce, run(s))
    assert time.perf_counter() - t0 < 1.5 and all(out.calls[i].status == 0 for i in range(4))
