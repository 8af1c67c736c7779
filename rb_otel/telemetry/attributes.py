"""The attribute sets of rb_otel's spans, built from run info, step log entries and provider responses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.util.types import AttributeValue

from rb_otel.telemetry import names as n
from rb_otel.telemetry.content import ContentPolicy
from rb_otel.types import INJECTION_PREVIEW_CHARS, THOUGHT_PREVIEW_CHARS, ExperimentArm, RunFields, StepLogEntry

__all__ = [
    "AttributeValue",
    "Attributes",
    "ChatResponse",
    "RunInfo",
    "chat_attributes",
    "error_type_of",
    "evaluation_events",
    "outcome_label",
    "response_attributes",
]

Attributes = dict[str, AttributeValue]


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What is known about a run when it starts (the ``run_start`` payload): the caller's :class:`RunFields` and
    what the integration or importer adds."""

    run_id: str
    fields: RunFields = field(default_factory=RunFields)
    task_profile: str = "coding"
    conversation_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    synthetic_timing: bool = False
    scorer: str = "heuristic"  # what produces rb.difficulty on this run's chat spans (rb.scorer)
    experiment: ExperimentArm | None = None
    agent_kind: str = ""  # the kind of agent the pilot's default was chosen for (rb.agent.kind); "" not known
    agent_key: str = ""  # the key its baselines and learned model are looked up under (rb.agent.key); "" none

    @property
    def agent_name(self) -> str:
        return self.fields.agent_name

    def start_attributes(self) -> Attributes:
        attrs: Attributes = {
            n.GEN_AI_OPERATION_NAME: n.OP_INVOKE_AGENT,
            n.RB_RUN_ID: self.run_id,
            n.RB_FRAMEWORK: self.fields.framework,
            n.RB_TASK_PROFILE: self.task_profile,
        }
        if self.agent_name:
            attrs[n.GEN_AI_AGENT_NAME] = self.agent_name
        if self.conversation_id:
            attrs[n.GEN_AI_CONVERSATION_ID] = self.conversation_id
        for key, value in (
            (n.RB_CODEBASE_ID, self.fields.codebase_id),
            (n.RB_ORG_ID, self.fields.org_id),
            (n.RB_PROJECT_ID, self.fields.project_id),
        ):
            if value and value != "default":
                attrs[key] = value
        for key, value in self.metadata.items():
            if isinstance(value, str | bool | int | float):
                attrs[n.RB_METADATA_PREFIX + str(key)] = value
        if self.agent_kind:
            attrs[n.RB_AGENT_KIND] = self.agent_kind
        if self.agent_key:
            attrs[n.RB_AGENT_KEY] = self.agent_key
        if self.source:
            attrs[n.RB_SOURCE] = self.source
        if self.synthetic_timing:
            attrs[n.RB_SYNTHETIC_TIMING] = True
        if self.experiment is not None:  # after the metadata: a caller's metadata never relabels the arm
            attrs[n.RB_EXPERIMENT_ID] = self.experiment.experiment_id
            attrs[n.RB_EXPERIMENT_ARM] = self.experiment.arm
            attrs[n.RB_EXPERIMENT_UNIT] = self.experiment.unit
            if self.experiment.on_fraction is not None:
                attrs[n.RB_EXPERIMENT_ON_FRACTION] = float(self.experiment.on_fraction)
        return attrs


@dataclass(slots=True)
class ChatResponse:
    """What the provider reported about one model call (all optional)."""

    response_model: str = ""
    response_id: str = ""
    finish_reasons: Sequence[str] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    output_messages: Any = None

    @property
    def usage_reported(self) -> bool:
        """The provider said how many tokens the call used (an unknown is not 0)."""
        return self.input_tokens is not None or self.output_tokens is not None


def outcome_label(outcome: str) -> str:
    """The bounded ``rb.outcome`` metric label: ``success`` (interruptions included), ``stopped`` (by the steering
    layer, ``on_skip="stop"``) or ``failure``."""
    if outcome in (n.OUTCOME_SUCCESS, n.OUTCOME_INTERRUPTED):
        return n.OUTCOME_SUCCESS
    return n.OUTCOME_STOPPED if outcome == n.OUTCOME_STOPPED else n.OUTCOME_FAILURE


def error_type_name(error: BaseException) -> str:
    """``error.type`` of an exception: its fully qualified class name (``langgraph.errors.GraphRecursionError``,
    ``asyncio.exceptions.CancelledError``), builtins unqualified (``ValueError``), as the conventions ask and as
    the SDK writes ``exception.type``."""
    cls = type(error)
    module = cls.__module__
    return f"{module}.{cls.__qualname__}" if module and module != "builtins" else cls.__qualname__


def error_type_of(outcome: str) -> str:
    prefix = "failure: "
    return outcome[len(prefix) :] if outcome.startswith(prefix) else outcome


def evaluation_events(fired: Sequence[str], scores: Mapping[str, float]) -> list[tuple[str, Attributes]]:
    """A ``gen_ai.evaluation.result`` event per monitor that fired, with its score (no content: the explanation
    names the monitor and the score only)."""
    events: list[tuple[str, Attributes]] = []
    for name in fired:
        score = float(scores.get(name, 1.0))
        events.append(
            (
                n.EVENT_EVALUATION_RESULT,
                {
                    n.GEN_AI_EVALUATION_NAME: name,
                    n.GEN_AI_EVALUATION_SCORE_VALUE: score,
                    n.GEN_AI_EVALUATION_SCORE_LABEL: n.EVALUATION_LABEL_FIRED,
                    n.GEN_AI_EVALUATION_EXPLANATION: f"{name} scored {score:.2f}, at or above its fire threshold",
                },
            )
        )
    return events


def chat_attributes(
    entry: StepLogEntry,
    *,
    composite: float | None,
    steering_ms: float | None,
    content: ContentPolicy,
    final: bool,
    scorer: str = "",
) -> Attributes:
    """The ``rb.*`` attributes of a ``chat`` span; ``final`` adds those known only after the call."""
    attrs: Attributes = {
        n.RB_STEP: entry.step,
        n.RB_MONITORS_FIRED: list(entry.monitors_fired),
        n.RB_INJECTION_SOURCES: list(entry.injection_sources),
    }
    if entry.attempts > 1:
        attrs[n.RB_ATTEMPT] = entry.attempts
    if entry.fsm_state:  # imported steps that were not rescored have no state
        attrs[n.RB_FSM_STATE] = entry.fsm_state
    if entry.difficulty is not None:
        attrs[n.RB_DIFFICULTY] = entry.difficulty
        named = entry.scorer or scorer  # the session's: the model that scored this step (the run's, else)
        if named:
            attrs[n.RB_SCORER] = named
            attrs[n.RB_SCORER_LABELS] = entry.scorer_labels or 0
    if entry.model_id:
        attrs[n.RB_MODEL_ID] = entry.model_id
    if composite is not None:
        attrs[n.RB_MONITOR_COMPOSITE] = composite
    if entry.failure_type:
        attrs[n.RB_FAILURE_TYPE] = entry.failure_type
    if entry.skipped_reason:
        attrs[n.RB_SKIPPED_REASON] = entry.skipped_reason
    if steering_ms is not None:
        attrs[n.RB_STEERING_DURATION_MS] = steering_ms
    if content.capture:
        attrs[n.RB_THOUGHT_PREVIEW] = content.preview(entry.thought_preview, THOUGHT_PREVIEW_CHARS)
        attrs[n.RB_INJECTIONS] = content.previews(entry.injections, INJECTION_PREVIEW_CHARS)
        attrs[n.RB_INTERVENTION_TEXTS] = content.texts(entry.intervention_texts)
    if final:
        attrs[n.RB_TOKENS] = entry.tokens
        attrs[n.RB_LATENCY_MS] = entry.latency_ms
        attrs[n.RB_TOOL_CALLS] = list(entry.tool_calls)
    return attrs


def response_attributes(response: ChatResponse, content: ContentPolicy) -> Attributes:
    attrs: Attributes = {}
    if response.response_model:
        attrs[n.GEN_AI_RESPONSE_MODEL] = response.response_model
    if response.response_id:
        attrs[n.GEN_AI_RESPONSE_ID] = response.response_id
    if response.finish_reasons:
        attrs[n.GEN_AI_RESPONSE_FINISH_REASONS] = list(response.finish_reasons)
    for key, value in (
        (n.GEN_AI_USAGE_INPUT_TOKENS, response.input_tokens),
        (n.GEN_AI_USAGE_OUTPUT_TOKENS, response.output_tokens),
        (n.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, response.cache_read_tokens),
        (n.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, response.cache_creation_tokens),
        (n.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, response.reasoning_tokens),
    ):
        if value is not None:
            attrs[key] = value
    if content.capture and response.output_messages is not None:
        attrs[n.GEN_AI_OUTPUT_MESSAGES] = content.text(response.output_messages)
    return attrs
