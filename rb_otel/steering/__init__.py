"""The steering engine, pure: scoring, the FSM, trace state, monitors, E-traces, rendering and
``SteeringSession``, the pipeline for one run that every adapter drives.

Its parts: :mod:`~rb_otel.steering.scoring` (the heuristic, the scorers, the judge), :mod:`~rb_otel.steering.pilot`
(the pilot and its per-agent baselines), :mod:`~rb_otel.steering.monitors`, :mod:`~rb_otel.steering.etraces`, and
beside them the session and its emitter interface, the FSM, the guidance pipeline (injections, guardrails,
rendering) and routing. Nothing in this package imports LangChain or OpenTelemetry, starts a thread or reads the
environment (docs/architecture.md, "The pure core"). Most code builds with :class:`rb_otel.ReasonBlocks`; these are
the parts, for your own agent loop (``SteeringSession``) and your own monitors, pattern stores and injections.
"""

from rb_otel.steering.etraces import HashingEmbeddings, InMemoryPatternStore, Pattern, PatternStore
from rb_otel.steering.fsm import DifficultyFSM, FSMThresholds
from rb_otel.steering.injections import (
    BaseInjection,
    E1Injection,
    E2Injection,
    E3Injection,
    MonitorSteeringInjection,
    StepContext,
    create_injections,
)
from rb_otel.steering.memo import clear_caches
from rb_otel.steering.monitors import LocalMonitorBackend, MonitorBackend
from rb_otel.steering.rendering import render_pattern, system_blocks
from rb_otel.steering.scoring.heuristic import score_step
from rb_otel.steering.session import SteeringSession, StepEmitter
from rb_otel.steering.state import TraceStateManager

__all__ = [
    "BaseInjection",
    "DifficultyFSM",
    "E1Injection",
    "E2Injection",
    "E3Injection",
    "FSMThresholds",
    "HashingEmbeddings",
    "InMemoryPatternStore",
    "LocalMonitorBackend",
    "MonitorBackend",
    "MonitorSteeringInjection",
    "Pattern",
    "PatternStore",
    "SteeringSession",
    "StepContext",
    "StepEmitter",
    "TraceStateManager",
    "clear_caches",
    "create_injections",
    "render_pattern",
    "score_step",
    "system_blocks",
]
