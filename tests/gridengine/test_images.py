"""Container images on the real Grid Engine cell: it has no Apptainer, so ContainerImage is probed no naming what is
missing, and a job with a ``dispatch.Image`` is refused before anything is recorded or submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

import dispatch
from dispatch.capabilities import Answer, Capability, Provenance
from dispatch.errors import Unsupported
from dispatch.extensions import Image
from dispatch.gridengine import GridEngineBackend, GridEngineSettings
from dispatch.records import MemoryRecords
from dispatch.spec import JobSpec

from .cell import description


@pytest.mark.gridengine
def test_the_cell_answers_no_container_runtime_and_an_image_job_is_refused_recording_nothing(tmp_path: Path) -> None:
    d = description()
    settings = GridEngineSettings(
        sge_root=d["sge_root"],
        sge_cell=d["sge_cell"],
        queue=d["queue"],
        state_dir=str(tmp_path / "s"),
        output_dir=str(tmp_path / "o"),
    )
    records = MemoryRecords()
    cluster = dispatch.Cluster(
        "ge", GridEngineBackend(settings, dispatch.SystemClock()), records, dispatch.SystemClock()
    )
    try:
        answer = cluster.capabilities()[Capability.CONTAINER_IMAGE]
        assert (answer.answer, answer.provenance) == (Answer.NO, Provenance.PROBED)
        assert answer.reason == "apptainer is not found in PATH on the submit host"
        with pytest.raises(Unsupported) as err:
            cluster.submit(JobSpec(("true",), extensions=(Image("/images/busybox.sif"),)))
        assert str(err.value) == f"the dispatch.Image extension needs ContainerImage, which is no here: {answer.reason}"
        assert records.jobs(active_only=False) == []
    finally:
        cluster.close()
