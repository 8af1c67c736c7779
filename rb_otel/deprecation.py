"""How rb-otel warns of the ReasonBlocks names it accepts for compatibility (the spec's ``monitor_names=``,
``live_streaming_enabled=``, ``build_middleware()``, ``claude_messages_session()``, the reserved config fields): a
``DeprecationWarning`` that says what to use instead, pointed at the user's code. rb-otel's own names never have
aliases: a name that moves, moves (CHANGELOG.md lists the old name with the new one)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from types import FrameType

__all__ = ["deprecated"]

_PACKAGE_DIR = str(Path(__file__).resolve().parent)


def deprecated(what: str, *, instead: str = "", advice: str = "", because: str = "") -> None:
    """Warn that ``what`` is deprecated: ``instead`` names what to use (``"use ..."``), or ``advice`` says what to
    do; ``because`` says what is wrong with it. The warning points at the first caller outside rb_otel, however
    deep inside the package the deprecated thing was reached."""
    todo = f"use {instead}" if instead else advice
    reason = f" {because} and" if because else ""
    warnings.warn(
        f"{what}{reason} is deprecated: {todo} (accepted for code written for ReasonBlocks)",
        DeprecationWarning,
        stacklevel=_first_frame_outside_the_package(),
    )


def _first_frame_outside_the_package() -> int:
    """The ``stacklevel`` (for the ``warnings.warn`` in :func:`deprecated`) of the nearest caller whose code is not
    in rb_otel: what Python 3.12's ``skip_file_prefixes`` does, written out for 3.11."""
    # deprecated()'s caller is stacklevel 2
    frame: FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level
