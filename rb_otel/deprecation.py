"""The one way rb-otel deprecates a public name, argument or hook: a ``DeprecationWarning`` that says what to use
instead and the release that removes it (each one is also a line in CHANGELOG.md's "Deprecated" list)."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["REMOVED_IN", "deprecated", "moved_names"]

#: The release that removes what this release deprecates: a deprecation keeps old code working for one release.
REMOVED_IN = "0.3.0"


def deprecated(what: str, *, instead: str = "", advice: str = "", stacklevel: int = 3) -> None:
    """Warn that ``what`` is deprecated: ``instead`` names what to use (``"use ..."``), or ``advice`` says what to
    do; the warning points at the caller's caller (``stacklevel`` 3: the code that used the deprecated thing, when
    this is called from the thing itself)."""
    todo = f"use {instead}" if instead else advice
    warnings.warn(
        f"{what} is deprecated and is removed in rb-otel {REMOVED_IN}: {todo}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def moved_names(package: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that moved out of ``package``: ``moved`` maps each old name to its new
    home as ``"module:attribute"``; using the old name warns (every use) and returns the new object."""

    def __getattr__(name: str) -> Any:
        target = moved.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        deprecated(f"{package}.{name}", instead=f"{module}.{attribute}")
        return getattr(importlib.import_module(module), attribute)

    return __getattr__
