"""The metric side of one run: every measurement ``RunRecorder`` makes, with the contract's bounded labels.

Measurements of finished work (steps, model and tool calls) go through the run's :class:`Batch`; state
measurements (active runs, transitions, SKIP, run end) are recorded at once, since dashboards and alerts read them.
"""

from __future__ import annotations

from opentelemetry import context as otel_context

from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import Attributes, ChatResponse
from rb_otel.telemetry.batch import Batch
from rb_otel.telemetry.instruments import Instruments
from rb_otel.types import ExperimentArm, FSMState, StepLogEntry

__all__ = ["RunMetrics"]


class _StepLabels:
    """The label sets of one step's measurements (never mutated: the SDK copies what it keeps)."""

    __slots__ = ("input_tokens", "operation", "output_tokens", "state", "steps")

    def __init__(self, agent: Attributes, state: str, provider: str, request_model: str, response_model: str) -> None:
        self.steps: Attributes = {**agent, n.RB_FSM_STATE: state, n.GEN_AI_REQUEST_MODEL: request_model}
        self.state: Attributes = {**agent, n.RB_FSM_STATE: state}
        self.operation: Attributes = {
            n.GEN_AI_OPERATION_NAME: n.OP_CHAT,
            n.GEN_AI_PROVIDER_NAME: provider,
            n.GEN_AI_REQUEST_MODEL: request_model,
            n.RB_FSM_STATE: state,
        }
        if response_model:  # as the semantic conventions label client metrics, when the provider reports it
            self.operation[n.GEN_AI_RESPONSE_MODEL] = response_model
        self.input_tokens: Attributes = {**self.operation, n.GEN_AI_TOKEN_TYPE: "input"}
        self.output_tokens: Attributes = {**self.operation, n.GEN_AI_TOKEN_TYPE: "output"}


class RunMetrics:
    """Records a run's measurements; labels never include a run id (telemetry.md)."""

    __slots__ = ("_agent", "_batch", "_experiment", "_inst", "_labels")

    def __init__(
        self, instruments: Instruments, agent_name: str, batch: Batch, *, experiment: ExperimentArm | None = None
    ) -> None:
        self._inst = instruments
        self._agent: Attributes = {n.GEN_AI_AGENT_NAME: agent_name}
        self._labels: dict[tuple[str, str, str, str], _StepLabels] = {}
        self._batch = batch
        # the run-level metrics of an experiment's runs carry its (bounded) id and the arm
        self._experiment: Attributes = {}
        if experiment is not None:
            self._experiment = {
                n.RB_EXPERIMENT_ID: instruments.experiment_label(experiment.experiment_id),
                n.RB_EXPERIMENT_ARM: experiment.arm,
            }

    def outcome_recorded(self, outcome: str) -> None:
        """The run's outcome was recorded (``rb.outcomes.recorded``, labelled with the run's agent)."""
        self._inst.outcome_recorded(outcome, str(self._agent[n.GEN_AI_AGENT_NAME]))

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
        response_model = response.response_model if response is not None else ""
        labels = self._step_labels(entry.fsm_state, provider, request_model, response_model)
        count, record = self._batch.add, self._batch.record
        count(inst.steps, 1, labels.steps, context)
        if entry.difficulty is not None:
            record(inst.difficulty, entry.difficulty, labels.state, context)
        for monitor in entry.monitors_fired:
            count(inst.monitor_fired, 1, {**agent, n.RB_MONITOR: monitor}, context)
        sources = entry.injection_sources
        for source in dict.fromkeys(sources):  # one add per source, by its count (E3 queues several at once)
            count(inst.injections, sources.count(source), {**agent, n.RB_INJECTION_SOURCE: source}, context)
        if steering_ms is not None:
            record(inst.steering_duration, steering_ms / 1000.0, agent, context)
        self._call(labels, duration, response, context)

    def model_call(
        self,
        *,
        state: FSMState,
        provider: str,
        request_model: str,
        duration: float,
        response: ChatResponse | None,
        context: otel_context.Context,
    ) -> None:
        """A model call that is not a step (another middleware's, a tool's): its duration and token usage."""
        labels = self._step_labels(state.value, provider, request_model, response.response_model if response else "")
        self._call(labels, duration, response, context)

    def _call(
        self, labels: _StepLabels, duration: float, response: ChatResponse | None, context: otel_context.Context
    ) -> None:
        """What every model call records, a step or not: ``gen_ai.client.operation.duration`` and the usage."""
        record = self._batch.record
        record(self._inst.operation_duration, duration, labels.operation, context)
        if response is not None:
            if response.input_tokens is not None:
                record(self._inst.token_usage, response.input_tokens, labels.input_tokens, context)
            if response.output_tokens is not None:
                record(self._inst.token_usage, response.output_tokens, labels.output_tokens, context)

    def _step_labels(self, state: str, provider: str, request_model: str, response_model: str) -> _StepLabels:
        # The same few label sets repeat on every step of a run: build them once per (state, provider, models).
        key = (state, provider, request_model, response_model)
        labels = self._labels.get(key)
        if labels is None:
            labels = self._labels[key] = _StepLabels(self._agent, state, provider, request_model, response_model)
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
        self._batch.record(self._inst.operation_duration, duration, labels, context)

    def tool(self, name: str, error_type: str | None, duration: float, context: otel_context.Context) -> None:
        labels: Attributes = {**self._agent, n.GEN_AI_TOOL_NAME: name, n.GEN_AI_TOOL_TYPE: n.TOOL_TYPE_FUNCTION}
        if error_type:
            labels[n.ERROR_TYPE] = error_type
        self._batch.record(self._inst.execute_tool_duration, duration, labels, context)

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
        tokens: int | None,
        context: otel_context.Context | None,
    ) -> None:
        """A run ended; ``tokens`` is ``None`` when none of its model calls reported usage (nothing recorded)."""
        agent, run = self._agent, {**self._agent, **self._experiment}
        self._inst.runs_active.add(-1, {**agent, n.RB_FSM_STATE: state.value})
        self._inst.runs.add(1, {**run, n.RB_OUTCOME: outcome_label, n.RB_MAX_STATE: max_state.value}, context=context)
        self._inst.invoke_agent_duration.record(duration, {**run, n.RB_OUTCOME: outcome_label}, context=context)
        if tokens is not None:
            self._inst.run_tokens.record(tokens, {**run, n.RB_OUTCOME: outcome_label}, context=context)

    def token_saving(self, chars_saved: int) -> None:
        """Characters ``TokenSavingMiddleware`` removed from this run's history (added as they are removed)."""
        if chars_saved > 0:
            self._inst.token_saving_chars.add(chars_saved, {**self._agent, **self._experiment})
