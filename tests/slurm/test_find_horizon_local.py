"""find with a zero horizon on the real 22.05 cluster: sacct refuses a start time before the epoch, so the
adapter clamps it (the core conformance suite calls find(marker, 0.0))."""

import secrets

import pytest

from dispatch.actions import marker_for
from dispatch.spec import JobSpec
from dispatch.spi import StartRequest

from .clusters import admin, open_backend

pytestmark = pytest.mark.slurm_local


def test_find_since_the_epoch() -> None:
    backend = open_backend("local")
    job = secrets.token_hex(6)
    sid = backend.start(StartRequest(job, 1, marker_for(job, 1), JobSpec(("sleep", "60"))))
    try:
        assert [f.scheduler_id for f in backend.find(marker_for(job, 1), 0.0)] == [sid]
    finally:
        admin("local", "scancel", sid, check=False)
        backend.close()
