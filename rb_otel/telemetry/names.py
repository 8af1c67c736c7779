"""Every span, attribute, event and metric name rb_otel emits: the public telemetry contract.

Dashboards, alert rules, collector configs and users' queries depend on these strings, so they live here and
nowhere else (docs/telemetry.md lists them). Renaming one is a breaking change: list it in CHANGELOG.md.
Standard GenAI names are copied from the OpenTelemetry semantic conventions (the semconv package keeps them in
a private ``_incubating`` module).
"""

from __future__ import annotations

from typing import Final

# -- span names and operations ---------------------------------------------------------------------------
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_EXECUTE_TOOL: Final = "execute_tool"
SPAN_MONITORS_EVALUATE: Final = "rb.monitors.evaluate"
SPAN_ETRACES_RETRIEVE: Final = "rb.etraces.retrieve"

# -- standard GenAI attributes ---------------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"

# -- rb.* attributes --------------------------------------------------------------------------------------
RB_RUN_ID: Final = "rb.run_id"
RB_FRAMEWORK: Final = "rb.framework"
RB_TASK_PROFILE: Final = "rb.task_profile"
#: The kind of agent a run is (``coding``, ``customer_service``): named by the user or inferred from its tools; the
#: pilot's default model is chosen by it. Absent when not known.
RB_AGENT_KIND: Final = "rb.agent.kind"
#: The key the run's baselines and learned model are looked up under (``agent_name|model``, the model normalised:
#: the worker's own, not whichever model a routed call used), so ``rb-otel train`` keys the run's outcome to the
#: very agent the workers will look its model up by. Absent when the run is not scored by the pilot.
RB_AGENT_KEY: Final = "rb.agent.key"
RB_CODEBASE_ID: Final = "rb.codebase_id"
RB_ORG_ID: Final = "rb.org_id"
RB_PROJECT_ID: Final = "rb.project_id"
RB_METADATA_PREFIX: Final = "rb.metadata."
RB_OUTCOME: Final = "rb.outcome"
RB_STEPS: Final = "rb.steps"
RB_FINAL_STATE: Final = "rb.final_state"
RB_MAX_STATE: Final = "rb.max_state"
RB_ENTERED_SKIP: Final = "rb.entered_skip"
RB_TOKENS: Final = "rb.tokens"
RB_MONITOR_INJECTIONS: Final = "rb.monitor_injections"
RB_STEP: Final = "rb.step"
#: What made a ``chat`` span's model call when it was not a steered step: ``middleware:<Name>``, ``tool:<name>``.
RB_CALL_SOURCE: Final = "rb.call.source"
#: On the link from a resumed part's ``invoke_agent`` to the previous part's: what the link is.
RB_LINK_TYPE: Final = "rb.link.type"
#: ``rb.link.type`` of that link: the part of the same run that ended at an interrupt.
LINK_PREVIOUS_PART: Final = "previous_part"
#: On ``invoke_agent``: how many of the run's model calls reported no token usage (its totals leave them out).
RB_USAGE_UNREPORTED: Final = "rb.usage.unreported"
RB_DIFFICULTY: Final = "rb.difficulty"
RB_SCORER: Final = "rb.scorer"
#: On ``chat`` beside ``rb.scorer``: how many labelled runs of this agent the scoring model was fitted on (an int; 0
#: at cold start: the kind's default, pilot/1, the size, a model or ``score_fn`` the user gave).
RB_SCORER_LABELS: Final = "rb.scorer.labels"
RB_RISK: Final = "rb.risk"
RB_FSM_STATE: Final = "rb.fsm_state"
RB_MODEL_ID: Final = "rb.model_id"
RB_LATENCY_MS: Final = "rb.latency_ms"
RB_MONITORS_FIRED: Final = "rb.monitors_fired"
RB_MONITOR_COMPOSITE: Final = "rb.monitor.composite"
RB_FAILURE_TYPE: Final = "rb.failure_type"
RB_INJECTION_SOURCES: Final = "rb.injection_sources"
RB_SKIPPED_REASON: Final = "rb.skipped_reason"
RB_TOOL_CALLS: Final = "rb.tool_calls"
RB_STEERING_DURATION_MS: Final = "rb.steering.duration_ms"
RB_THOUGHT_PREVIEW: Final = "rb.thought_preview"
RB_INJECTIONS: Final = "rb.injections"
RB_INTERVENTION_TEXTS: Final = "rb.intervention_texts"
RB_ETRACE_TIER: Final = "rb.etrace.tier"
RB_ETRACE_COUNT: Final = "rb.etrace.count"
RB_SOURCE: Final = "rb.source"
RB_SYNTHETIC_TIMING: Final = "rb.synthetic_timing"
RB_MONITOR: Final = "rb.monitor"
RB_INJECTION_SOURCE: Final = "rb.injection.source"
RB_FSM_FROM: Final = "rb.fsm.from"
RB_FSM_TO: Final = "rb.fsm.to"
# A/B experiments: on the run span, and (id and arm) as labels of the run-level metrics
RB_EXPERIMENT_ID: Final = "rb.experiment.id"
RB_EXPERIMENT_ARM: Final = "rb.experiment.arm"
RB_EXPERIMENT_UNIT: Final = "rb.experiment.unit"
RB_EXPERIMENT_ON_FRACTION: Final = "rb.experiment.on_fraction"
# TokenSavingMiddleware, on the run span: what it removed from the history sent to the model
RB_TOKEN_SAVING_CHARS_SAVED: Final = "rb.token_saving.chars_saved"
RB_TOKEN_SAVING_COMPRESSIONS: Final = "rb.token_saving.compressions"
RB_TOKEN_SAVING_EARLY_EXITS: Final = "rb.token_saving.early_exits"
# GeneralMonitorMiddleware: the rules whose hints the model got in this call (chat span), one event per hint
RB_GENERAL_MONITOR_RULES: Final = "rb.general_monitor.rules"
RB_GENERAL_MONITOR_RULE: Final = "rb.general_monitor.rule"
EVENT_GENERAL_MONITOR_HINT: Final = "rb.general_monitor.hint"
# The pilot's shared baseline store: which operation failed (``read`` at a run's start or a refresh, ``write``)
RB_BASELINES_OPERATION: Final = "rb.baselines.operation"
#: Experiment ids beyond this many distinct ones per process are recorded on metrics as ``EXPERIMENT_OTHER``.
MAX_EXPERIMENT_LABELS: Final = 16
EXPERIMENT_OTHER: Final = "_other"

# -- events ------------------------------------------------------------------------------------------------
EVENT_FSM_TRANSITION: Final = "rb.fsm.transition"
# The steering layer stopped the run instead of making the model call of step ``rb.step`` (``on_skip="stop"``).
EVENT_RUN_STOPPED: Final = "rb.run.stopped"
# Content as events (capture modes EVENT_ONLY / SPAN_AND_EVENT): the GenAI inference-details event on chat spans,
# and ours on tool spans (the conventions define none there).
EVENT_INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"
EVENT_TOOL_CALL_DETAILS: Final = "rb.tool.call.details"
# One per monitor that fired on a chat span (GenAI evaluation event), so trace UIs show them natively.
EVENT_EVALUATION_RESULT: Final = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME: Final = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION: Final = "gen_ai.evaluation.explanation"
EVALUATION_LABEL_FIRED: Final = "fired"
#: A run's outcome, recorded after the run (``rb.record_outcome``, ``rb-otel label``): a ``gen_ai.evaluation.result``
#: log event with this ``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.label`` ``success``/``failure`` and
#: ``rb.run_id``, in the trace of the run's ``invoke_agent`` span when that is known (docs/telemetry.md, "Outcomes").
EVALUATION_RUN_OUTCOME: Final = "rb.run.outcome"

# -- metrics (instrument name, unit) ---------------------------------------------------------------------
METRIC_STEPS: Final = "rb.steps"
METRIC_STEP_DIFFICULTY: Final = "rb.step.difficulty"
METRIC_FSM_TRANSITIONS: Final = "rb.fsm.transitions"
METRIC_RUNS: Final = "rb.runs"
METRIC_RUNS_ACTIVE: Final = "rb.runs.active"
METRIC_RUNS_SKIP: Final = "rb.runs.skip"
METRIC_MONITOR_FIRED: Final = "rb.monitor.fired"
METRIC_INJECTIONS: Final = "rb.injections"
METRIC_STEERING_DURATION: Final = "rb.steering.duration"
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_INVOKE_AGENT_DURATION: Final = "gen_ai.invoke_agent.duration"
METRIC_EXECUTE_TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
METRIC_RUN_TOKENS: Final = "rb.run.tokens"
METRIC_TOKEN_SAVING_CHARS: Final = "rb.token_saving.chars_saved"
METRIC_BASELINES_ERRORS: Final = "rb.baselines.errors"
METRIC_BASELINES_DROPPED: Final = "rb.baselines.dropped"
#: A worker picked up a new learned model for an agent from the store (once per record and process; labels
#: ``gen_ai.agent.name``, the name part of the agent's key, and ``rb.scorer``, the model's name).
METRIC_MODELS_LOADED: Final = "rb.models.loaded"
#: Outcomes recorded after the runs (``record_outcome``, ``rb-otel label``; labels ``gen_ai.agent.name``, ``""``
#: where the recording process does not know the run's agent, as for every metric, and ``rb.outcome``).
METRIC_OUTCOMES_RECORDED: Final = "rb.outcomes.recorded"

#: The Prometheus series each instrument becomes (what dashboards and rules query).
PROMETHEUS_SERIES: Final = {
    METRIC_STEPS: ("rb_steps_total",),
    METRIC_STEP_DIFFICULTY: (
        "rb_step_difficulty_bucket",
        "rb_step_difficulty_sum",
        "rb_step_difficulty_count",
    ),
    METRIC_FSM_TRANSITIONS: ("rb_fsm_transitions_total",),
    METRIC_RUNS: ("rb_runs_total",),
    METRIC_RUNS_ACTIVE: ("rb_runs_active",),
    METRIC_RUNS_SKIP: ("rb_runs_skip_total",),
    METRIC_MONITOR_FIRED: ("rb_monitor_fired_total",),
    METRIC_INJECTIONS: ("rb_injections_total",),
    METRIC_STEERING_DURATION: tuple(f"rb_steering_duration_seconds_{s}" for s in ("bucket", "sum", "count")),
    METRIC_TOKEN_USAGE: tuple(f"gen_ai_client_token_usage_{s}" for s in ("bucket", "sum", "count")),
    METRIC_OPERATION_DURATION: tuple(
        f"gen_ai_client_operation_duration_seconds_{s}" for s in ("bucket", "sum", "count")
    ),
    METRIC_INVOKE_AGENT_DURATION: tuple(
        f"gen_ai_invoke_agent_duration_seconds_{s}" for s in ("bucket", "sum", "count")
    ),
    METRIC_EXECUTE_TOOL_DURATION: tuple(
        f"gen_ai_execute_tool_duration_seconds_{s}" for s in ("bucket", "sum", "count")
    ),
    METRIC_RUN_TOKENS: tuple(f"rb_run_tokens_{s}" for s in ("bucket", "sum", "count")),
    METRIC_TOKEN_SAVING_CHARS: ("rb_token_saving_chars_saved_total",),
    METRIC_BASELINES_ERRORS: ("rb_baselines_errors_total",),
    METRIC_BASELINES_DROPPED: ("rb_baselines_dropped_total",),
    METRIC_MODELS_LOADED: ("rb_models_loaded_total",),
    METRIC_OUTCOMES_RECORDED: ("rb_outcomes_recorded_total",),
}

# -- bucket boundaries ------------------------------------------------------------------------------------
DIFFICULTY_BUCKETS: Final = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 1.0)
TOKEN_USAGE_BUCKETS: Final = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)
OPERATION_DURATION_BUCKETS: Final = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
)
INVOKE_AGENT_DURATION_BUCKETS: Final = (
    0.1,
    0.2,
    0.4,
    0.8,
    1.6,
    3.2,
    6.4,
    12.8,
    25.6,
    51.2,
    102.4,
    204.8,
    409.6,
)
STEERING_DURATION_BUCKETS: Final = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)

# -- attribute values -----------------------------------------------------------------------------------
OUTCOME_SUCCESS: Final = "success"
OUTCOME_FAILURE: Final = "failure"
OUTCOME_INTERRUPTED: Final = "interrupted"
#: A run the steering layer ended at SKIP (``on_skip="stop"``): neither a success nor a failure of the agent's.
OUTCOME_STOPPED: Final = "stopped"
TOOL_TYPE_FUNCTION: Final = "function"
ERROR_TYPE_OTHER: Final = "_OTHER"

# -- imported runs (importers) ---------------------------------------------------------------------------
RB_STEP_NUMBER: Final = "rb.step.number"
RB_STEP_INDEX: Final = "rb.step.index"
RB_STEP_RETRY: Final = "rb.step.retry"
#: Which attempt of its step a ``chat`` span is (imported records; live: set from the second attempt on, a
#: retry or a fallback).
RB_ATTEMPT: Final = "rb.attempt"
RB_SUBAGENT: Final = "rb.subagent"
RB_TRAJECTORY_ID: Final = "rb.trajectory_id"
RB_CASCADE_ID: Final = "rb.cascade_id"
RB_CANCELED: Final = "rb.canceled"
RB_AGY_STEP_TYPE: Final = "rb.agy.step_type"
RB_AGY_RAW_PREFIX: Final = "rb.agy.raw."
RB_AGY_CANONICAL_PATH: Final = "rb.agy.canonical_path"
RB_STRUCTURED_OUTPUT: Final = "rb.structured_output"
EVENT_ATTEMPT: Final = "rb.attempt"
EVENT_COMPACTION: Final = "rb.compaction"
EVENT_SYSTEM_MESSAGE: Final = "rb.system_message"
EVENT_FINISH: Final = "rb.finish"
