"""The metric side of one run: every measurement ``RunRecorder`` makes, with the contract's bounded labels.

Measurements of finished work (steps, model and tool calls) are batched while a run steps quickly: recording
through the SDK costs several times more when its code is cold, and inside an agent it always is by the time
the next step comes (LangGraph's work in between evicts it from the CPU caches). So a run that recorded within
the last ``batch_window`` seconds queues them, in order, and records the queue at its next step after the window
or when it ends. A run whose steps are slower than the window (any run against a real model) records at once.
State measurements (active runs, transitions, SKIP, run end) are never queued: dashboards and alerts read them.
Each queued measurement keeps its span context, so exemplars still point at the step's own span.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from opentelemetry import context as otel_context

from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import Attributes, ChatResponse
from rb_otel.telemetry.instruments import Instruments
from rb_otel.types import FSMState, StepLogEntry

__all__ = ["DEFAULT_BATCH_WINDOW", "RunMetrics"]

#: Seconds a quickly stepping run may hold finished-work measurements before recording them.
DEFAULT_BATCH_WINDOW = 1.0

_Record = Callable[..., None]
_Queued = tuple[_Record, float, Attributes, otel_context.Context]


class _StepLabels:
    """The label sets of one step's measurements (never mutated: the SDK copies what it keeps)."""

    __slots__ = ("input_tokens", "operation", "output_tokens", "state", "steps")

    def __init__(self, agent: Attributes, state: str, provider: str, request_model: str) -> None:
        self.steps: Attributes = {**agent, n.RB_FSM_STATE: state, n.GEN_AI_REQUEST_MODEL: request_model}
        self.state: Attributes = {**agent, n.RB_FSM_STATE: state}
        self.operation: Attributes = {
            n.GEN_AI_OPERATION_NAME: n.OP_CHAT,
            n.GEN_AI_PROVIDER_NAME: provider,
            n.GEN_AI_REQUEST_MODEL: request_model,
            n.RB_FSM_STATE: state,
        }
        self.input_tokens: Attributes = {**self.operation, n.GEN_AI_TOKEN_TYPE: "input"}
        self.output_tokens: Attributes = {**self.operation, n.GEN_AI_TOKEN_TYPE: "output"}


class RunMetrics:
    """Records a run's measurements; labels never include a run id (telemetry.md)."""

    __slots__ = ("_agent", "_batch_window", "_inst", "_labels", "_last_flush", "_queue")

    def __init__(
        self, instruments: Instruments, agent_name: str, *, batch_window: float = DEFAULT_BATCH_WINDOW
    ) -> None:
        self._inst = instruments
        self._agent: Attributes = {n.GEN_AI_AGENT_NAME: agent_name}
        self._labels: dict[tuple[str, str, str], _StepLabels] = {}
        self._batch_window = batch_window
        # A deque: parallel tool calls of one run end on several threads, and append/popleft are atomic.
        self._queue: deque[_Queued] = deque()
        self._last_flush = time.monotonic()

    @property
    def pending(self) -> int:
        """Measurements queued and not yet recorded."""
        return len(self._queue)

    def flush(self) -> None:
        """Record every queued measurement, oldest first.

        If the SDK raises, that measurement is dropped, the exception propagates and the rest stay queued.
        """
        self._last_flush = time.monotonic()
        queue = self._queue
        while queue:
            try:
                record, value, attributes, context = queue.popleft()
            except IndexError:  # another thread took the last one
                return
            record(value, attributes, context=context)

    def _settle(self) -> None:
        # Called after queueing: record now unless this run already recorded within the window.
        if time.monotonic() - self._last_flush >= self._batch_window:
            self.flush()

    def started(self, state: FSMState) -> None:
        self._inst.runs_active.add(1, {**self._agent, n.RB_FSM_STATE: state.value})

    def step(
        self,
        entry: StepLogEntry,
        *,
        provider: str,
        request_model: str,
        duration: float,
        steering_ms: float | None,
        response: ChatResponse | None,
        context: otel_context.Context,
    ) -> None:
        inst, agent = self._inst, self._agent
        labels = self._step_labels(entry.fsm_state, provider, request_model)
        queue = self._queue.append
        queue((inst.steps.add, 1, labels.steps, context))
        if entry.difficulty is not None:
            queue((inst.difficulty.record, entry.difficulty, labels.state, context))
        for monitor in entry.monitors_fired:
            queue((inst.monitor_fired.add, 1, {**agent, n.RB_MONITOR: monitor}, context))
        sources = entry.injection_sources
        for source in dict.fromkeys(sources):  # one add per source, by its count (E3 queues several at once)
            queue((inst.injections.add, sources.count(source), {**agent, n.RB_INJECTION_SOURCE: source}, context))
        if steering_ms is not None:
            queue((inst.steering_duration.record, steering_ms / 1000.0, agent, context))
        queue((inst.operation_duration.record, duration, labels.operation, context))
        if response is not None:
            if response.input_tokens is not None:
                queue((inst.token_usage.record, response.input_tokens, labels.input_tokens, context))
            if response.output_tokens is not None:
                queue((inst.token_usage.record, response.output_tokens, labels.output_tokens, context))
        self._settle()

    def _step_labels(self, state: str, provider: str, request_model: str) -> _StepLabels:
        # The same few label sets repeat on every step of a run: build them once per (state, provider, model).
        key = (state, provider, request_model)
        labels = self._labels.get(key)
        if labels is None:
            labels = self._labels[key] = _StepLabels(self._agent, state, provider, request_model)
        return labels

    def chat_failed(
        self,
        *,
        provider: str,
        request_model: str,
        state: FSMState,
        error_type: str,
        duration: float,
        context: otel_context.Context,
    ) -> None:
        labels: Attributes = {
            n.GEN_AI_OPERATION_NAME: n.OP_CHAT,
            n.GEN_AI_PROVIDER_NAME: provider,
            n.GEN_AI_REQUEST_MODEL: request_model,
            n.RB_FSM_STATE: state.value,
            n.ERROR_TYPE: error_type,
        }
        self._queue.append((self._inst.operation_duration.record, duration, labels, context))
        self._settle()

    def tool(self, name: str, error_type: str | None, duration: float, context: otel_context.Context) -> None:
        labels: Attributes = {n.GEN_AI_TOOL_NAME: name}
        if error_type:
            labels[n.ERROR_TYPE] = error_type
        self._queue.append((self._inst.execute_tool_duration.record, duration, labels, context))
        self._settle()

    def transition(self, previous: FSMState, state: FSMState, *, active: bool) -> None:
        """A state change: the transition counter, and the active-runs gauge moved unless the run ended."""
        agent = self._agent
        self._inst.transitions.add(1, {**agent, n.RB_FSM_FROM: previous.value, n.RB_FSM_TO: state.value})
        if active:
            self._inst.runs_active.add(-1, {**agent, n.RB_FSM_STATE: previous.value})
            self._inst.runs_active.add(1, {**agent, n.RB_FSM_STATE: state.value})

    def entered_skip(self) -> None:
        self._inst.runs_skip.add(1, self._agent)

    def finished(
        self,
        *,
        state: FSMState,
        outcome_label: str,
        max_state: FSMState,
        duration: float,
        context: otel_context.Context | None,
    ) -> None:
        self._batch_window = 0.0  # anything recorded after the run's end (a late step) is recorded at once
        agent = self._agent
        try:
            self.flush()
        finally:
            self._inst.runs_active.add(-1, {**agent, n.RB_FSM_STATE: state.value})
            self._inst.runs.add(
                1, {**agent, n.RB_OUTCOME: outcome_label, n.RB_MAX_STATE: max_state.value}, context=context
            )
            self._inst.invoke_agent_duration.record(duration, {**agent, n.RB_OUTCOME: outcome_label}, context=context)
