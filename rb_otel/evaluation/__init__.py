"""Evaluation: replay labelled runs and measure how well steering flags failures (``rb-otel evaluate``). The work
is in :mod:`~rb_otel.evaluation.evaluate_runs` (the runs it reads and replays: ``labelled_runs``); early warning
in ``early``, the figures in ``metrics``, the page in ``html``."""

from rb_otel.evaluation.evaluate_runs import (
    EARLY_STEPS,
    AgentRow,
    Evaluation,
    EvaluationError,
    RecordError,
    RunOutcome,
    Signal,
    evaluate,
    print_progress,
)

__all__ = [
    "EARLY_STEPS",
    "AgentRow",
    "Evaluation",
    "EvaluationError",
    "RecordError",
    "RunOutcome",
    "Signal",
    "evaluate",
    "print_progress",
]
