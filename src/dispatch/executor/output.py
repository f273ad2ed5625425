"""A call's output as the cluster keeps it: what ``future.stdout()`` and ``future.stderr()`` read.

The same reads as ``dispatch logs``: the adapter's :class:`~dispatch.spi.OutputSlices` where it has them (rank
0's own file where the scheduler keeps one per rank, the execution's one file otherwise), else its
:class:`~dispatch.spi.OutputReader`.
"""

from __future__ import annotations

from typing import Any

from dispatch.errors import DispatchError, NotFound, Unsupported
from dispatch.records.model import JobRecord
from dispatch.spi import OutputReader, OutputSlice, OutputSlices

STREAMS = ("stdout", "stderr")


def rank0_output(backend: Any, job: JobRecord, stream: str) -> str | None:
    """Rank 0's ``stream`` of ``job``'s current execution (of its latest submission), decoded as UTF-8 with
    errors replaced; None while there is none to read (the job is not created yet, or not started: NotFound).
    Unsupported when the adapter reads no output (or not this stream); the adapter's other errors as it raises
    them (Unavailable: the cluster did not answer)."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be stdout or stderr, not {stream!r}")
    sub = job.current
    if sub is None or sub.scheduler_id is None:
        return None
    backend = getattr(backend, "unrestricted", backend)
    try:
        data = _read(backend, sub.scheduler_id, stream)
    except NotFound:
        return None
    return data.decode("utf-8", "replace")


def _read(backend: Any, scheduler_id: str, stream: str) -> bytes:
    if isinstance(backend, OutputSlices):
        rank = 0 if backend.output_per_rank() else None
        data = bytearray()
        while True:
            piece = backend.read_slices([OutputSlice(scheduler_id, stream, None, rank, len(data))])[0]
            if isinstance(piece, DispatchError):
                raise piece
            data += piece.data
            if not piece.data or piece.start + len(piece.data) >= piece.size:
                return bytes(data)
    if isinstance(backend, OutputReader):
        read = backend.stderr if stream == "stderr" else backend.stdout
        return b"".join(read(scheduler_id, None, False))
    raise Unsupported(f"the {backend.name} adapter cannot read output (capability OutputRead)")
