"""The pure steering core: scoring, FSM, trace state, monitors, E-traces, rendering and ``SteeringSession``.

Nothing in this package imports LangChain or OpenTelemetry.
"""

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
from rb_otel.steering.rendering import render_pattern, system_blocks
from rb_otel.steering.scoring import score_step
from rb_otel.steering.session import SteeringSession, StepEmitter
from rb_otel.steering.state import TraceStateManager

__all__ = [
    "BaseInjection",
    "DifficultyFSM",
    "E1Injection",
    "E2Injection",
    "E3Injection",
    "FSMThresholds",
    "MonitorSteeringInjection",
    "SteeringSession",
    "StepContext",
    "StepEmitter",
    "TraceStateManager",
    "create_injections",
    "render_pattern",
    "score_step",
    "system_blocks",
]
