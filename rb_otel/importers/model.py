"""What every reader produces: runs of steps, independent of the harness they came from."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rb_otel.steering.scoring import ScorerStep, scorer_step
from rb_otel.telemetry.attributes import AttributeValue
from rb_otel.types import StepLogEntry

__all__ = ["ImportProblem", "ImportedRun", "ImportedStep", "ImportedTool", "RecordError", "ReplayResult"]


class RecordError(ValueError):
    """A malformed record: the message names the file, the line or row, and the problem."""

    def __init__(self, path: str, where: str, problem: str) -> None:
        super().__init__(f"{path}: {where}: {problem}")
        self.path, self.where, self.problem = path, where, problem


@dataclass(frozen=True, slots=True)
class ImportProblem:
    """A record that was skipped; the rest of the file was still imported."""

    path: str
    where: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}: {self.problem}"


@dataclass(slots=True)
class ImportedTool:
    name: str
    call_id: str = ""
    arguments: Any = None
    result: Any = None
    error: str | None = None


@dataclass(slots=True)
class ImportedStep:
    """One model call (or, for io_harness, one step number with its attempts)."""

    index: int
    thought: str = ""
    action: str | None = None
    action_input: str | None = None
    observation: str | None = None
    tools: list[ImportedTool] = field(default_factory=list)
    tokens: int = 0
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    model: str = ""
    provider: str = ""
    finish_reason: str = ""
    timestamp: float | None = None
    duration_s: float | None = None
    error_type: str | None = None
    entry: StepLogEntry | None = None  # a recorded ReasonBlocks entry, replayed as is
    events: list[tuple[str, dict[str, AttributeValue]]] = field(default_factory=list)
    attributes: dict[str, AttributeValue] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """The step's result was an error: the step's own error type, or any tool's error status."""
        return self.error_type is not None or any(t.error for t in self.tools)

    def as_scorer_step(self) -> ScorerStep:
        """The step as a live step scorer would see it (``scorer_step``: the same views, the same cuts)."""
        return scorer_step(
            self.thought,
            action=self.action,
            action_input=self.action_input,
            observation=self.observation,
            error=self.failed,
            tokens=self.tokens,
        )


@dataclass(slots=True)
class ImportedRun:
    """A run; ``steps`` may be a generator (large inputs are streamed). ``children`` are nested runs, each with
    the index of the step that spawned it (or ``None``)."""

    run_id: str
    source: str
    steps: Iterable[ImportedStep]
    agent_name: str = ""
    # The harness that ran the agent and its major version, as the file names it ("tau2 llm_agent",
    # "mini-swe-agent 2"); with ``model`` it is the agent (docs/importers.md, "Agent identity"). "" when unknown.
    harness: str = ""
    task: str = ""
    task_id: str = ""  # the task the run tried; "" when unknown
    # What folds and bootstrap intervals keep together: runs sharing a user scenario or a task ("": the task id).
    group_id: str = ""
    model: str = ""  # the agent's model, when the whole run used one (rb_otel.importers.identity.agent_model)
    #: The key a worker scored the run under (``rb.agent.key`` on rb-otel's own traces; its model is the worker's,
    #: where a routed call may name another): "" when the records do not say.
    agent_key: str = ""
    # An id the source guarantees to be one run's alone (a tau2 simulation id): a read takes the first run with
    # it and lists any later one as a duplicate (rb_otel.importers.reading.SeenRuns). "" for none.
    unique_id: str = ""
    outcome: str = "success"
    start: float | None = None
    end: float | None = None
    synthetic_timing: bool = False
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    children: list[tuple[int | None, ImportedRun]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, dict[str, AttributeValue]]] = field(default_factory=list)


@dataclass(slots=True)
class ReplayResult:
    """One replayed run: its id, step count, step log (unless not kept), and what rescoring found."""

    run_id: str
    source: str
    step_count: int
    steps: list[StepLogEntry]
    outcome: str
    trace_id: str
    entered: dict[str, int] = field(default_factory=dict)  # state -> first step, with --rescore
    children: list[ReplayResult] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    problems: list[ImportProblem] = field(default_factory=list)
    agent_name: str = ""
    harness: str = ""
    task_id: str = ""
    group_id: str = ""  # the run's task group (the task id unless the format knows better)
    model: str = ""
    risk: float | None = None  # the scorer's run-level risk at the end, with rescoring
    max_state: str = ""  # the most severe FSM state reached, with rescoring
    monitor_scores: list[dict[str, float]] = field(default_factory=list)  # per kept step, with rescoring
    max_composite: float = 0.0  # the largest monitor composite of the run, with rescoring
    chars: int = 0  # characters the agent wrote: thoughts and action inputs (the plain-length baseline)
    # Per step, with rescoring: characters written and the largest prompt (else call) in tokens so far.
    prefix_chars: list[int] = field(default_factory=list)
    prefix_prompt_tokens: list[int] = field(default_factory=list)
    agent_key: str = ""  # the key the scorer kept the agent's baseline under
    earlier_runs: int | None = None  # how many earlier runs of the agent the baseline held when this run started
    scorer: str = ""  # rb.scorer the run was scored by (the pilot's model of its kind); "" without a scorer
