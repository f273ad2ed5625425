"""Reading a slice of an output file on the cluster: the shell snippet and the parsing of its answer.

The snippet runs once per slice inside one script (so every viewer's slice of a cycle costs one round trip): it
prints ``MISSING`` for a file not written yet, else ``<start> <size>`` on a line and then the bytes from
``start`` (at most the limit) in base64. ``tail -c +N`` seeks in a regular file, so the bytes before the offset
are never read.
"""

from __future__ import annotations

import base64
import binascii

from dispatch.adapterkit.programs import program
from dispatch.errors import Unavailable
from dispatch.slurm.trust import TRUSTED
from dispatch.spi import OutputPiece

UNTRUSTED = "UNTRUSTED"
"""What :data:`SLICE` and :data:`WHOLE` print for a file that is not the user's alone (never read)."""
UNTRUSTED_WHY = "it is not a file of yours alone (a symbolic link, another user's file, or writable by others)"

SLICE = program("dispatch.slurm", "slice.sh")
"""``programs/slice.sh``, ``bash -c SLICE _ PATH OFFSET LIMIT``: a negative OFFSET counts from the end; ``UNTRUSTED``
for a file that is not the user's alone (:mod:`dispatch.slurm.trust`: one ``stat`` gives the size, mode and
owner)."""
WHOLE = TRUSTED + program("dispatch.slurm", "whole.sh")
"""``programs/whole.sh``, ``bash -c WHOLE _ PATH START``: the file from byte START (1-based) in base64, ``MISSING``
or ``UNTRUSTED``."""


def parse_slice(stdout: str, offset: int) -> OutputPiece:
    """The piece :data:`SLICE` printed (``offset`` as asked, for a file not written yet); Unavailable for an
    answer of another shape."""
    head, _, body = stdout.partition("\n")
    if head.strip() == "MISSING":
        return OutputPiece(b"", max(0, offset), 0)
    if head.strip() == UNTRUSTED:
        raise Unavailable(f"reading output: not read: {UNTRUSTED_WHY}")
    try:
        start_text, size_text = head.split()
        start, size = int(start_text), int(size_text)
        data = base64.b64decode(body.strip(), validate=True)
    except (ValueError, binascii.Error):
        raise Unavailable(f"reading output: unusable answer {stdout[:100]!r}") from None
    return OutputPiece(data, start, max(size, start + len(data)))
