"""rb_otel: ReasonBlocks-style steering for LLM agents, exported as OpenTelemetry.

What users build with: :class:`ReasonBlocks` (every adapter is a method of it: ``rb.middleware()``,
``rb.chat_model()``, ``rb.anthropic_loop()``, ``rb.openai_model()``, ``rb.openai_hooks()``, ``rb.claude_agent()``,
``rb.session()``), its configuration and value types, the scorers, the companion middleware, and the library
functions behind every command (:func:`configure`, :func:`replay`, :func:`evaluate`, :func:`train`,
:func:`render_report`, :func:`ab_report`). The engine (``SteeringSession``, ``DifficultyFSM``, the injections,
monitors and pattern stores) lives in :mod:`rb_otel.steering`.

Names are imported lazily (PEP 562), so ``import rb_otel`` stays cheap and never touches LangChain or
OpenTelemetry until a name that needs them is used. Importing never installs any provider. Names moved in this
release still work from here, with a ``DeprecationWarning`` naming their new home.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from rb_otel._version import __version__

_LAZY: dict[str, str] = {
    # the facade and its configuration
    "ReasonBlocks": "rb_otel.facade.reasonblocks",
    "ReasonBlocksConfig": "rb_otel.config",
    "build_middleware": "rb_otel.assembly",
    # value types
    "FSMState": "rb_otel.types",
    "RunFields": "rb_otel.types",
    "StepDecision": "rb_otel.types",
    "StepLogEntry": "rb_otel.types",
    # scorers
    "JudgeScorer": "rb_otel.steering.judge",
    "PilotScorer": "rb_otel.backends.pilot",
    "Scorer": "rb_otel.steering.scorers",
    "ScorerStep": "rb_otel.steering.scorers",
    "agent_key": "rb_otel.steering.agent_keys",
    # companions
    "GeneralMonitorMiddleware": "rb_otel.integrations.langchain.general_monitor",
    "TokenSavingMiddleware": "rb_otel.integrations.langchain.token_saving",
    "TokenSavingStats": "rb_otel.integrations.langchain.token_saving",
    "make_anthropic_classifier": "rb_otel.backends.anthropic_classifier",
    "was_stopped": "rb_otel.integrations.langchain.stopping",
    "assign_arm": "rb_otel.ab.assign",
    # the library functions behind the commands
    "configure": "rb_otel.telemetry.setup",
    "handle_sigterm": "rb_otel.process_exit",
    "replay": "rb_otel.importers.replay",
    "evaluate": "rb_otel.evaluation",
    "train": "rb_otel.training",
    "render_report": "rb_otel.report",
    "ab_report": "rb_otel.ab.experiment_report",
}

#: Names that lived here in the previous release: ``name -> (module, attribute, what to use instead)``.
_MOVED: dict[str, tuple[str, str, str]] = {
    **{
        name: ("rb_otel.steering", name, f"rb_otel.steering.{name}")
        for name in (
            "BaseInjection",
            "DifficultyFSM",
            "E1Injection",
            "E2Injection",
            "E3Injection",
            "HashingEmbeddings",
            "InMemoryPatternStore",
            "LocalMonitorBackend",
            "MonitorBackend",
            "MonitorSteeringInjection",
            "Pattern",
            "PatternStore",
            "SteeringSession",
            "TraceStateManager",
            "clear_caches",
            "create_injections",
            "render_pattern",
            "score_step",
        )
    },
    **{
        name: ("rb_otel.types", name, f"rb_otel.types.{name}")
        for name in ("ETrace", "MonitorEvaluation", "PendingInjection", "StepRecord", "TraceState")
    },
    "ReasonBlocksMiddleware": (
        "rb_otel.integrations.langchain",
        "ReasonBlocksMiddleware",
        "rb.middleware() (the class: rb_otel.integrations.langchain.ReasonBlocksMiddleware)",
    ),
    "build_steps_from_messages": (
        "rb_otel.integrations.langchain.token_saving",
        "build_steps_from_messages",
        "rb_otel.integrations.langchain.token_saving.build_steps_from_messages",
    ),
    "compress_tool_output": (
        "rb_otel.steering.token_saving",
        "compress_tool_output",
        "rb_otel.steering.token_saving.compress_tool_output",
    ),
    "loop_signals": ("rb_otel.steering.token_saving", "loop_signals", "rb_otel.steering.token_saving.loop_signals"),
    "run_messages_agent_loop": (
        "rb_otel.integrations.anthropic",
        "run_messages_agent_loop",
        "rb.anthropic_loop(client, ...)",
    ),
    "arun_messages_agent_loop": (
        "rb_otel.integrations.anthropic",
        "arun_messages_agent_loop",
        "await rb.anthropic_loop_async(client, ...)",
    ),
    "claude_agent_telemetry": (
        "rb_otel.integrations.claude_agent",
        "claude_agent_telemetry",
        "rb.claude_agent(query(...), ...)",
    ),
}

__all__ = [
    "FSMState",
    "GeneralMonitorMiddleware",
    "JudgeScorer",
    "PilotScorer",
    "ReasonBlocks",
    "ReasonBlocksConfig",
    "RunFields",
    "Scorer",
    "ScorerStep",
    "StepDecision",
    "StepLogEntry",
    "TokenSavingMiddleware",
    "TokenSavingStats",
    "__version__",
    "ab_report",
    "agent_key",
    "assign_arm",
    "build_middleware",
    "configure",
    "evaluate",
    "handle_sigterm",
    "make_anthropic_classifier",
    "render_report",
    "replay",
    "train",
    "was_stopped",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    moved = _MOVED.get(name)
    if moved is not None:
        home, attribute, instead = moved
        warnings.warn(
            f"rb_otel.{name} moved: use {instead} (the old name works for this release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), attribute)  # not cached: every use warns
    raise AttributeError(f"module 'rb_otel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from rb_otel.ab.assign import assign_arm
    from rb_otel.ab.experiment_report import ab_report
    from rb_otel.assembly import build_middleware
    from rb_otel.backends.anthropic_classifier import make_anthropic_classifier
    from rb_otel.backends.pilot import PilotScorer
    from rb_otel.config import ReasonBlocksConfig
    from rb_otel.evaluation import evaluate
    from rb_otel.facade.reasonblocks import ReasonBlocks
    from rb_otel.importers.replay import replay
    from rb_otel.integrations.langchain.general_monitor import GeneralMonitorMiddleware
    from rb_otel.integrations.langchain.stopping import was_stopped
    from rb_otel.integrations.langchain.token_saving import TokenSavingMiddleware, TokenSavingStats
    from rb_otel.process_exit import handle_sigterm
    from rb_otel.report import render_report
    from rb_otel.steering.agent_keys import agent_key
    from rb_otel.steering.judge import JudgeScorer
    from rb_otel.steering.scorers import Scorer, ScorerStep
    from rb_otel.telemetry.setup import configure
    from rb_otel.training import train
    from rb_otel.types import FSMState, RunFields, StepDecision, StepLogEntry
