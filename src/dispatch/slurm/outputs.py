"""Reading a slice of an output file on the cluster: the shell snippet and the parsing of its answer.

The snippet runs once per slice inside one script (so every viewer's slice of a cycle costs one round trip): it
prints ``MISSING`` for a file not written yet, else ``<start> <size>`` on a line and then the bytes from
``start`` (at most the limit) in base64. ``tail -c +N`` seeks in a regular file, so the bytes before the offset
are never read.
"""

from __future__ import annotations

import base64
import binascii

from dispatch.errors import Unavailable
from dispatch.spi import OutputPiece

SLICE = (
    "f=$1 off=$2 lim=$3\n"
    '[ -e "$f" ] || { echo MISSING; exit 0; }\n'
    'size=$(stat -c %s -- "$f") || exit 1\n'
    'if [ "$off" -lt 0 ]; then off=$((size + off)); [ "$off" -ge 0 ] || off=0; fi\n'
    'echo "$off $size"\n'
    'tail -c +"$((off + 1))" -- "$f" | head -c "$lim" | base64 -w0\n'
)
"""``bash -c SLICE _ PATH OFFSET LIMIT``: a negative OFFSET counts from the end."""


def parse_slice(stdout: str, offset: int) -> OutputPiece:
    """The piece :data:`SLICE` printed (``offset`` as asked, for a file not written yet); Unavailable for an
    answer of another shape."""
    head, _, body = stdout.partition("\n")
    if head.strip() == "MISSING":
        return OutputPiece(b"", max(0, offset), 0)
    try:
        start_text, size_text = head.split()
        start, size = int(start_text), int(size_text)
        data = base64.b64decode(body.strip(), validate=True)
    except (ValueError, binascii.Error):
        raise Unavailable(f"reading output: unusable answer {stdout[:100]!r}") from None
    return OutputPiece(data, start, max(size, start + len(data)))
