"""Scoring: what turns a step (and the run so far) into ``rb.difficulty``.

ReasonBlocks' documented heuristic (``heuristic``: :func:`score_step`), the scorer protocol (``protocol``), the
scorers and ``resolve_scorer`` (``scorers``), the LLM judge (``judge``) and how a session scores a step with any of
them (``steps``). The pilot, a scorer with per-agent baselines, is :mod:`rb_otel.steering.pilot`.
"""

from rb_otel.steering.scoring.heuristic import ERROR_TERMS, HEDGE_TERMS, score_signals, score_step
from rb_otel.steering.scoring.judge import JUDGE_PROMPT, JudgeScorer
from rb_otel.steering.scoring.protocol import RunScorer, Scorer, ScorerStep
from rb_otel.steering.scoring.scorers import (
    SCORER_NAMES,
    FunctionScorer,
    HeuristicScorer,
    resolve_scorer,
    text_scorer,
    text_scorer_name,
)
from rb_otel.steering.scoring.steps import StepScoring, scorer_step

__all__ = [
    "ERROR_TERMS",
    "HEDGE_TERMS",
    "JUDGE_PROMPT",
    "SCORER_NAMES",
    "FunctionScorer",
    "HeuristicScorer",
    "JudgeScorer",
    "RunScorer",
    "Scorer",
    "ScorerStep",
    "StepScoring",
    "resolve_scorer",
    "score_signals",
    "score_step",
    "scorer_step",
    "text_scorer",
    "text_scorer_name",
]
