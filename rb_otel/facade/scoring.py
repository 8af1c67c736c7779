"""What ``ReasonBlocks``' scoring arguments resolve to: the scorer every run shares, the text scorer of the
documented path, and the FSM (the pilot's preset relative to each run's agent, unless thresholds are given)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.pilot import PilotScorer
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.pilot import pilot_fsm_thresholds
from rb_otel.steering.scoring import HeuristicScorer, Scorer, resolve_scorer, score_step, text_scorer_name

__all__ = ["Scoring", "resolve_scoring"]


@dataclass(frozen=True, slots=True)
class Scoring:
    """``scorer`` is ``None`` on the text path (``score_fn``); ``per_run_fsm``: each run gets the pilot's preset
    relative to its agent."""

    scorer: Scorer | None
    score_fn: Callable[[str], float]
    scorer_name: str
    fsm: DifficultyFSM
    per_run_fsm: bool


def resolve_scoring(
    scorer: str | Scorer | Callable[..., float] | None,
    fsm_thresholds: Mapping[str, Any] | None,
    baselines: str | Path | BaselineCache | None,
    pilot_model: str | Path | None,
    agent_kind: str | None = None,
) -> Scoring:
    """Resolve the scoring arguments once; ``ValueError`` for ``baselines=`` or ``pilot_model=`` without the pilot.

    ``scorer=None``/``"heuristic"`` (or any text scorer) keeps the documented text path; any other scorer is
    resolved once and shared by every run, so the pilot's per-agent baselines accumulate across runs.
    """
    if baselines is not None and scorer != "pilot":
        hint = "give it to PilotScorer(baselines=...)" if isinstance(scorer, PilotScorer) else "no other scorer has any"
        raise ValueError(f"baselines= is where scorer='pilot' keeps its per-agent baselines; {hint}")
    if pilot_model is not None and scorer != "pilot":
        raise ValueError(f"pilot_model= is a model for scorer='pilot' (rb-otel train's file), not scorer={scorer!r}")
    shared: Scorer | None
    if scorer == "pilot":
        shared = PilotScorer(model=pilot_model, baselines=baselines, agent_kind=agent_kind)
    else:
        shared = None if scorer in (None, "heuristic") else resolve_scorer(scorer)
    text_fn: Callable[[str], float] = score_step
    if isinstance(shared, HeuristicScorer):  # a text scorer keeps the documented text path: score_fn
        text_fn, shared = shared.fn, None
    preset = pilot_fsm_thresholds(shared.model) if isinstance(shared, PilotScorer) else {}
    return Scoring(
        scorer=shared,
        score_fn=text_fn,
        scorer_name=shared.name if shared is not None else text_scorer_name(text_fn),
        fsm=DifficultyFSM(**{**preset, **dict(fsm_thresholds or {})}),
        per_run_fsm=isinstance(shared, PilotScorer) and not fsm_thresholds,
    )
