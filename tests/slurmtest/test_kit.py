import json

import pytest

from dispatch.slurm.scripts import Script, parse_output
from dispatch.slurmtest import (
    NONCE,
    RELEASES,
    Call,
    Exchange,
    Job,
    TranscriptExecutor,
    UnexpectedScript,
    call_status,
    normalize,
    not_run,
    ok,
    sacct_json,
    squeue_json,
    wrapped,
)


def test_replays_in_order_and_substitutes_the_nonce() -> None:
    s = Script()
    s.call(["squeue", "--json"])
    ex = TranscriptExecutor([Exchange("squeue --json", wrapped(ok("{}")))])
    res = ex.run(s.render(), 10)
    out = parse_output(s.nonce, res.stdout)
    assert out.calls[0].stdout == "{}"
    ex.assert_done()
    with pytest.raises(UnexpectedScript):
        ex.run(s.render(), 10)


def test_unexpected_script_names_the_key() -> None:
    ex = TranscriptExecutor([Exchange("scancel", wrapped(ok()))])
    with pytest.raises(UnexpectedScript, match="scancel"):
        ex.run("squeue", 1)
    with pytest.raises(UnexpectedScript):
        ex.assert_done()


def test_normalize_replaces_nonces() -> None:
    s = Script()
    assert s.nonce not in normalize(s.render()) and NONCE in normalize(s.render())


def test_status_lines_and_not_run() -> None:
    assert call_status(2, Call(status=124)) == f"\n@@{NONCE}:2:status:124\n"
    res = wrapped(not_run())
    out = parse_output(NONCE, res.stdout)
    assert out.calls[0].not_run


@pytest.mark.parametrize("release", RELEASES)
def test_renderers_name_their_release(release: str) -> None:
    doc = json.loads(squeue_json(release, Job(1)))
    meta = doc["meta"]
    assert (meta.get("slurm") or meta.get("Slurm"))["release"] == release
    assert json.loads(sacct_json(release, Job(1)))["jobs"][0]["job_id"] == 1
