"""Argument checks at the API boundary: one wording for "must be an integer / a number in a range"."""

from __future__ import annotations

import math

__all__ = ["check_int", "check_number"]


def check_int(name: str, value: object, *, low: int) -> int:
    """``value`` if it is an int (not a bool) of at least ``low``; else ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


def check_number(name: str, value: object, *, low: float, high: float) -> float:
    """``value`` as a float if it is a finite number (not a bool) in ``[low, high]``; else ``ValueError``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low <= value <= high
    ):
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    return float(value)
