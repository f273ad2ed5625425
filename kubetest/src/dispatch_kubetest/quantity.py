"""Kubernetes resource quantities ("500m", "4", "16Gi") as floats, for quota arithmetic."""

from __future__ import annotations

import re

_SUFFIX = {
    "": 1.0,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_RE = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")


def parse_quantity(value: str | int | float) -> float:
    """Parse a quantity; raises ValueError on malformed input."""
    if isinstance(value, int | float):
        return float(value)
    m = _RE.match(value.strip())
    if not m:
        raise ValueError(f"invalid quantity {value!r}")
    number, suffix = m.groups()
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return float(number + suffix)
    if suffix not in _SUFFIX:
        raise ValueError(f"invalid quantity suffix {suffix!r}")
    return float(number) * _SUFFIX[suffix]


def format_quantity(value: float) -> str:
    """Integers print plainly; fractions in milli-units (what Kueue's resourceUsage shows)."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"
