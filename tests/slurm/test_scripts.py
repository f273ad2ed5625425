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
