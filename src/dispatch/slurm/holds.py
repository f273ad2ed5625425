"""Hold instances encoded as far-future start times (``scontrol update JobId=<id> StartTime=uts<T>``).

``T = HOLD_BASE + k`` where ``k`` is the instance's 32-bit number in the kit's encoding
(:mod:`dispatch.adapterkit.holds`): instances of the core's form ``h<8 hex digits>`` map exactly and read back
the same; any other instance maps through CRC-32 and reads back as ``h<crc>``. ``HOLD_BASE`` is
2100-01-01T00:00:00Z, so every encoded time lies between 2100 and 2236, beyond any begin time a requeue or a
user would set. Slurm echoes the begin time exactly in the job's ``eligible_time``, which is how a hold is read
back.
"""

from __future__ import annotations

from dispatch.adapterkit.holds import HOLD_SPAN, decode_instance, encode_instance

HOLD_BASE = 4102444800


def encode_hold(instance: str) -> int:
    """The begin time that stands for ``instance`` (:func:`dispatch.adapterkit.encode_instance` past 2100)."""
    return HOLD_BASE + encode_instance(instance)


def decode_hold(eligible_time: float | None) -> str | None:
    """The hold instance a begin time encodes, or None when it encodes none."""
    if eligible_time is None:
        return None
    return decode_instance(int(eligible_time) - HOLD_BASE)


def same_instance(instance: str, eligible_time: float | None) -> bool:
    return eligible_time is not None and int(eligible_time) == encode_hold(instance)


__all__ = ["HOLD_BASE", "HOLD_SPAN", "decode_hold", "encode_hold", "same_instance"]
