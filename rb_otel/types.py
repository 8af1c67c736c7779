"""The value types shared by every layer of rb_otel.

Field names and spellings follow ReasonBlocks so that a step log written by either library reads the same
(docs/reference.md, "Steps and states"). This module imports only the standard library.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "RUN_FIELD_NAMES",
    "ETrace",
    "ExperimentArm",
    "FSMState",
    "MonitorEvaluation",
    "PendingInjection",
    "RunFields",
    "StepDecision",
    "StepLogEntry",
    "StepRecord",
    "TraceState",
]

#: Injection previews in ``StepLogEntry.injections`` are cut to this many characters.
INJECTION_PREVIEW_CHARS = 150
#: ``StepLogEntry.thought_preview`` is cut to this many characters.
THOUGHT_PREVIEW_CHARS = 120
#: ``StepRecord.observation`` is cut to this many characters.
OBSERVATION_CHARS = 400
#: The preview used on the first, unscored model call.
FIRST_CALL_PREVIEW = "(first call)"


#: The names of :class:`RunFields`, in order (also the ``run_start`` keys stored in their own fields,
#: docs/middleware.md, "Using the middleware").
RUN_FIELD_NAMES = ("agent_name", "task", "framework", "model", "codebase_id", "org_id", "project_id")


@dataclass(frozen=True, slots=True)
class RunFields:
    """What a caller says about a run when it starts: the ``run_start`` fields of docs/middleware.md, "Using the
    middleware".

    One value travels from the integration's arguments to the steering session's run metadata and to the run
    span's attributes. Every field is a string; a non-string is a ``TypeError`` naming the field.
    """

    agent_name: str = ""
    task: str = ""
    framework: str = "custom"
    model: str = ""
    codebase_id: str = ""
    org_id: str = "default"
    project_id: str = "default"

    NAMES: ClassVar[tuple[str, ...]] = RUN_FIELD_NAMES

    def __post_init__(self) -> None:
        for name in RUN_FIELD_NAMES:
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")

    def as_dict(self) -> dict[str, str]:
        """The fields as a plain dict, in :data:`RUN_FIELD_NAMES` order."""
        return {name: getattr(self, name) for name in RUN_FIELD_NAMES}


@dataclass(frozen=True, slots=True)
class ExperimentArm:
    """A run's place in an A/B experiment: the experiment, the arm (``"on"``/``"off"``), the assignment unit and
    the share of units the assignment puts in ``on`` (recorded, so the report's sample-ratio check reads it)."""

    experiment_id: str
    arm: str
    unit: str
    on_fraction: float | None = None


class FSMState(enum.Enum):
    """Difficulty state of a run; ``.value`` is the upper-case name (``FSMState("SLOW")`` round-trips)."""

    INIT = "INIT"
    FAST = "FAST"
    NORMAL = "NORMAL"
    SLOW = "SLOW"
    SKIP = "SKIP"
    END = "END"

    @property
    def severity(self) -> int:
        """Order used for ``rb.max_state``: INIT < FAST < NORMAL < SLOW < SKIP (END sorts last)."""
        return _SEVERITY[self]

    @staticmethod
    def severity_of(value: str) -> int:
        """The severity of the state named ``value`` (a span's ``rb.fsm_state``); 0, INIT's, for any other text."""
        try:
            return _SEVERITY[FSMState(value)]
        except ValueError:
            return 0


_SEVERITY = {
    FSMState.INIT: 0,
    FSMState.FAST: 1,
    FSMState.NORMAL: 2,
    FSMState.SLOW: 3,
    FSMState.SKIP: 4,
    FSMState.END: 5,
}


@dataclass(slots=True)
class StepRecord:
    """One scored step of the internal trace (written only on scored steps, docs/reference.md, "Steps and states")."""

    step_index: int
    thought: str
    action: str | None = None
    action_input: str | None = None
    observation: str | None = None
    difficulty: float = 0.0
    state: FSMState = FSMState.INIT
    tokens_used: int = 0


@dataclass(slots=True)
class TraceState:
    """The run as the steering pipeline sees it; owned by a ``TraceStateManager``."""

    trace_id: str
    steps: list[StepRecord] = field(default_factory=list)
    current_state: FSMState = FSMState.INIT
    difficulty_history: list[float] = field(default_factory=list)
    total_tokens: int = 0
    token_budget: int | None = None


@dataclass(slots=True)
class StepLogEntry:
    """What happened on one model call; the user-facing record and the payload of every ``chat`` span."""

    step: int
    fsm_state: str
    thought_preview: str
    timestamp: float = field(default_factory=time.time)
    difficulty: float | None = None
    model_id: str = ""
    injections: list[str] = field(default_factory=list)
    injection_sources: list[str] = field(default_factory=list)
    intervention_texts: list[str] = field(default_factory=list)
    monitors_fired: list[str] = field(default_factory=list)
    failure_type: str | None = None
    skipped_reason: str | None = None
    tool_calls: list[str] = field(default_factory=list)
    tokens: int = 0
    latency_ms: float = 0.0
    #: Model calls this step took: a call retried (``ModelRetryMiddleware``) or passed to a fallback
    #: (``ModelFallbackMiddleware``) is one step of several attempts, each its own ``chat`` span.
    attempts: int = 1
    #: The part of the run that made this call, ``<trace id>-<span id>`` of its ``invoke_agent`` span (hex), set by
    #: the LangChain middleware and ``rb.chat_model()``: a run interrupted and resumed is one run in several parts,
    #: each its own trace (docs/middleware.md, "Interrupts and resumes"). ``""`` where no part is known.
    part: str = ""
    #: The run's ``rb.scorer`` and ``rb.scorer.labels`` on a scored step (``""``/``None`` otherwise): what produced
    #: ``difficulty``, and how many labelled runs of this agent that model was fitted on (0 at cold start). Set by
    #: the session from the run scorer it scores with; telemetry only (not in :meth:`as_dict`: the step log keeps
    #: what happened, the spans say what scored it).
    scorer: str = ""
    scorer_labels: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict of every field but ``scorer`` and ``scorer_labels`` (telemetry's).

        ``difficulty``, ``model_id``, ``skipped_reason``, ``failure_type`` and ``part`` are left out when empty,
        and ``attempts`` when it is 1; every other field is always present (lists included). ``difficulty`` is
        rounded to 4 places and ``latency_ms`` to 1; ``timestamp`` is kept as is.
        """
        out: dict[str, Any] = {
            "step": self.step,
            "timestamp": self.timestamp,
            "fsm_state": self.fsm_state,
            "injections": list(self.injections),
            "injection_sources": list(self.injection_sources),
            "intervention_texts": list(self.intervention_texts),
            "monitors_fired": list(self.monitors_fired),
            "thought_preview": self.thought_preview,
            "tool_calls": list(self.tool_calls),
            "tokens": self.tokens,
            "latency_ms": round(self.latency_ms, 1),
        }
        if self.difficulty is not None:
            out["difficulty"] = round(self.difficulty, 4)
        if self.model_id:
            out["model_id"] = self.model_id
        if self.skipped_reason is not None:
            out["skipped_reason"] = self.skipped_reason
        if self.failure_type is not None:
            out["failure_type"] = self.failure_type
        if self.attempts != 1:
            out["attempts"] = self.attempts
        if self.part:
            out["part"] = self.part
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepLogEntry:
        """Inverse of :meth:`as_dict`; raises ``ValueError`` naming the first bad field."""
        try:
            return cls(
                step=_as_int(data["step"], "step"),
                fsm_state=FSMState(str(data["fsm_state"])).value,
                thought_preview=str(data.get("thought_preview", "")),
                timestamp=float(data.get("timestamp", 0.0)),
                difficulty=None if data.get("difficulty") is None else float(data["difficulty"]),
                model_id=str(data.get("model_id") or ""),
                injections=_str_list(data.get("injections"), "injections"),
                injection_sources=_str_list(data.get("injection_sources"), "injection_sources"),
                intervention_texts=_str_list(data.get("intervention_texts"), "intervention_texts"),
                monitors_fired=_str_list(data.get("monitors_fired"), "monitors_fired"),
                failure_type=None if data.get("failure_type") is None else str(data["failure_type"]),
                skipped_reason=None if data.get("skipped_reason") is None else str(data["skipped_reason"]),
                tool_calls=_str_list(data.get("tool_calls"), "tool_calls"),
                tokens=_as_int(data.get("tokens", 0), "tokens"),
                latency_ms=float(data.get("latency_ms", 0.0)),
                attempts=_as_int(data.get("attempts", 1), "attempts"),
                part=str(data.get("part") or ""),
            )
        except KeyError as exc:
            raise ValueError(f"step log entry is missing the field {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad step log entry: {exc}") from None


def _as_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _str_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{name} must be a list, got {type(value).__name__}")
    return [str(v) for v in value]


@dataclass(slots=True)
class PendingInjection:
    """Guidance queued for the next model call: plain ``text`` or a ``(tier, fields)`` pattern to render."""

    source: str
    text: str | None = None
    tier: str | None = None
    fields: dict[str, Any] | None = None
    monitors_fired: list[str] = field(default_factory=list)
    failure_type: str | None = None
    pattern_id: str = ""
    similarity: float = 0.0


@dataclass(slots=True)
class ETrace:
    """One steering pattern returned by a pattern store (docs/steering.md, "E-traces")."""

    tier: str
    similarity: float = 0.0
    pattern_id: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    failure_type: str | None = None
    model_family: str = ""
    source_trace_id: str | None = None

    @property
    def level(self) -> str:
        """Legacy alias of :attr:`tier`."""
        return self.tier


@dataclass(slots=True, frozen=True)
class MonitorEvaluation:
    """The ``/monitors/evaluate`` response shape (docs/rb-api.md, "Using rb-api"), whichever backend produced it."""

    inject: bool = False
    intervention_text: str | None = None
    fired: tuple[str, ...] = ()
    scores: dict[str, float] = field(default_factory=dict)
    composite: float = 0.0
    failure_type: str | None = None
    intervention_source: str | None = None
    #: Set when the configured backend failed and this result is a fallback (not part of the wire shape).
    degraded: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The wire shape of docs/rb-api.md, "Using rb-api"."""
        return {
            "inject": self.inject,
            "intervention_text": self.intervention_text,
            "fired": list(self.fired),
            "scores": dict(self.scores),
            "composite": self.composite,
            "failure_type": self.failure_type,
            "intervention_source": self.intervention_source,
        }


#: Heads the guidance block in the system message (docs/steering.md, "Routing and the [REASONBLOCKS] block").
REASONBLOCKS_HEADER = "[REASONBLOCKS]\n"


@dataclass(slots=True)
class StepDecision:
    """What the steering pipeline decided for one model call (docs/middleware.md, "Driving the pipeline by hand:
    SteeringSession").

    ``entry`` is filled in further by ``SteeringSession.end_step``. ``rendered_injection_text`` is every pending
    injection rendered for the routed model and joined with blank lines, ``""`` when nothing fired.
    """

    state: FSMState
    entry: StepLogEntry
    pending: list[PendingInjection] = field(default_factory=list)
    model_override: str | None = None
    rendered_injection_text: str = ""
    steering_ms: float = 0.0
    evaluation: MonitorEvaluation | None = None

    @property
    def guidance_block(self) -> str:
        """``"[REASONBLOCKS]\\n" + rendered text``, or ``""`` when nothing fired."""
        return REASONBLOCKS_HEADER + self.rendered_injection_text if self.rendered_injection_text else ""

    def compose_system_prompt(self, base_system: str | None) -> str:
        """Return ``base_system`` followed by the guidance block (separated by a blank line).

        The base is returned unchanged when nothing fired, and ``""`` when both are empty.
        """
        base = base_system or ""
        block = self.guidance_block
        if not block:
            return base
        return f"{base}\n\n{block}" if base else block
