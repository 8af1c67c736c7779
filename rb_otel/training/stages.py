"""How ``train`` says how far it has got: stages, each a count of steps (files read, folds, fits), so a caller can
show counts, a rate and the time left (``rb-otel train`` does, on standard error).

``train(..., progress=...)`` takes a :class:`Stages` object, or, as before, a function of one line (called with
each stage's description and each note; the counts are then not reported), or ``None``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["Stages", "stages_of"]


@runtime_checkable
class Stages(Protocol):
    """Receives the work's stages and steps. Called on the thread doing the work; it should be quick and must not
    raise."""

    def stage(self, name: str, total: int | None = None, unit: str = "step") -> None:
        """A stage begins (the one before it ends): ``total`` steps of ``unit`` (``None``: not known)."""
        ...

    def advance(self, steps: int = 1) -> None:
        """``steps`` more of the current stage are done."""
        ...

    def note(self, text: str) -> None:
        """What the stage is doing now (the agent held out, say)."""
        ...


class _Lines:
    """A one-line function as :class:`Stages`: a line per stage, no counts."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say

    def stage(self, name: str, total: int | None = None, unit: str = "step") -> None:
        self._say(name)

    def advance(self, steps: int = 1) -> None:
        return None

    def note(self, text: str) -> None:
        self._say(text)


class _Silent:
    def stage(self, name: str, total: int | None = None, unit: str = "step") -> None:
        return None

    def advance(self, steps: int = 1) -> None:
        return None

    def note(self, text: str) -> None:
        return None


def stages_of(progress: Stages | Callable[[str], None] | None) -> Stages:
    """``progress`` as :class:`Stages` (a function of one line gets a line per stage; ``None``, nothing)."""
    if progress is None:
        return _Silent()
    if isinstance(progress, Stages):
        return progress
    return _Lines(progress)
