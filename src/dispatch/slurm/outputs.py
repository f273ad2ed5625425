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
from dispatch.slurm.trust import TRUSTED
from dispatch.spi import OutputPiece

UNTRUSTED = "UNTRUSTED"
"""What :data:`SLICE` and :data:`WHOLE` print for a file that is not the user's alone (never read)."""
UNTRUSTED_WHY = "it is not a file of yours alone (a symbolic link, another user's file, or writable by others)"
_CHECK = '[ -f "$f" ] && _dsp_trusted "$f" || { echo UNTRUSTED; exit 0; }\n'

SLICE = (
    "f=$1 off=$2 lim=$3\n"
    '[ -e "$f" ] || [ -L "$f" ] || { echo MISSING; exit 0; }\n'
    '[ -f "$f" ] && [ ! -L "$f" ] || { echo UNTRUSTED; exit 0; }\n'
    'read -r size mode uid <<<"$(stat -c "%s %a %u" -- "$f")"; [ -n "$size" ] || exit 1\n'
    'case "$uid:$mode" in "$EUID":*[2367]?|"$EUID":*[2367]) echo UNTRUSTED; exit 0;; "$EUID":*) ;;\n'
    '  *) echo UNTRUSTED; exit 0;; esac\n'
    'if [ "$off" -lt 0 ]; then off=$((size + off)); [ "$off" -ge 0 ] || off=0; fi\n'
    'echo "$off $size"\n'
    'tail -c +"$((off + 1))" -- "$f" | head -c "$lim" | base64 -w0\n'
)  # fmt: skip
"""``bash -c SLICE _ PATH OFFSET LIMIT``: a negative OFFSET counts from the end; ``UNTRUSTED`` for a file that is
not the user's alone (:mod:`dispatch.slurm.trust`: one ``stat`` gives the size, mode and owner)."""
WHOLE = TRUSTED + (
    'f=$1\n[ -e "$f" ] || [ -L "$f" ] || { echo MISSING; exit 0; }\n' + _CHECK + 'tail -c +"$2" -- "$f" | base64 -w0\n'
)
"""``bash -c WHOLE _ PATH START``: the file from byte START (1-based) in base64, ``MISSING`` or ``UNTRUSTED``."""


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
