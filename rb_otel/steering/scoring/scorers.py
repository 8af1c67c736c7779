"""The scorers and their resolution: the heuristic and function scorers, and ``resolve_scorer`` (a name, a
callable or a :class:`Scorer` -> a :class:`Scorer`).

A :class:`Scorer` is shared by every run; ``start_run(agent, task_id)`` gives the :class:`RunScorer` of one run,
which sees each step once, in order, and answers with a float in [0, 1]. ``risk()`` is the run-level risk
(``rb.risk`` on the run span) and ``finish()`` tells the scorer the run ended (the pilot folds it into the agent's
baseline; nothing is learned from outcomes).

Three ways to choose one (``resolve_scorer``):

* ``"heuristic"`` (the default): ReasonBlocks' ``score_step(thought)``, exactly as documented; the run risk is
  the mean of its scores.
* ``"pilot"``: :class:`rb_otel.backends.pilot.PilotScorer`, a calibrated probability that the run is failing.
* a callable: ``fn(thought) -> float`` (a text scorer, like the heuristic) or ``fn(step, steps_so_far) ->
  float`` (``steps_so_far`` includes ``step``); or any object with ``name`` and ``start_run``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from rb_otel.steering.scoring.heuristic import score_step
from rb_otel.steering.scoring.protocol import RunScorer, Scorer, ScorerStep

__all__ = [
    "SCORER_NAMES",
    "FunctionScorer",
    "HeuristicScorer",
    "RunScorer",
    "Scorer",
    "ScorerStep",
    "resolve_scorer",
    "text_scorer",
    "text_scorer_name",
]

#: The names ``resolve_scorer`` accepts.
SCORER_NAMES = ("heuristic", "pilot")


class _MeanRisk:
    """Keeps the mean of the scores given: the run risk of scorers that have no better one."""

    __slots__ = ("_n", "_total")

    def __init__(self) -> None:
        self._total = 0.0
        self._n = 0

    def add(self, value: float) -> float:
        self._total += value
        self._n += 1
        return value

    def risk(self) -> float | None:
        return self._total / self._n if self._n else None


class _TextRun(_MeanRisk):
    __slots__ = ("_fn",)

    def __init__(self, fn: Callable[[str], float]) -> None:
        super().__init__()
        self._fn = fn

    def score(self, step: ScorerStep) -> float:
        return self.add(self._fn(step.thought))

    def finish(self) -> None:
        return None


class HeuristicScorer:
    """ReasonBlocks' documented heuristic: ``score_step(step.thought)``; the run risk is the mean score. With
    ``fn``, any text scorer ``fn(thought) -> float`` the same way."""

    name = "heuristic"

    def __init__(self, fn: Callable[[str], float] = score_step, name: str | None = None) -> None:
        self.fn = fn
        self._fn = fn
        if name is not None:
            self.name = name

    def start_run(self, agent: str = "", task_id: str = "") -> RunScorer:
        return _TextRun(self._fn)


def text_scorer(fn: Callable[[str], float]) -> HeuristicScorer:
    """A scorer from a ``fn(thought) -> float`` (what ``score_fn=`` takes), named after the function."""
    return HeuristicScorer(fn, name=_callable_name(fn))


class _FunctionRun(_MeanRisk):
    __slots__ = ("_fn", "_steps")

    def __init__(self, fn: Callable[[ScorerStep, Sequence[ScorerStep]], float]) -> None:
        super().__init__()
        self._fn = fn
        self._steps: list[ScorerStep] = []

    def score(self, step: ScorerStep) -> float:
        self._steps.append(step)
        return self.add(self._fn(step, self._steps))

    def finish(self) -> None:
        self._steps = []


class FunctionScorer:
    """A scorer from ``fn(step, steps_so_far) -> float``; the run risk is the mean of its scores."""

    def __init__(self, fn: Callable[[ScorerStep, Sequence[ScorerStep]], float], name: str | None = None) -> None:
        self._fn = fn
        self.name = name or _callable_name(fn)

    def start_run(self, agent: str = "", task_id: str = "") -> RunScorer:
        return _FunctionRun(self._fn)


def text_scorer_name(fn: Callable[[str], float]) -> str:
    """``rb.scorer`` for a ``score_fn``: ``heuristic`` for ReasonBlocks' own, else the function's name."""
    return "heuristic" if fn is score_step else _callable_name(fn)


def _callable_name(fn: Any) -> str:
    name = getattr(fn, "__name__", None) or type(fn).__name__
    return str(name)[:64]


def resolve_scorer(scorer: str | Scorer | Callable[..., float] | None) -> Scorer:
    """The scorer named or given; ``None`` is the heuristic. Raises ``ValueError``/``TypeError`` at the boundary.

    A callable taking one positional argument is a text scorer ``fn(thought) -> float`` (what ``score_fn=`` took);
    one taking two is a step scorer ``fn(step, steps_so_far) -> float``.
    """
    if scorer is None or scorer == "heuristic":
        return HeuristicScorer()
    if scorer == "pilot":
        return _fleet_pilot()
    if isinstance(scorer, str):
        raise ValueError(f"unknown scorer {scorer!r}; choose {' or '.join(SCORER_NAMES)}, or pass a callable")
    if isinstance(scorer, Scorer):
        return scorer
    if callable(scorer):
        try:
            params = inspect.signature(scorer).parameters.values()
        except (TypeError, ValueError):  # a builtin without a signature: trust it
            return FunctionScorer(scorer)
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not positional and not any(p.kind is p.VAR_POSITIONAL for p in params):
            raise TypeError(
                f"scorer {_callable_name(scorer)!r} takes no argument; a scorer callable takes (thought) or "
                "(step, steps_so_far)"
            )
        if len(positional) == 1 and not any(p.kind is p.VAR_POSITIONAL for p in params):
            return text_scorer(scorer)  # fn(thought) -> float: ReasonBlocks' documented text path
        return FunctionScorer(scorer)
    raise TypeError(f"scorer must be 'heuristic', 'pilot', a Scorer or a callable, got {type(scorer).__name__}")


#: The one name the core resolves outside itself: ``scorer="pilot"`` is the pilot that keeps its agents' baselines
#: in the fleet's store (a URL, ``RB_OTEL_PILOT_BASELINES``, threads and exit hooks: the runtime's side). Named as
#: a string so the core imports nothing of the runtime; the architecture test lists it as the core's only such
#: seam.
FLEET_PILOT = "rb_otel.backends.pilot:PilotScorer"


def _fleet_pilot() -> Scorer:
    module, _, name = FLEET_PILOT.partition(":")
    scorer: Scorer = getattr(importlib.import_module(module), name)()
    return scorer
