"""dispatch.job.progress on Kubeflow (dispatch.trainerstatus): rank 0 alone posts, and a status server that does
not answer never reaches the training loop (one warning, no exception). The way through a real HTTPS status
server into the TrainJob is tests/kubeflow/test_stall.py."""

from __future__ import annotations

import socket
import warnings
from collections.abc import Iterator

import pytest

from dispatch import job
from dispatch.trainerstatus import Sender


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the block ends: nothing listens there


@pytest.fixture
def kubeflow_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("DISPATCH_PROGRESS_DIR", "RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    url = f"http://127.0.0.1:{_closed_port()}/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status"
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", url)
    monkeypatch.setenv("DISPATCH_PROGRESS_INTERVAL", "0")
    job.reset_for_tests()
    yield url
    job.reset_for_tests()


def test_only_rank_0_posts(kubeflow_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPATCH_RANK", "1")
    assert job.progress(5, total=10) is False


def test_a_status_server_that_does_not_answer_warns_once_and_never_raises(kubeflow_env: str) -> None:
    sender = Sender(kubeflow_env, None, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(3):
            sender.offer({"rank": 0, "step": step, "total": 10, "at": 1_800_000_000.0 + step})
            assert sender.flush(120.0), "the report was never handed over"
    assert sender.sent == 0
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1 and "status server" in said[0] and kubeflow_env in said[0], said


def test_rank_0_queues_its_report_for_the_status_server(kubeflow_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISPATCH_RANK", "0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nothing listens: the post fails, the call does not
        assert job.progress(5, total=10, loss=0.5) is True
        assert job._PROGRESS.sender.flush(120.0)  # handed over (and refused) before the filter goes
        with pytest.raises(TypeError, match="step must be an int"):
            job.progress("5")  # type: ignore[arg-type]
