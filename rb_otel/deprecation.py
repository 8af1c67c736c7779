"""The one way rb-otel deprecates a public name, argument or hook: a ``DeprecationWarning`` that says what to use
instead and the release that removes it, pointed at the user's code (each one is also a line in CHANGELOG.md's
"Deprecated" list)."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

__all__ = ["REMOVED_IN", "Moved", "deprecated", "moved_module", "moved_names"]

#: The release that removes what this release deprecates: a deprecation keeps old code working for one release.
REMOVED_IN = "0.3.0"

_PACKAGE_DIR = str(Path(__file__).resolve().parent)


class Moved(NamedTuple):
    """Where a moved name lives now: ``module.attribute``; ``instead`` is what the warning tells users to write (by
    default the new dotted path)."""

    module: str
    attribute: str
    instead: str = ""

    @classmethod
    def parse(cls, target: str | Moved) -> Moved:
        """``"module:attribute"`` (or a :class:`Moved`) as a :class:`Moved`."""
        if isinstance(target, Moved):
            return target
        module, _, attribute = target.partition(":")
        return cls(module, attribute)


def deprecated(what: str, *, instead: str = "", advice: str = "", because: str = "") -> None:
    """Warn that ``what`` is deprecated: ``instead`` names what to use (``"use ..."``), or ``advice`` says what to
    do; ``because`` says what is wrong with it. The warning points at the first caller outside rb_otel, however
    deep inside the package the deprecated thing was reached."""
    todo = f"use {instead}" if instead else advice
    reason = f" {because} and" if because else ""
    _warn(f"{what}{reason} is deprecated: {todo}; it is removed in rb-otel {REMOVED_IN}")


def moved_names(package: str, moved: Mapping[str, str | Moved], *, rest_in: str | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for names that moved out of ``package``: ``moved`` maps each old name to its new
    home (``"module:attribute"`` or a :class:`Moved`), and ``rest_in`` (a module) is where every other name of the
    old module went. Using an old name warns (every use) and returns the new object; a name found in neither is
    an ``AttributeError`` of ``package``."""

    def __getattr__(name: str) -> Any:
        target = moved.get(name)
        if target is not None:
            home = Moved.parse(target)
        elif rest_in is not None and not name.startswith("__") and hasattr(importlib.import_module(rest_in), name):
            home = Moved(rest_in, name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        instead = home.instead or f"{home.module}.{home.attribute}"
        _warn(f"{package}.{name} moved: use {instead}; the old name is removed in rb-otel {REMOVED_IN}")
        return getattr(importlib.import_module(home.module), home.attribute)

    return __getattr__


def moved_module(old: str, new: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of a deprecated module path ``old`` whose contents moved, whole, to the module ``new``:
    every name still resolves (the same object), with a warning naming its new home."""
    return moved_names(old, {}, rest_in=new)


def _warn(message: str) -> None:
    warnings.warn(message, DeprecationWarning, stacklevel=_first_frame_outside_the_package())


def _first_frame_outside_the_package() -> int:
    """The ``stacklevel`` (for a ``warnings.warn`` called in :func:`_warn`) of the nearest caller whose code is not
    in rb_otel: what Python 3.12's ``skip_file_prefixes`` does, written out for 3.11."""
    # _warn's caller (deprecated() or a module __getattr__) is stacklevel 2
    frame: FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level
