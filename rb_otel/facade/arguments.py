"""The checks of ``ReasonBlocks``' arguments, at the API boundary: each keyword has one entry in :data:`CHECKS`,
and a wrong type or value fails on construction with the keyword's name and what it accepts
(``"tracer_provider: expected an OpenTelemetry TracerProvider (with get_tracer()) or None, got str"``), rather
than deep inside an agent run."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any

from rb_otel.deprecation import deprecated
from rb_otel.steering.checks import (
    check_bool,
    check_has,
    check_seconds,
    check_str,
    expected,
    out_of_range,
)
from rb_otel.steering.fsm import FSMThresholds
from rb_otel.steering.monitors.profiles import V1_MONITORS, resolve_weights

__all__ = [
    "CHECKS",
    "DEFAULT_STEERING_BUDGET_S",
    "RUN_CHECKS",
    "check_arguments",
    "check_monitor_weights",
    "resolve_legacy",
    "warn_ignored",
]

_log = logging.getLogger("rb_otel")

#: Seconds rb-api calls may take per step before the step fails open to the embedded backends.
DEFAULT_STEERING_BUDGET_S = 2.0

#: A keyword's check: raises ``TypeError``/``ValueError`` naming it; what it returns is not used.
Check = Callable[[str, Any], object]


def _optional(kinds: type | tuple[type, ...], what: str) -> Check:
    def check(name: str, value: object) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, kinds)):
            raise expected(name, f"{what} or None", value)

    return check


def _mapping(name: str, value: object) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise expected(name, "a mapping or None", value)


def _fsm_thresholds(name: str, value: object) -> None:
    """The keys here (their values are checked by ``DifficultyFSM``, once merged with the scorer's preset)."""
    _mapping(name, value)
    known = [f.name for f in fields(FSMThresholds)]
    unknown = sorted(str(k) for k in (value if isinstance(value, Mapping) else ()) if k not in known)
    if unknown:
        raise out_of_range(name, f"keys among {', '.join(known)}", ", ".join(unknown))


def _baselines(name: str, value: object) -> None:
    # a store URL or path, a SummaryStore (recent()) or a BaselineSource (get()), e.g. a BaselineCache
    if (
        value is not None
        and not isinstance(value, str | Path)
        and not (hasattr(value, "get") or hasattr(value, "recent"))
    ):
        raise expected(name, "a baseline store URL or path, a SummaryStore, a BaselineCache or None", value)


def _token_budget(name: str, value: object) -> None:
    _optional(int, "a whole number of tokens (> 0)")(name, value)
    if value is not None and value <= 0:  # type: ignore[operator]
        raise out_of_range(name, "a whole number of tokens (> 0) or None", value)


def check_monitor_weights(name: str, value: object) -> None:
    """``None``, or a mapping of known monitor names (:data:`~rb_otel.steering.monitors.profiles.V1_MONITORS`)
    to weights in [0, 1]: an unknown name is a typo, never silently dropped."""
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise expected(name, "a mapping of monitor name to weight or None", value)
    for monitor, weight in value.items():
        if monitor not in V1_MONITORS:
            raise out_of_range(name, f"monitor names among {', '.join(V1_MONITORS)}", monitor)
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise expected(f"{name}[{monitor!r}]", "a weight (a number in [0, 1])", weight)
        if not math.isfinite(weight) or not 0 <= weight <= 1:
            raise out_of_range(f"{name}[{monitor!r}]", "a weight in [0, 1]", weight)


def _capture_content(name: str, value: object) -> None:
    if value is not None and not isinstance(value, bool | str):
        raise expected(name, "True, False, a capture mode ('SPAN_ONLY', 'EVENT_ONLY', ...) or None", value)


def _evaluation_events(name: str, value: object) -> None:
    if value not in ("logs", "span", "both"):
        raise out_of_range(name, "'logs', 'span' or 'both'", value)


def _monitor_names(name: str, value: object) -> None:
    if value is not None and (not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value)):
        raise expected(name, "a list of monitor names or None", value)


def _scorer(name: str, value: object) -> None:
    # the names and Scorer objects are resolved (and their errors worded) by resolve_scorer
    if value is not None and not isinstance(value, str) and not callable(value) and not hasattr(value, "start_run"):
        raise expected(name, "'heuristic', 'pilot', a Scorer or a callable", value)


#: Every keyword of ``ReasonBlocks(...)`` and its check; a keyword without an entry fails on construction.
CHECKS: Mapping[str, Check] = {
    "api_key": partial(check_str, optional=True),
    "base_url": partial(check_str, optional=True),
    "steering_budget_s": partial(check_seconds, zero=False),
    "export_runs_to_api": check_bool,
    "task_profile": partial(check_str, empty=False),
    "fsm_thresholds": _fsm_thresholds,
    "model_routing": _mapping,
    "token_budget": _token_budget,
    "e_traces_enabled": check_bool,
    "monitor_weights": check_monitor_weights,
    "monitor_backend": partial(check_has, method="evaluate", what="a MonitorBackend"),
    "pattern_store": partial(check_has, method="retrieve", what="a PatternStore"),
    "scorer": _scorer,
    "pilot_model": _optional((str, Path), "a model file (a str or Path)"),
    "baselines": _baselines,
    "agent_kind": partial(check_str, optional=True),
    "tracer_provider": partial(check_has, method="get_tracer", what="an OpenTelemetry TracerProvider"),
    "meter_provider": partial(check_has, method="get_meter", what="an OpenTelemetry MeterProvider"),
    "logger_provider": partial(check_has, method="get_logger", what="an OpenTelemetry LoggerProvider"),
    "capture_content": _capture_content,
    "telemetry_enabled": check_bool,
    "telemetry_batch_window": partial(check_seconds, zero=True),
    "evaluation_events": _evaluation_events,
    "completion_hook": partial(check_has, method="on_completion", what="a GenAI CompletionHook"),
    "live_streaming_enabled": partial(check_bool, optional=True),
    "monitor_names": _monitor_names,
}


def _tools(name: str, value: object) -> None:
    # a str is one tool's name, not a list of them: iterating it would read one tool per letter
    if value is not None and (isinstance(value, str | bytes) or not isinstance(value, Iterable)):
        raise expected(name, "the agent's tools (a list of names, tool objects or schemas) or None", value)


#: The run keywords of ``rb.middleware()``, ``rb.chat_model()`` and ``rb.session()`` that ``RunFields`` does not
#: check itself.
RUN_CHECKS: Mapping[str, Check] = {
    "run_id": partial(check_str, optional=True),
    "tools": _tools,
    "step_log_in_state": check_bool,
    "steer": check_bool,
}


def check_arguments(arguments: Mapping[str, object], checks: Mapping[str, Check] = CHECKS) -> None:
    """Fail at construction, with the argument's name and what it accepts, rather than deep inside an agent run.
    Raises ``TypeError`` (a wrong type) or ``ValueError`` (a wrong value)."""
    for name, value in arguments.items():
        checks[name](name, value)
    if "task_profile" in arguments:
        resolve_weights(str(arguments["task_profile"]))  # an unknown profile: now, with the known ones


def resolve_legacy(
    live_streaming_enabled: bool | None, telemetry_enabled: bool, monitor_names: list[str] | None
) -> bool:
    """``telemetry_enabled`` once ReasonBlocks' ``live_streaming_enabled`` and ``monitor_names`` (the spec's
    compatibility arguments) are mapped to this library's (each warns)."""
    if live_streaming_enabled is not None:
        deprecated(
            "ReasonBlocks(live_streaming_enabled=...)",
            instead="telemetry_enabled=... (it switches all of rb-otel's telemetry)",
        )
        telemetry_enabled = live_streaming_enabled and telemetry_enabled
    if monitor_names is not None:
        deprecated(
            "ReasonBlocks(monitor_names=...)",
            because="never had an effect (the task profile chooses the monitors)",
            advice="remove it",
        )
    return telemetry_enabled


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
