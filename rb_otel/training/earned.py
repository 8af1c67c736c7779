"""Which of SLOW and SKIP a model earned on its own cross-fitted record, and the model with only those on.

What ``rb-otel train --watch`` publishes for an agent (a trusted fit, or its oriented size) enters SLOW and SKIP
only where the runs its thresholds never saw show them working: :func:`earned_states` decides, and
:func:`with_states` sets an unearned state's threshold to 1.0 (a probability never stays above it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from rb_otel.evaluation.early import RunTrace, StopFigures
from rb_otel.steering.pilot import PilotModel
from rb_otel.training.dataset import LabelledRun
from rb_otel.training.thresholds import SKIP_OFF

__all__ = ["earned_states", "run_traces", "with_states"]


def run_traces(
    runs: Sequence[LabelledRun], scores: Sequence[Sequence[float]], states: Sequence[Sequence[str]]
) -> list[RunTrace]:
    """What stopping figures need of each run: its outcome, its scores and states step by step, the characters it
    had written and its tokens (the record :func:`earned_states` judges)."""
    out = []
    for run, its_scores, its_states in zip(runs, scores, states, strict=True):
        chars = np.cumsum([len(s.thought or "") + len(s.action_input or "") for s in run.steps]).tolist()
        out.append(RunTrace(run.failed, its_scores, chars, run.prompt_tokens, run.tokens, its_states))
    return out


def earned_states(stopping: Sequence[StopFigures], skip_on: bool, z: float = 1.0) -> tuple[bool, bool]:
    """Which of SLOW and SKIP a trusted fit's cross-fitted record earned (``stopping``: the report's SKIP then
    SLOW rows, thresholds chosen without the runs they judge). SLOW: it reaches failing runs more often than
    successful ones beyond chance (the Wilson lower bound, ``z``, of its share of failing runs above the upper
    bound of its share of successful runs). SKIP: the report's bound held (``skip_on``) and SLOW is earned (the
    machine reaches SKIP only through SLOW)."""
    from rb_otel.ab.stats import wilson_interval

    slow_row = stopping[1]
    failing = round(slow_row.stopped_failing * slow_row.failing)
    successful = round(slow_row.stopped_successful * slow_row.successful)
    low = wilson_interval(failing, slow_row.failing, z)[0]
    high = wilson_interval(successful, slow_row.successful, z)[1]
    slow = slow_row.failing > 0 and low > high
    return slow, slow and skip_on


def with_states(model: PilotModel, agent: str, labels: int, slow: bool, skip: bool) -> PilotModel:
    """``model`` with an unearned state's threshold at 1.0 (a probability never stays above it) and the record of
    what it earned in ``trained``."""
    fsm = dict(model.fsm)
    if not skip:
        fsm["skip_threshold"] = SKIP_OFF
    if not slow:
        fsm["slow_threshold"] = fsm["skip_threshold"] = SKIP_OFF
    trained = {**model.trained, "agent": agent, "labels": labels, "earned": {"slow": slow, "skip": skip}}
    skip_block = {**model.skip, "threshold": fsm["skip_threshold"], "on": float(skip)}
    return dataclasses.replace(model, fsm=fsm, trained=trained, skip=skip_block)
