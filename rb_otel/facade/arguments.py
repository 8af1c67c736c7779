"""The checks of ``ReasonBlocks``' constructor arguments: at the API boundary, each failing with its name, and the
previous release's argument names, still accepted with a ``DeprecationWarning``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rb_otel.deprecation import deprecated
from rb_otel.steering.monitors.profiles import resolve_weights

__all__ = ["DEFAULT_STEERING_BUDGET_S", "Legacy", "check_arguments", "resolve_legacy", "warn_ignored"]

_log = logging.getLogger("rb_otel")

#: Seconds rb-api calls may take per step before the step fails open to the embedded backends.
DEFAULT_STEERING_BUDGET_S = 2.0


def check_arguments(
    *,
    api_key: str | None,
    fsm_thresholds: Mapping[str, Any] | None,
    task_profile: str,
    monitor_weights: Mapping[str, float] | None,
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
    if not steering_budget_s > 0:
        raise ValueError(f"steering_budget_s must be positive, got {steering_budget_s!r}")
    del scorer  # resolved (and checked) by resolve_scorer


@dataclass(frozen=True, slots=True)
class Legacy:
    """The effective values once the previous release's argument names are mapped to this one's."""

    scorer: Any
    telemetry_enabled: bool


def resolve_legacy(
    score_fn: Callable[[str], float] | None,
    scorer: Any,
    live_streaming_enabled: bool | None,
    telemetry_enabled: bool,
    monitor_names: list[str] | None,
) -> Legacy:
    """Map ``score_fn``, ``live_streaming_enabled`` and ``monitor_names`` to this release's arguments (warning)."""
    if score_fn is not None:
        if not callable(score_fn):
            raise TypeError("score_fn must be callable")
        if scorer not in (None, "heuristic"):
            raise ValueError("pass score_fn (deprecated) or scorer, not both")
        deprecated("ReasonBlocks(score_fn=fn)", instead="scorer=fn (a fn(thought) -> float is a text scorer)")
        from rb_otel.steering.scoring import text_scorer

        scorer = text_scorer(score_fn)
    if live_streaming_enabled is not None:
        deprecated(
            "ReasonBlocks(live_streaming_enabled=...)",
            instead="telemetry_enabled=... (it switches all of rb-otel's telemetry)",
        )
        telemetry_enabled = bool(live_streaming_enabled) and telemetry_enabled
    if monitor_names is not None:
        deprecated(
            "ReasonBlocks(monitor_names=...)",
            because="never had an effect (the task profile chooses the monitors)",
            advice="remove it",
        )
    return Legacy(scorer, telemetry_enabled)


def warn_ignored(
    *,
    api_key: str | None,
    base_url: str | None,
    steering_budget_s: float,
    export_runs_to_api: bool,
    telemetry_enabled: bool,
    capture_content: bool | str | None,
    e_traces_enabled: bool = True,
    pattern_store: object = None,
) -> None:
    """A warning for each argument that would be silently ignored in this combination."""
    if pattern_store is not None and not e_traces_enabled:
        _log.warning("pattern_store is set but e_traces_enabled=False: no pattern is retrieved from it")
    if not api_key:
        if base_url:
            _log.warning("base_url is set but no api_key: steering runs embedded")
        if export_runs_to_api:
            _log.warning("export_runs_to_api=True needs an api_key: no run is sent to rb-api")
        if steering_budget_s != DEFAULT_STEERING_BUDGET_S:
            _log.warning("steering_budget_s bounds rb-api calls; without an api_key there are none")
    elif export_runs_to_api and not telemetry_enabled:
        _log.warning("export_runs_to_api=True with telemetry_enabled=False: run export is off too")
    if capture_content not in (None, False) and not telemetry_enabled:
        _log.warning("capture_content is set but telemetry_enabled=False: nothing is exported, content neither")
