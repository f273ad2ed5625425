"""Hold instances encoded as far-future start times (``scontrol update JobId=<id> StartTime=uts<T>``).

``T = HOLD_BASE + k`` where ``k`` is the instance's 32-bit number: instances of the core's form
``h<8 hex digits>`` map exactly (``k`` is the hex value) and read back the same; any other instance maps
through CRC-32 and reads back as ``h<crc>``. ``HOLD_BASE`` is 2100-01-01T00:00:00Z, so every encoded time lies
between 2100 and 2236, beyond any begin time a requeue or a user would set. Slurm echoes the begin time
exactly in the job's ``eligible_time``, which is how a hold is read back.
"""

from __future__ import annotations

import re
import zlib

HOLD_BASE = 4102444800
HOLD_SPAN = 1 << 32
_CANONICAL = re.compile(r"h([0-9a-f]{8})")


def encode_hold(instance: str) -> int:
    m = _CANONICAL.fullmatch(instance)
    k = int(m.group(1), 16) if m else zlib.crc32(instance.encode("utf-8"))
    return HOLD_BASE + k


def decode_hold(eligible_time: float | None) -> str | None:
    """The hold instance a begin time encodes, or None when it encodes none."""
    if eligible_time is None:
        return None
    k = int(eligible_time) - HOLD_BASE
    if 0 <= k < HOLD_SPAN:
        return f"h{k:08x}"
    return None


def same_instance(instance: str, eligible_time: float | None) -> bool:
    return eligible_time is not None and int(eligible_time) == encode_hold(instance)
