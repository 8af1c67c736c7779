"""How a session turns a step into ``rb.difficulty``: the documented text path or a step scorer, checked alike.

``score_fn(thought)`` is ReasonBlocks' documented path, kept exactly as it was and as cheap; a step ``scorer``
(``"heuristic"``, ``"pilot"``, a :class:`~rb_otel.steering.scoring.Scorer` or ``fn(step, steps_so_far)``) replaces
it with one that sees the whole step and the run so far. Either result is checked the same way: a non-number
raises ``TypeError``, a non-finite one counts as 0.5, an out-of-range one is clamped (both logged).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from rb_otel.steering.scoring.protocol import KindAwareScorer
from rb_otel.steering.scoring.scorers import RunScorer, Scorer, ScorerStep, resolve_scorer, text_scorer_name
from rb_otel.steering.text import bounded_view

__all__ = ["OBSERVATION_VIEW", "StepScoring", "checked_score", "preview", "scorer_step"]

#: What a step scorer reads of an observation: its first and last characters (where test summaries and errors
#: are), the same 400 characters in all as the step record keeps from the head only.
OBSERVATION_VIEW = (240, 160)

_log = logging.getLogger("rb_otel.steering")
T = TypeVar("T")


def checked_score(value: Any, source: str) -> float:
    """``value`` as a difficulty in [0, 1], or ``TypeError`` naming ``source`` when it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{source} returned {type(value).__name__}; expected a float in [0, 1]")
    if not math.isfinite(value):
        _log.warning("%s returned %r; using 0.5", source, value)
        return 0.5
    if not 0.0 <= value <= 1.0:
        _log.warning("%s returned %r, outside [0, 1]; clamping", source, value)
        return min(max(float(value), 0.0), 1.0)
    return float(value)


def preview(value: Any, limit: int) -> str | None:
    """``value`` as text of at most ``limit`` characters (``None`` stays ``None``)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text[:limit]


def scorer_step(
    thought: str,
    *,
    action: Any = None,
    action_input: Any = None,
    observation: Any = None,
    error: bool = False,
    tokens: int = 0,
    reasoning: str = "",
) -> ScorerStep:
    """The :class:`ScorerStep` a step scorer sees for these inputs, live or replayed (``rb-otel train`` builds
    its training steps with it, so a fitted model reads exactly what it will read live)."""
    text = None if observation is None else observation if isinstance(observation, str) else str(observation)
    return ScorerStep(
        thought=f"{reasoning}\n{thought}" if reasoning else thought,
        action=None if action is None else str(action),
        action_input=preview(action_input, 1 << 20),
        observation=None if text is None else bounded_view(text, *OBSERVATION_VIEW),
        error=bool(error),
        tokens=tokens,
    )


def _own(run: object, attribute: str, kind: type[T]) -> T | None:
    """``run``'s own ``attribute`` when it has one of type ``kind`` (a bool is no count), else ``None``."""
    value = getattr(run, attribute, None)
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


class StepScoring:
    """The scoring of one run: ``score_fn``, or the run scorer ``scorer`` starts for ``agent`` (and, for a scorer
    that picks its model by the kind of agent, for ``kind``).

    ``name`` (``rb.scorer``) and ``labels`` (``rb.scorer.labels``: the labelled runs of this agent its model was
    fitted on, 0 for every scorer but an agent's learned pilot) are the run scorer's own when it says them (the
    pilot's :class:`~rb_otel.steering.pilot.PilotRun` does, read with the model that scores it), else the scorer's.
    """

    __slots__ = ("_run", "labels", "name", "score_fn")

    def __init__(
        self,
        score_fn: Callable[[str], float],
        scorer: str | Scorer | Callable[..., float] | None = None,
        *,
        agent: str = "",
        task_id: str = "",
        kind: str = "",
    ) -> None:
        self.score_fn = score_fn
        self._run: RunScorer | None = None
        self.name = text_scorer_name(score_fn)
        self.labels = 0
        if scorer is not None:
            resolved = resolve_scorer(scorer)
            if isinstance(resolved, KindAwareScorer) and resolved.chooses_by_kind:  # the pilot's model by kind
                self._run = resolved.start_run(agent, task_id, kind=kind)
                self.name = _own(self._run, "name", str) or resolved.name_for(kind, agent)
            else:
                self._run = resolved.start_run(agent, task_id)
                self.name = _own(self._run, "name", str) or resolved.name
            self.labels = _own(self._run, "labels", int) or 0

    def score(
        self,
        thought: str,
        *,
        action: Any = None,
        action_input: Any = None,
        observation: Any = None,
        error: bool = False,
        tokens: int = 0,
        reasoning: str = "",
    ) -> float:
        if self._run is None:
            return checked_score(self.score_fn(thought), "score_fn")
        step = scorer_step(
            thought,
            action=action,
            action_input=action_input,
            observation=observation,
            error=error,
            tokens=tokens,
            reasoning=reasoning,
        )
        return checked_score(self._run.score(step), self.name)

    @property
    def run(self) -> RunScorer | None:
        """This run's scorer state (``None`` on the ``score_fn`` path)."""
        return self._run

    def fsm_thresholds(self) -> Mapping[str, Any] | None:
        """The run scorer's FSM preset for this run, when it has one (the pilot's)."""
        offered = getattr(self._run, "fsm_thresholds", None)
        return offered() if callable(offered) else None

    def risk(self, history: Sequence[float]) -> float | None:
        """The run risk: the run scorer's, else the mean of the scores in ``history``."""
        if self._run is not None:
            return self._run.risk()
        return sum(history) / len(history) if history else None

    def finish(self) -> None:
        """Tell the run scorer the run ended (the pilot learns its baseline); a failure there is only logged."""
        if self._run is None:
            return
        try:
            self._run.finish()
        except Exception:  # a custom scorer must not break the run's end
            _log.warning("scorer %s failed in finish; continuing", self.name, exc_info=True)
