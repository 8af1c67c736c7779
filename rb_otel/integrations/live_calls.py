"""One steered model call of a non-LangChain adapter: ``begin_step``, the live ``chat`` span, ``end_step``.

The Anthropic Messages loop, the OpenAI Agents SDK model and hooks all do the same four things around a model
call; this is that sequence once, on the invocation API (``RunRecorder.start_chat`` -> ``ChatInvocation``) and the
session, so every adapter produces the spans, step log and metrics the LangChain middleware does. Recording never
raises (a failure is logged and the adapter's call goes ahead); ``begin`` runs the steering core, which the adapter
guards like the middleware does (a failure there sends the call out unmodified).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from rb_otel.steering.session import SteeringSession
from rb_otel.telemetry import ChatInvocation, ChatResponse, RunRecorder
from rb_otel.types import StepDecision, StepLogEntry

__all__ = ["LiveCall", "strip_provider"]

_log = logging.getLogger("rb_otel.integrations")


def strip_provider(model_id: str) -> str:
    """``"anthropic:claude-x"`` -> ``"claude-x"``: what a provider's own API calls the model (docs/frameworks.md,
    "Other frameworks")."""
    return model_id.split(":", 1)[1] if ":" in model_id else model_id


class LiveCall:
    """The step of one model call in flight: its decision and its live ``chat`` span.

    ``begin`` runs the steering pipeline (``thought=None`` on a run's first call); the adapter applies
    ``decision`` (guidance, routed model), calls :meth:`open` with the model it will call, calls the model, and
    ends with :meth:`succeeded` or :meth:`failed`.
    """

    __slots__ = ("_chat", "_recorder", "_started", "decision", "session")

    def __init__(self, session: SteeringSession, recorder: RunRecorder | None, decision: StepDecision) -> None:
        self.session = session
        self._recorder = recorder
        self.decision = decision
        self._chat: ChatInvocation | None = None
        self._started = time.perf_counter()

    @classmethod
    def begin(
        cls,
        session: SteeringSession,
        recorder: RunRecorder | None,
        *,
        thought: str | None,
        model_id: str,
        action: str | None = None,
        action_input: Any = None,
        observation: Any = None,
        error: bool = False,
        tokens: int = 0,
        reasoning: str = "",
    ) -> LiveCall:
        """Steer the next call (``begin_step``, whose arguments these are); ``model_id`` is the model it would use
        without routing. ``recorder`` is the run's telemetry (``None``: a session with no run span of its own)."""
        decision = session.begin_step(
            thought=thought,
            action=action,
            action_input=action_input,
            observation=observation,
            model_id=model_id,
            error=error,
            tokens=tokens,
            reasoning=reasoning,
        )
        return cls(session, recorder, decision)

    def open(self, *, request_model: str, provider: str, input_messages: Any = None, current: bool = True) -> None:
        """Open the call's ``chat`` span once the adapter knows the model it calls: current until it ends unless
        ``current=False`` (hooks that see the start and the end of a call in different contexts);
        ``input_messages`` are recorded only when content capture is on."""
        decision = self.decision
        self._started = time.perf_counter()
        if self._recorder is None:
            return
        try:
            evaluation = decision.evaluation
            self._chat = self._recorder.start_chat(
                decision.entry,
                request_model=request_model,
                provider=provider,
                steering_ms=decision.steering_ms,
                composite=evaluation.composite if evaluation else None,
                input_messages=input_messages,
                monitor_scores=evaluation.scores if evaluation else None,
                current=current,
            )
        except Exception:
            _log.warning("opening the chat span failed; continuing", exc_info=True)

    def succeeded(
        self, response: ChatResponse, *, tokens: int, tool_calls: Sequence[str], model_id: str = ""
    ) -> StepLogEntry | None:
        """The model answered: end the span with what the provider reported and complete the step."""
        latency_ms = (time.perf_counter() - self._started) * 1000.0
        entry = None
        try:
            entry = self.session.end_step(
                self.decision, model_id=model_id, tokens=tokens, tool_calls=list(tool_calls), latency_ms=latency_ms
            )
        except Exception:
            _log.warning("recording the model call failed; continuing", exc_info=True)
        if self._chat is not None:
            self._chat.stop(response, step=entry)
        return entry

    def failed(self, error: BaseException) -> None:
        """The model call raised ``error`` (the adapter re-raises it): the span ends with it, no step is logged."""
        if self._chat is not None:
            self._chat.fail(error)
        try:
            self.session.discard_step(self.decision)
        except Exception:
            _log.warning("discarding the failed step failed", exc_info=True)
