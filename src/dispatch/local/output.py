"""Reading rank output files, whole or followed (the caller's loop, never a background thread)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from dispatch.clock import Clock

CHUNK = 64 * 1024


def read_whole(paths: Sequence[tuple[int, str]]) -> Iterator[tuple[int, bytes]]:
    """Each file in turn, in chunks; a file not written yet reads as empty."""
    for rank, path in paths:
        try:
            with open(path, "rb") as f:
                while chunk := f.read(CHUNK):
                    yield rank, chunk
        except FileNotFoundError:
            continue


def follow(
    paths: Sequence[tuple[int, str]], ended: Callable[[], bool], clock: Clock, poll: float
) -> Iterator[tuple[int, bytes]]:
    """Whole lines from every file as they appear, until ``ended()`` and every file is drained.

    A partial last line is held back until its newline arrives, or given as is once the execution has ended.
    """
    offsets = {rank: 0 for rank, _ in paths}
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
