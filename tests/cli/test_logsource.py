"""How ``dispatch logs`` names an execution (``--submission``, ``--execution``) and when it reads the archive."""

from __future__ import annotations

import pytest

from dispatch import JobSpec
from dispatch.cli import logsource
from dispatch.errors import NotFound, SpecError
from dispatch.outcome import Cause, Evidence, Outcome, State
from dispatch.records import ExecutionRecord, JobRecord, MemoryRecords, Submission
from dispatch.records.archive import ArchivedOutput, ArchiveStatus

EV = Evidence("test", 1.0)
ENDED = Outcome(State.FAILED, Cause.PREEMPTED, EV)
RUNNING = Outcome(State.RUNNING, None, EV)


def job() -> JobRecord:
    """Submission 1 ran twice at restart 0 (a Kueue readmission: attempts 1 and 2); submission 2 runs."""
    s1 = Submission(1, "m1", 1.0, scheduler_id="tj-1")
    s1.executions = [ExecutionRecord("j.1.1.0.0", 0, ENDED), ExecutionRecord("j.1.2.0.0", 0, ENDED)]
    s2 = Submission(2, "m2", 2.0, scheduler_id="tj-2")
    s2.executions = [ExecutionRecord("j.2.1.0.0", 0, RUNNING)]
    return JobRecord("j", "kf", JobSpec(("x",)), 1.0, submissions=[s1, s2])


def test_default_is_the_current_submissions_latest_execution_read_live() -> None:
    t = logsource.target(job(), None, None)
    assert (t.submission.n, t.execution and t.execution.identity, t.restart, t.latest) == (2, "j.2.1.0.0", None, True)
    t = logsource.target(job(), 1, None)
    assert (t.submission.n, t.execution and t.execution.identity, t.latest) == (1, "j.1.2.0.0", True)


def test_an_identity_picks_its_submission_and_an_earlier_one_is_not_latest() -> None:
    t = logsource.target(job(), None, "j.1.1.0.0")
    assert (t.submission.n, t.restart, t.latest) == (1, 0, False)
    assert t.name("j") == "execution j.1.1.0.0 of job j"
    with pytest.raises(SpecError, match="is an execution of submission 1, not 2"):
        logsource.target(job(), 2, "j.1.1.0.0")


def test_a_restart_number_naming_several_executions_is_refused_with_their_identities() -> None:
    with pytest.raises(SpecError, match=r"restart 0 names several executions of submission 1 \(j.1.1.0.0, j.1.2.0.0\)"):
        logsource.target(job(), 1, "0")
    t = logsource.target(job(), None, "0")
    assert t.execution is not None and t.execution.identity == "j.2.1.0.0" and t.latest
    t = logsource.target(job(), None, "3")
    assert (t.execution, t.restart, t.latest) == (None, 3, False)


def test_bad_names_are_refused() -> None:
    with pytest.raises(SpecError, match="neither a restart number nor an execution identity of job j"):
        logsource.target(job(), None, "latest")
    with pytest.raises(NotFound, match="no submission 7"):
        logsource.target(job(), 7, None)


def test_what_the_archive_can_show_and_the_errors_naming_the_execution() -> None:
    records = MemoryRecords()
    t = logsource.target(job(), None, "j.1.1.0.0")
    assert logsource.archived(records, "j", t) is None
    assert logsource.archived(object(), "j", t) is None  # a store without an archive
    with pytest.raises(NotFound, match="execution j.1.1.0.0 of job j: .*no supervisor archived it"):
        logsource.from_archive(None, t.name("j"), False, ())
    gone = ArchivedOutput("j", "j.1.1.0.0", 1, 0, ArchiveStatus.GONE, 5.0, reason="the pod was deleted")
    records.put_output(gone)
    entry = logsource.archived(records, "j", t)
    with pytest.raises(NotFound, match="the archive says gone: the pod was deleted"):
        logsource.from_archive(entry, t.name("j"), False, ())
    kept = ArchivedOutput("j", "j.1.2.0.0", 1, 0, ArchiveStatus.KEPT, 5.0, data=b"hi\n", size=3)
    records.put_output(kept)
    entry = logsource.archived(records, "j", logsource.target(job(), 1, None))
    assert logsource.from_archive(entry, "x", False, (0,)).data == b"hi\n"
    with pytest.raises(NotFound, match="holds rank 0's stdout only"):
        logsource.from_archive(entry, "x", True, ())
    with pytest.raises(NotFound, match="holds rank 0's stdout only"):
        logsource.from_archive(entry, "x", False, (1,))


def test_primed_surfaces_a_lazy_readers_error_at_once() -> None:
    def lazy() -> object:
        raise NotFound("pod gone")
        yield b""  # pragma: no cover

    with pytest.raises(NotFound, match="pod gone"):
        logsource.primed(lazy())  # type: ignore[arg-type]
    assert list(logsource.primed(iter([1, 2]))) == [1, 2]
    assert list(logsource.primed(iter([]))) == []
