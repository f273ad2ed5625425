import pytest

from dispatch.errors import NotFound, OutcomeUnknown, Rejected, Unavailable
from dispatch.slurm.errors import classify, error_for

ROWS = [
    ("slurm_load_jobs error: Invalid job id specified", False, NotFound),
    ("Invalid job id specified for job 9", True, NotFound),
    ("Job is no longer pending execution for job 5", True, Rejected),
    ("Job has already finished for job 3", True, Rejected),
    ("Job is pending execution for job 2", True, Rejected),
    ("Requested operation is presently disabled for job 4", True, Rejected),
    ("Access/permission denied for job 1", True, Rejected),
    ("sbatch: error: Batch job submission failed: Invalid partition name specified", True, Rejected),
    (
        "sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
        True,
        Rejected,
    ),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available", True, Rejected),
    ("Unable to contact slurm controller (connect failure)", False, Unavailable),
    ("Unable to contact slurm controller (connect failure)", True, OutcomeUnknown),
    ("Socket timed out on send/recv operation", True, OutcomeUnknown),
    ("Job can not be altered now, try again later", True, Unavailable),
    ("Protocol authentication error", True, Unavailable),
]


@pytest.mark.parametrize(("stderr", "write", "cls"), ROWS)
def test_error_table(stderr: str, write: bool, cls: type) -> None:
    assert classify(stderr, write=write, status=1) is cls


def test_expired_write_is_unknown_read_is_unavailable() -> None:
    assert classify("", write=True, status=124) is OutcomeUnknown
    assert classify("", write=False, status=124) is Unavailable


def test_a_command_prefix_is_said_once() -> None:
    err = error_for(
        "sbatch", "sbatch: error: Batch job submission failed: Invalid partition name specified\n", write=True, status=1
    )
    assert isinstance(err, Rejected)
    assert str(err) == "sbatch: Batch job submission failed: Invalid partition name specified"
    other = error_for("open 5", "scontrol: error: Invalid job id specified", write=True, status=1)
    assert str(other) == "open 5: scontrol: error: Invalid job id specified"
