"""Model and tool calls in flight: the one way integrations reach OpenTelemetry for a call.

In the style of ``opentelemetry-util-genai``: :meth:`RunRecorder.start_chat` / :meth:`RunRecorder.start_tool`
return an invocation that owns its span and the context token that makes the span current while the call runs
(so a provider SDK's own spans nest under it), and the caller ends it exactly once:

* ``stop(...)``: the call returned; the span ends now. A ``chat`` invocation's ``stop`` takes the completed step
  (what ``SteeringSession.end_step`` returned), so the span carries the step's final state, tokens and tool calls
  and the step is measured with it; the session's own ``step`` event leaves a step with a live call alone.
* ``fail(error)``: the call raised; the span ends with the error (the caller re-raises it unchanged).
* ``interrupt(...)``: control flow (a graph interrupt), not an error; the span ends without an error status.

A second end is ignored, and the context is restored however the call ended. None of these raise.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from opentelemetry import context as otel_context

from rb_otel.telemetry.attributes import ChatResponse
from rb_otel.telemetry.spans import ToolCall
from rb_otel.types import StepLogEntry

__all__ = ["ChatInvocation", "ToolInvocation"]


class _Owner(Protocol):
    """What an invocation needs from the run that opened it (``RunRecorder``)."""

    def _chat_stopped(
        self, step: int, response: ChatResponse | None, entry: StepLogEntry | None, end_time: float | None
    ) -> None: ...

    def _chat_failed(self, step: int, error: BaseException) -> None: ...

    def _chat_interrupted(self, entry: StepLogEntry, steering_ms: float | None) -> None: ...

    def _end_tool(
        self,
        call: ToolCall,
        *,
        result: Any = None,
        error: BaseException | str | None = None,
        end_time: float | None = None,
    ) -> None: ...


def _detach(token: object | None) -> None:
    if token is None:
        return
    with contextlib.suppress(Exception):  # detaching in another context (an abandoned generator) is harmless
        otel_context.detach(token)  # type: ignore[arg-type]


class _Invocation:
    """What both kinds share: the recorder, the context token, and ending exactly once."""

    __slots__ = ("_owner", "_token", "ended")

    def __init__(self, recorder: _Owner, context: otel_context.Context | None) -> None:
        self._owner = recorder
        self.ended = False
        self._token = otel_context.attach(context) if context is not None else None

    def _end(self) -> bool:
        """Restore the context; ``False`` if this invocation had already ended."""
        if self.ended:
            return False
        self.ended = True
        _detach(self._token)
        self._token = None
        return True


class ChatInvocation(_Invocation):
    """One model call of a run, from the steering decision to the step it completes."""

    __slots__ = ("step",)

    def __init__(self, recorder: _Owner, step: int, context: otel_context.Context | None) -> None:
        super().__init__(recorder, context)
        self.step = step

    def stop(
        self,
        response: ChatResponse | None = None,
        *,
        step: StepLogEntry | None = None,
        end_time: float | None = None,
    ) -> None:
        """The model returned: end the span with ``response`` (what the provider reported) and record ``step``,
        the completed step (what ``end_step`` returned; without it, the step the call was opened with, as it is
        now). ``end_time`` (seconds, wall clock) is when the model answered, for an adapter that learns of it
        later."""
        if self._end():
            self._owner._chat_stopped(self.step, response, step, end_time)

    def fail(self, error: BaseException) -> None:
        """The model raised ``error``: end the span with it now."""
        if self._end():
            self._owner._chat_failed(self.step, error)

    def interrupt(self, entry: StepLogEntry, *, steering_ms: float | None = None) -> None:
        """The call was interrupted (control flow): record ``entry`` as a plain step, no error."""
        if self._end():
            self._owner._chat_interrupted(entry, steering_ms)


class ToolInvocation(_Invocation):
    """One tool call of a run; its ``execute_tool`` span is current while it runs unless started detached."""

    __slots__ = ("_call",)

    def __init__(self, recorder: _Owner, call: ToolCall, context: otel_context.Context | None) -> None:
        super().__init__(recorder, context)
        self._call = call

    @property
    def name(self) -> str:
        return self._call.name

    def stop(self, result: Any = None, *, error: str | None = None, end_time: float | None = None) -> None:
        """The tool returned ``result``; ``error`` is the error text it returned instead (a failed tool result)."""
        if self._end():
            self._owner._end_tool(self._call, result=result, error=error, end_time=end_time)

    def fail(self, error: BaseException | str, *, end_time: float | None = None) -> None:
        """The tool raised ``error`` (or a record says it failed with this text)."""
        if self._end():
            self._owner._end_tool(self._call, error=error, end_time=end_time)

    def interrupt(self) -> None:
        """The tool was interrupted (control flow): end the span without an error."""
        if self._end():
            self._owner._end_tool(self._call)
