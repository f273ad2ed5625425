"""Reading rank output files: whole, from an offset, a slice, or followed (the caller's loop, never a background
thread)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from dispatch.clock import Clock

CHUNK = 64 * 1024


def read_whole(paths: Sequence[tuple[int, str]], offset: int = 0) -> Iterator[tuple[int, bytes]]:
    """Each file in turn, in chunks, less the first ``offset`` bytes of them all (seeked over, not read); a file
    not written yet reads as empty."""
    for rank, path in paths:
        try:
            with open(path, "rb") as f:
                if offset:
                    size = os.fstat(f.fileno()).st_size
                    skip = min(offset, size)
                    offset -= skip
                    f.seek(skip)
                while chunk := f.read(CHUNK):
                    yield rank, chunk
        except FileNotFoundError:
            continue


def read_slice(path: str, offset: int, limit: int) -> tuple[bytes, int, int]:
    """At most ``limit`` bytes of the file from byte ``offset`` (negative: from the end), as ``(data, start,
    size)``; the bytes before ``start`` are seeked over, never read. A file not written yet reads as empty."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            start = max(0, size + offset) if offset < 0 else offset
            f.seek(start)
            data = f.read(limit)
    except FileNotFoundError:
        return b"", max(0, offset), 0
    return data, start, max(size, start + len(data))


def follow(
    paths: Sequence[tuple[int, str]], ended: Callable[[], bool], clock: Clock, poll: float, offset: int = 0
) -> Iterator[tuple[int, bytes]]:
    """Whole lines from every file as they appear (each from byte ``offset``), until ``ended()`` and every file
    is drained.

    A partial last line is held back until its newline arrives, or given as is once the execution has ended.
    """
    offsets = {rank: offset for rank, _ in paths}
    partial = {rank: b"" for rank, _ in paths}
    while True:
        done = ended()  # read before draining, so nothing written before the end is missed
        progressed = False
        for rank, path in paths:
            try:
                with open(path, "rb") as f:
                    f.seek(offsets[rank])
                    data = f.read()
            except FileNotFoundError:
                continue
            if not data:
                continue
            progressed = True
            offsets[rank] += len(data)
            buf = partial[rank] + data
            cut = buf.rfind(b"\n") + 1
            if cut:
                yield rank, buf[:cut]
            partial[rank] = buf[cut:]
        if done and not progressed:
            for rank, rest in partial.items():
                if rest:
                    yield rank, rest
            return
        if not progressed:
            clock.sleep(poll)
