"""A wrong argument to a public constructor fails at the boundary with the argument's name (issue 59, item 6): a
``TypeError`` or ``ValueError`` whose message names the keyword, never an ``AttributeError`` or a comparison error
from deep inside. The table holds, for every keyword of every public constructor, values it must refuse; a new
keyword without an entry fails :func:`test_every_keyword_of_every_constructor_has_an_entry`."""

from __future__ import annotations

import inspect
import logging
import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rb_otel
from rb_otel import (
    GeneralMonitorMiddleware,
    JudgeScorer,
    PilotScorer,
    ReasonBlocks,
    ReasonBlocksConfig,
    TokenSavingMiddleware,
    assign_arm,
    configure,
)

NAN, INF = math.nan, math.inf


def _ask(prompt: str) -> str:
    return "0.5"


def _rb() -> ReasonBlocks:
    return ReasonBlocks(telemetry_enabled=False)


#: name -> (what to call with one keyword, the signature whose keywords the table must cover)
CONSTRUCTORS: dict[str, tuple[Callable[..., object], Callable[..., object]]] = {
    "ReasonBlocks": (ReasonBlocks, ReasonBlocks.__init__),
    "ReasonBlocks.middleware": (lambda **kw: _rb().middleware(**kw), ReasonBlocks.middleware),
    "ReasonBlocks.chat_model": (
        lambda model="openai:gpt-4o-mini", **kw: _rb().chat_model(model, **kw),
        ReasonBlocks.chat_model,
    ),
    "ReasonBlocks.session": (lambda **kw: _rb().session(**kw), ReasonBlocks.session),
    "ReasonBlocks.ab_middleware": (
        lambda **kw: _rb().ab_middleware(**({"experiment_id": "e"} | kw)),
        ReasonBlocks.ab_middleware,
    ),
    "ReasonBlocksConfig": (ReasonBlocksConfig, ReasonBlocksConfig),
    "configure": (configure, configure),
    "GeneralMonitorMiddleware": (GeneralMonitorMiddleware, GeneralMonitorMiddleware),
    "TokenSavingMiddleware": (TokenSavingMiddleware, TokenSavingMiddleware),
    "JudgeScorer": (lambda **kw: JudgeScorer(**({"ask": _ask} | kw)), JudgeScorer),
    "PilotScorer": (PilotScorer, PilotScorer),
    "assign_arm": (lambda **kw: assign_arm(**({"experiment_id": "e", "unit_id": "u"} | kw)), assign_arm),
}

#: What the public face exports that is not a constructor with arguments to check, and why.
NOT_CONSTRUCTORS = {
    "FSMState": "an enum",
    "Scorer": "a protocol",
    "RunFields": "a value type (the run keywords are checked where they are given: middleware, session)",
    "ScorerStep": "a value type a scorer receives",
    "StepDecision": "a value type the session returns",
    "StepLogEntry": "a value type the session returns",
    "TokenSavingStats": "a value type the middleware returns",
    "agent_key": "a function of two strings",
    "was_stopped": "a predicate over a state",
    "handle_sigterm": "installs a handler; no argument to check",
    "make_anthropic_classifier": "a factory over a client object",
    "build_middleware": "ReasonBlocks' compatibility path; its ReasonBlocks and config are checked where built",
    "replay": "reads trace files; the CLI checks its inputs (rb-otel replay)",
    "evaluate": "reads trace files; the CLI checks its inputs (rb-otel evaluate)",
    "train": "reads trace files; the CLI checks its inputs (rb-otel train)",
    "render_report": "reads trace files; the CLI checks its inputs (rb-otel report)",
    "ab_report": "reads trace files; the CLI checks its inputs (rb-otel ab-report)",
}

_STR = [3, b"bytes"]
_BOOL = ["yes", 1, None]
_OPTIONAL_BOOL = ["yes", 1]
_SECONDS = ["fast", -1, NAN, INF, True]


def _config_fields(kind: str) -> list[str]:
    return [name for name, annotation in ReasonBlocksConfig.__annotations__.items() if annotation == kind]


#: constructor -> keyword -> values it must refuse, naming the keyword.
BAD: dict[str, dict[str, list[Any]]] = {
    "ReasonBlocks": {
        "api_key": _STR,
        "base_url": _STR,
        "steering_budget_s": [*_SECONDS, 0],
        "export_runs_to_api": _BOOL,
        "task_profile": [3, "", "no_such_profile"],
        "fsm_thresholds": [3, "slow", {"no_such_threshold": 1}],
        "model_routing": [3, {"BOGUS": "a:b"}, {"INIT": "a:b"}],
        "token_budget": ["many", 0, -5, 1.5, True],
        "e_traces_enabled": _BOOL,
        "monitor_weights": [3, {"x": "y"}, {"semantic_loop": "high"}, {"semantic_loop": 2}, {"semantic_loop": NAN}],
        "monitor_backend": [3, "local"],
        "pattern_store": [3, "memory"],
        "scorer": [3, "no_such_scorer"],
        "pilot_model": [3],
        "baselines": [3],
        "agent_kind": [3, "robot"],
        "tracer_provider": ["x", 3],
        "meter_provider": ["x", 3],
        "logger_provider": ["x", 3],
        "capture_content": [3, 1.5],
        "telemetry_enabled": _BOOL,
        "telemetry_batch_window": _SECONDS,
        "evaluation_events": [3, "nowhere"],
        "completion_hook": [3, "upload"],
        "live_streaming_enabled": _OPTIONAL_BOOL,
        "monitor_names": [3, "loop", [3]],
    },
    "ReasonBlocks.middleware": {
        "run_id": [3],
        "agent_name": _STR,
        "task": _STR,
        "framework": _STR,
        "model": _STR,
        "codebase_id": _STR,
        "org_id": _STR,
        "project_id": _STR,
        "metadata": [3, "x"],
        "step_log_in_state": _BOOL,
        "on_skip": [3, "explode"],
        "steer": _BOOL,
        "_experiment": [],  # private: ab_middleware's own
    },
    "ReasonBlocks.chat_model": {"model": [3, None]},
    "ReasonBlocks.session": {
        "run_id": [3],
        "tools": [3, "bash"],
        "agent_name": _STR,
        "task": _STR,
        "framework": _STR,
        "model": _STR,
    },
    "ReasonBlocks.ab_middleware": {"experiment_id": [3, ""], "unit_id": [3], "on_fraction": ["half", -0.1, 1.5]},
    "ReasonBlocksConfig": {
        **dict.fromkeys(_config_fields("bool"), _BOOL),
        **{f: ["many", -1, 1.5, True] for f in _config_fields("int")},
        **{f: ["high", -0.1, 1.5, NAN] for f in _config_fields("float")},
        "e1_top_k": [0, "many"],
        "e2_top_k": [0, "many"],
        "e3_max_patterns": [0, "many"],
        "monitor_task_profile": [3, "", "no_such_profile"],
        "monitor_weights": [3, {"x": "y"}, {"semantic_loop": 2}],
        "ts_signals_fn": [3, "signals"],
        "ts_perplexity_classifier": [3, "classifier"],
    },
    "configure": {
        "service_name": [3],
        "traces_file": [3, ""],
        "metrics_file": [3, ""],
        "prometheus_port": [99999, -1, 70000, "9464", 1.5, True],
        "metric_interval_ms": ["often", 0, -5],
        "fresh_files": _BOOL,
        "export_timeout_s": [*_SECONDS, 0],
        "handle_sigterm": _BOOL,
        "export_retry_s": _SECONDS,
        "spool": [3, b"bytes", ""],
    },
    "GeneralMonitorMiddleware": {
        "max_tool_calls": ["many", 0],
        "pack": [3, "v2"],
        "verify_tools": [3, "pytest"],
        "submit_tools": [3, "done"],
        "cooldown": ["x", 0],
    },
    "TokenSavingMiddleware": {
        "compress_threshold_chars": ["x", -1],
        "head_keep_chars": ["x", -1],
        "tail_keep_chars": ["x", -1],
        "keep_recent_tool_messages": ["x", -1],
        "early_exit_min_call_index": ["x", -1],
        "early_exit_text": [3, ""],
        "signals_fn": [3],
        "enable_compression": _BOOL,
        "enable_early_exit": _BOOL,
        "enable_perplexity_compression": _BOOL,
        "perplexity_classifier": [3],
        "perplexity_recent_cutoff": ["x", -1],
        "perplexity_mid_cutoff": ["x", -1],
        "perplexity_keep_ratio_mid": ["x", 1.5],
        "perplexity_keep_ratio_old": ["x", -0.5],
        "perplexity_window_words": ["x", 0],
        "perplexity_min_content_words": ["x", -1],
    },
    "JudgeScorer": {
        "ask": [3, "ask"],
        "every": ["x", 0],
        "window": ["x", 0],
        "weight": ["x", 1.5, -0.1, NAN],
        "base": [3, "no_such_scorer"],
        "preview_chars": ["x", 0],
    },
    "PilotScorer": {
        "model": [3],
        "baselines": [3, "bogus://x"],
        "agent_kind": [3, "robot"],
        "learned": _BOOL,
    },
    "assign_arm": {"experiment_id": [3, ""], "unit_id": [3, ""], "on_fraction": ["half", 2, NAN]},
}


def _keywords(signature_of: Callable[..., object]) -> set[str]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_ONLY)
    return {p.name for p in inspect.signature(signature_of).parameters.values() if p.kind in kinds} - {"self"}


def test_every_keyword_of_every_constructor_has_an_entry() -> None:
    missing = {
        name: sorted(_keywords(signature_of) ^ set(BAD[name])) for name, (_, signature_of) in CONSTRUCTORS.items()
    }
    assert {name: keys for name, keys in missing.items() if keys} == {}


def test_every_public_name_is_a_checked_constructor_or_said_why_not() -> None:
    public = {name for name in rb_otel.__all__ if callable(getattr(rb_otel, name))}
    covered = {name.split(".")[0] for name in CONSTRUCTORS}
    assert public - covered - set(NOT_CONSTRUCTORS) == set()
    assert set(NOT_CONSTRUCTORS) <= public  # no stale reason


def _cases() -> list[Any]:
    cases = []
    for name, keywords in BAD.items():
        for keyword, values in keywords.items():
            for value in values:
                cases.append(pytest.param(name, keyword, value, id=f"{name}-{keyword}-{value!r}"[:90]))
    return cases


def _refuses(name: str, keyword: str, value: object) -> Exception:
    call, _ = CONSTRUCTORS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # ReasonBlocks' compatibility arguments warn
        logging.disable(logging.WARNING)
        try:
            with pytest.raises((TypeError, ValueError)) as caught:
                call(**{keyword: value})
        finally:
            logging.disable(logging.NOTSET)
    return caught.value


@pytest.mark.parametrize(("name", "keyword", "value"), _cases())
def test_a_wrong_value_is_refused_naming_its_keyword(name: str, keyword: str, value: object) -> None:
    error = _refuses(name, keyword, value)
    assert re.search(rf"\b{re.escape(keyword)}\b", str(error)), f"{type(error).__name__}: {error}"
    assert "\n" not in str(error).strip()  # one line


def test_the_issues_examples_say_what_is_accepted() -> None:
    assert str(_refuses("ReasonBlocks", "tracer_provider", "x")) == (
        "tracer_provider: expected an OpenTelemetry TracerProvider (with get_tracer()) or None, got str"
    )
    assert isinstance(_refuses("ReasonBlocks", "steering_budget_s", "fast"), TypeError)
    assert isinstance(_refuses("configure", "prometheus_port", 99999), ValueError)  # not OverflowError
    assert "semantic_loop" in str(_refuses("ReasonBlocks", "monitor_weights", {"x": "y"}))  # the known names


# -- numeric ranges ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.floats(max_value=0.0), st.just(NAN), st.just(INF), st.just(-INF)))
def test_a_steering_budget_that_is_not_a_positive_finite_number_is_refused(value: float) -> None:
    assert "steering_budget_s" in str(_refuses("ReasonBlocks", "steering_budget_s", value))


@settings(max_examples=30, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e6))
def test_a_positive_steering_budget_is_accepted(value: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            assert ReasonBlocks(steering_budget_s=value, telemetry_enabled=False).steering_budget_s == value
        finally:
            logging.disable(logging.NOTSET)


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(max_value=-1), st.integers(min_value=65536)))
def test_a_port_outside_0_to_65535_is_refused_before_any_work(value: int) -> None:
    error = _refuses("configure", "prometheus_port", value)
    assert str(error) == f"prometheus_port: expected a port in 1-65535 (0: any free port), got {value}"


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["semantic_loop", "late_sprawl", "claim_contradiction"]),
        st.one_of(st.floats(max_value=-1e-9), st.floats(min_value=1.000001), st.just(NAN)),
        min_size=1,
    )
)
def test_a_monitor_weight_outside_0_to_1_is_refused_with_its_monitor(weights: dict[str, float]) -> None:
    error = _refuses("ReasonBlocks", "monitor_weights", weights)
    assert re.search(r"monitor_weights\['\w+'\]: expected a weight in \[0, 1\]", str(error))


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["semantic_loop", "late_sprawl"]), st.floats(0, 1), min_size=1))
def test_monitor_weights_in_range_are_kept(weights: dict[str, float]) -> None:
    rb = ReasonBlocks(monitor_weights=weights, telemetry_enabled=False)
    assert rb.monitor_weights == weights
