"""Following a long log through the dashboard reads the new bytes only: a 50 MB log followed for several
polls is read once at most (its last 256 KiB, then what was appended), counted at the local adapter's file
reads. On old code each poll re-read the whole file."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import dispatch
from dispatch.cli.observe import refresh
from dispatch.local import output
from dispatch.records import SQLiteRecords
from dispatch.spec import JobSpec
from dispatch.spi import OutputPiece, OutputSlice, OutputSlices
from dispatch.ui.app import OUTPUT_TAIL, create_app
from dispatch.ui.source import Source

SIZE = 50 * 1024 * 1024
WRITER = (
    "import os, sys, time\n"
    "line = b'x' * 1023 + b'\\n'\n"
    "for _ in range(int(sys.argv[1]) // 1024):\n"
    "    sys.stdout.buffer.write(line)\n"
    "sys.stdout.buffer.flush()\n"
    "k = 0\n"
    "while not os.path.exists(sys.argv[2]):\n"  # one numbered line a tenth of a second until told to stop
    "    print(f'more {k}', flush=True)\n"
    "    k += 1\n"
    "    time.sleep(0.1)\n"
)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Source, str, Path]]:
    """A local job that wrote 50 MB and goes on writing a line at a time, recorded as running; the Source."""
    path, state, stop = tmp_path / "records.db", tmp_path / "local", tmp_path / "stop"
    records = SQLiteRecords(path)
    cfg = dispatch.Config(adapter={"stateDir": str(state)}, records=records, name="local")
    cluster = dispatch.open("local", cfg)
    backend = cluster.backend
    assert isinstance(backend, OutputSlices)
    job_id = cluster.submit(JobSpec((sys.executable, "-c", WRITER, str(SIZE), str(stop)), name="long-log"))
    try:
        deadline = time.monotonic() + 180  # writing 50 MB on a machine loaded by other work
        while True:
            (job,) = refresh(records, cluster.backend, [records.get(job_id)], time.time())
            sid = job.submissions[-1].scheduler_id
            if job.state.value == "running" and sid is not None:
                (piece,) = backend.read_slices([OutputSlice(sid, rank=0, offset=-1)])
                if isinstance(piece, OutputPiece) and piece.size > SIZE:
                    break
            assert time.monotonic() < deadline, job.state
            time.sleep(0.2)

        def open_cluster(name: str) -> dispatch.Cluster:
            return dispatch.open("local", dispatch.Config(adapter={"stateDir": str(state)}, read_only=True, name=name))

        source = Source(SQLiteRecords(path, read_only=True), open_cluster, str(path))
        yield source, job_id, stop
        source.close()
    finally:
        stop.touch()
        cluster.backend.wait_ended(records.get(job_id).submissions[-1].scheduler_id or "", 30)  # type: ignore[attr-defined]
        cluster.close()
        records.close()


def test_following_a_50_mb_log_reads_it_once_not_once_a_poll(
    running: tuple[Source, str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    source, job_id, _ = running
    reads: list[int] = []
    real = output.read_slice

    def counted(path: str, offset: int, limit: int) -> tuple[bytes, int, int]:
        data, start, size = real(path, offset, limit)
        reads.append(len(data))
        return data, start, size

    monkeypatch.setattr(output, "read_slice", counted)
    source.rounds.interval = 0.2
    polls = 0
    with TestClient(create_app(source), base_url="http://127.0.0.1") as client:
        url = f"/jobs/{job_id}/output"
        first = client.get(url, params={"submission": 1, "execution": 0, "rank": 0}).json()
        assert first["running"] and first["skipped"] >= SIZE - OUTPUT_TAIL
        assert len(first["text"]) == OUTPUT_TAIL - (first["offset"] - first["skipped"] - len(first["text"]))
        text, offset, polls = first["text"], first["offset"], 1
        deadline = time.monotonic() + 120
        # at least 8 polls, and on until two appended lines came (a loaded machine may pause the writer)
        while polls < 8 or text.count("\nmore ") < 2:
            assert time.monotonic() < deadline, f"{polls} polls, no appended lines read"
            got = client.get(url, params={"submission": 1, "execution": 0, "rank": 0, "offset": offset}).json()
            polls += 1
            assert got["skipped"] == 0
            text += got["text"]
            offset = got["offset"]
    assert len(reads) == polls
    more = [line for line in text.splitlines() if line.startswith("more ")]
    assert more and more == [f"more {k}" for k in range(int(more[0].split()[1]), int(more[0].split()[1]) + len(more))]
    # read: the last 256 KiB once, then only the lines appended since; never the 50 MB again
    assert sum(reads) == offset - first["skipped"] <= OUTPUT_TAIL + 64 * 1024
    assert sum(reads) < SIZE / 100
