"""rb_otel: ReasonBlocks-style steering for LangChain 1.x agents, exported as OpenTelemetry.

Public names are imported lazily (PEP 562), so ``import rb_otel`` stays cheap and never touches LangChain or
OpenTelemetry until a name that needs them is used. Importing never installs any provider.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rb_otel._version import __version__

_LAZY: dict[str, str] = {
    # value types
    "ETrace": "rb_otel.types",
    "FSMState": "rb_otel.types",
    "MonitorEvaluation": "rb_otel.types",
    "PendingInjection": "rb_otel.types",
    "RunFields": "rb_otel.types",
    "StepDecision": "rb_otel.types",
    "StepLogEntry": "rb_otel.types",
    "StepRecord": "rb_otel.types",
    "TraceState": "rb_otel.types",
    # steering core
    "BaseInjection": "rb_otel.steering.injections",
    "DifficultyFSM": "rb_otel.steering.fsm",
    "E1Injection": "rb_otel.steering.injections",
    "E2Injection": "rb_otel.steering.injections",
    "E3Injection": "rb_otel.steering.injections",
    "HashingEmbeddings": "rb_otel.steering.etraces",
    "InMemoryPatternStore": "rb_otel.steering.etraces",
    "LocalMonitorBackend": "rb_otel.steering.monitors",
    "MonitorBackend": "rb_otel.steering.monitors",
    "MonitorSteeringInjection": "rb_otel.steering.injections",
    "Pattern": "rb_otel.steering.etraces",
    "PatternStore": "rb_otel.steering.etraces",
    "SteeringSession": "rb_otel.steering.session",
    "TraceStateManager": "rb_otel.steering.state",
    "create_injections": "rb_otel.steering.injections",
    "render_pattern": "rb_otel.steering.rendering",
    "score_step": "rb_otel.steering.scoring",
    "clear_caches": "rb_otel.steering.memo",
    "JudgeScorer": "rb_otel.steering.judge",
    "PilotScorer": "rb_otel.steering.pilot",
    "Scorer": "rb_otel.steering.scorers",
    "ScorerStep": "rb_otel.steering.scorers",
    "agent_key": "rb_otel.steering.baselines",
    # the LangChain face
    "ReasonBlocks": "rb_otel.reasonblocks",
    "ReasonBlocksMiddleware": "rb_otel.integrations.langchain",
    "TokenSavingMiddleware": "rb_otel.integrations.langchain.token_saving",
    "TokenSavingStats": "rb_otel.integrations.langchain.token_saving",
    "build_steps_from_messages": "rb_otel.integrations.langchain.token_saving",
    "GeneralMonitorMiddleware": "rb_otel.integrations.langchain.general_monitor",
    "ReasonBlocksConfig": "rb_otel.assembly",
    "build_middleware": "rb_otel.assembly",
    "compress_tool_output": "rb_otel.steering.token_saving",
    "loop_signals": "rb_otel.steering.token_saving",
    "make_anthropic_classifier": "rb_otel.backends.anthropic_classifier",
    # A/B experiments
    "assign_arm": "rb_otel.ab.assign",
    # other frameworks
    "run_messages_agent_loop": "rb_otel.integrations.anthropic",
    "arun_messages_agent_loop": "rb_otel.integrations.anthropic",
    "claude_agent_telemetry": "rb_otel.integrations.claude_agent",
}

__all__ = [
    "BaseInjection",
    "DifficultyFSM",
    "E1Injection",
    "E2Injection",
    "E3Injection",
    "ETrace",
    "FSMState",
    "GeneralMonitorMiddleware",
    "HashingEmbeddings",
    "InMemoryPatternStore",
    "JudgeScorer",
    "LocalMonitorBackend",
    "MonitorBackend",
    "MonitorEvaluation",
    "MonitorSteeringInjection",
    "Pattern",
    "PatternStore",
    "PendingInjection",
    "PilotScorer",
    "ReasonBlocks",
    "ReasonBlocksConfig",
    "ReasonBlocksMiddleware",
    "RunFields",
    "Scorer",
    "ScorerStep",
    "SteeringSession",
    "StepDecision",
    "StepLogEntry",
    "StepRecord",
    "TokenSavingMiddleware",
    "TokenSavingStats",
    "TraceState",
    "TraceStateManager",
    "__version__",
    "agent_key",
    "arun_messages_agent_loop",
    "assign_arm",
    "build_middleware",
    "build_steps_from_messages",
    "claude_agent_telemetry",
    "clear_caches",
    "compress_tool_output",
    "create_injections",
    "loop_signals",
    "make_anthropic_classifier",
    "render_pattern",
    "run_messages_agent_loop",
    "score_step",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rb_otel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from rb_otel.ab.assign import assign_arm
    from rb_otel.assembly import ReasonBlocksConfig, build_middleware
    from rb_otel.backends.anthropic_classifier import make_anthropic_classifier
    from rb_otel.integrations.anthropic import arun_messages_agent_loop, run_messages_agent_loop
    from rb_otel.integrations.claude_agent import claude_agent_telemetry
    from rb_otel.integrations.langchain import ReasonBlocksMiddleware
    from rb_otel.integrations.langchain.general_monitor import GeneralMonitorMiddleware
    from rb_otel.integrations.langchain.token_saving import (
        TokenSavingMiddleware,
        TokenSavingStats,
        build_steps_from_messages,
    )
    from rb_otel.reasonblocks import ReasonBlocks
    from rb_otel.steering.baselines import agent_key
    from rb_otel.steering.etraces import HashingEmbeddings, InMemoryPatternStore, Pattern, PatternStore
    from rb_otel.steering.fsm import DifficultyFSM
    from rb_otel.steering.injections import (
        BaseInjection,
        E1Injection,
        E2Injection,
        E3Injection,
        MonitorSteeringInjection,
        create_injections,
    )
    from rb_otel.steering.judge import JudgeScorer
    from rb_otel.steering.memo import clear_caches
    from rb_otel.steering.monitors import LocalMonitorBackend, MonitorBackend
    from rb_otel.steering.pilot import PilotScorer
    from rb_otel.steering.rendering import render_pattern
    from rb_otel.steering.scorers import Scorer, ScorerStep
    from rb_otel.steering.scoring import score_step
    from rb_otel.steering.session import SteeringSession
    from rb_otel.steering.state import TraceStateManager
    from rb_otel.steering.token_saving import compress_tool_output, loop_signals
    from rb_otel.types import (
        ETrace,
        FSMState,
        MonitorEvaluation,
        PendingInjection,
        RunFields,
        StepDecision,
        StepLogEntry,
        StepRecord,
        TraceState,
    )
