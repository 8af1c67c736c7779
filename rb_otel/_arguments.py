"""The checks of ``ReasonBlocks``' constructor arguments: at the API boundary, each failing with its name."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rb_otel.steering.monitors.profiles import resolve_weights

__all__ = ["check_arguments"]


def check_arguments(  # noqa: PLR0917 - the constructor's arguments, checked in one place
    api_key: str | None,
    fsm_thresholds: Mapping[str, Any] | None,
    task_profile: str,
    monitor_weights: Mapping[str, float] | None,
    score_fn: Callable[[str], float] | None,
    scorer: object,
    steering_budget_s: float,
) -> None:
    """Fail at construction, with the argument's name, rather than deep inside an agent run."""
    if api_key is not None and not isinstance(api_key, str):
        raise TypeError("api_key must be a str or None")
    if fsm_thresholds is not None and not isinstance(fsm_thresholds, Mapping):
        raise TypeError(f"fsm_thresholds must be a mapping, got {type(fsm_thresholds).__name__}")
    if not isinstance(task_profile, str) or not task_profile:
        raise ValueError("task_profile must be a non-empty string")
    resolve_weights(task_profile, monitor_weights)  # unknown profile or bad weight: fail now
    if score_fn is not None and not callable(score_fn):
        raise TypeError("score_fn must be callable")
    if score_fn is not None and scorer not in (None, "heuristic"):
        raise ValueError("pass score_fn (a fn(thought) -> float) or scorer, not both")
    if not steering_budget_s > 0:
        raise ValueError(f"steering_budget_s must be positive, got {steering_budget_s!r}")
