"""Argument checks at the API boundary: one wording for "must be an integer / a number in a range"."""

from __future__ import annotations

import math
import os

__all__ = [
    "check_bool",
    "check_has",
    "check_int",
    "check_number",
    "check_path",
    "check_port",
    "check_seconds",
    "check_str",
    "expected",
    "out_of_range",
]


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


def expected(name: str, what: str, value: object) -> TypeError:
    """The wrong-type error of argument ``name``: ``"name: expected <what>, got <type>"``."""
    return TypeError(f"{name}: expected {what}, got {type(value).__name__}")


def out_of_range(name: str, what: str, value: object) -> ValueError:
    """The wrong-value error of argument ``name``: ``"name: expected <what>, got <value>"``."""
    return ValueError(f"{name}: expected {what}, got {value!r}")


def check_bool(name: str, value: object, *, optional: bool = False) -> None:
    """``value`` is ``True`` or ``False`` (a truthy string is a mistake, not a switch); ``None`` too when
    ``optional``."""
    if value is None and optional:
        return
    if not isinstance(value, bool):
        raise expected(name, "True, False or None" if optional else "True or False", value)


def check_str(name: str, value: object, *, optional: bool = False, empty: bool = True) -> None:
    """``value`` is a str (``None`` too when ``optional``; not ``""`` unless ``empty``)."""
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise expected(name, "a str or None" if optional else "a str", value)
    if not value and not empty:
        raise out_of_range(name, "a non-empty str", value)


def check_seconds(name: str, value: object, *, zero: bool, optional: bool = False) -> None:
    """``value`` is a finite number of seconds, above 0 (``zero``: 0 too); ``None`` too when ``optional``."""
    if value is None and optional:
        return
    what = "seconds (a finite number " + (">= 0)" if zero else "> 0)")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise expected(name, what, value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        raise out_of_range(name, what, value)


def check_port(name: str, value: object, *, optional: bool = False) -> None:
    """``value`` is a TCP port, 1-65535, or 0 (the system picks a free one); ``None`` too when ``optional``."""
    if value is None and optional:
        return
    what = "a port in 1-65535 (0: any free port)"
    if isinstance(value, bool) or not isinstance(value, int):
        raise expected(name, what, value)
    if not 0 <= value <= 65535:
        raise out_of_range(name, what, value)


def check_has(name: str, value: object, method: str, what: str) -> None:
    """``value`` is ``None`` or has a callable ``method`` (what duck-typed providers and hooks are known by)."""
    if value is not None and not callable(getattr(value, method, None)):
        raise expected(name, f"{what} (with {method}()) or None", value)


def check_path(name: str, value: object, *, optional: bool = False) -> None:
    """``value`` is a file path (a str or ``os.PathLike``, not ``""``); ``None`` too when ``optional``."""
    if value is None and optional:
        return
    if not isinstance(value, str | os.PathLike):
        raise expected(name, "a file path (a str or Path)" + (" or None" if optional else ""), value)
    if not str(value):
        raise out_of_range(name, "a file path", value)
