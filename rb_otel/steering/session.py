"""``SteeringSession``: the framework-free steering pipeline for one run, driven by hand (docs/middleware.md, "Driving
the pipeline by hand: SteeringSession"; docs/steering.md, "How steering works").

A framework integration (or your own agent loop) calls ``begin_step`` before each model call, applies the
decision (system block, routed model), calls the model, then ``end_step``. The LangChain middleware uses this
same class, so both produce identical step logs and telemetry.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from rb_otel.steering.calls import RemoteCallObserver, as_observer
from rb_otel.steering.emitters import StepEmitter, as_emitter, emit
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.guidance import FAST_SKIPPED_REASON, GuidancePipeline, render_guidance
from rb_otel.steering.injections import BaseInjection, StepContext
from rb_otel.steering.outcome import checked_outcome
from rb_otel.steering.routing import parse_model_routing
from rb_otel.steering.scoring.heuristic import score_step
from rb_otel.steering.scoring.scorers import RunScorer, Scorer
from rb_otel.steering.scoring.steps import StepScoring, preview
from rb_otel.steering.state import TraceStateManager
from rb_otel.types import (
    FIRST_CALL_PREVIEW,
    OBSERVATION_CHARS,
    THOUGHT_PREVIEW_CHARS,
    FSMState,
    MonitorEvaluation,
    StepDecision,
    StepLogEntry,
    StepRecord,
)

__all__ = ["FAST_SKIPPED_REASON", "OUTCOME_STOPPED", "SteeringSession", "StepEmitter", "parse_model_routing"]

#: The outcome of a run the steering layer stopped (``rb.outcome``; the telemetry contract's value).
OUTCOME_STOPPED = "stopped"
_MISSING = object()


class SteeringSession:
    """The steering pipeline for one run.

    ``step_budget_s`` bounds the time remote backends may take per step (they fail open once it is spent).
    ``score_fn`` (default: ReasonBlocks' ``score_step``) maps a thought to a difficulty in [0, 1]: a non-finite
    result counts as 0.5 and an out-of-range one is clamped (both logged); a non-number raises ``TypeError``.
    ``scorer`` (``"heuristic"``, ``"pilot"``, a :class:`~rb_otel.steering.scoring.Scorer` or a callable) replaces
    ``score_fn`` with one that sees the whole step and the run so far; ``agent`` keys the scorer's per-agent
    baseline (the pilot's) and ``agent_kind`` (``"coding"``, ``"customer_service"``, ``""``: unknown) picks the
    pilot's default model for the kind of agent. With ``fsm=None`` the FSM is the scorer's preset for this run
    (``fsm_thresholds()`` on its run scorer), else ReasonBlocks' defaults. The scorer's run risk is reported to the
    emitter at the end (``run_finish(risk=...)``). ``model_routing`` maps FSM states to model ids; the session only
    reports ``model_override``, the integration swaps the model.
    """

    def __init__(
        self,
        *,
        score_fn: Callable[[str], float] = score_step,
        fsm: DifficultyFSM | None = None,
        state_manager: TraceStateManager,
        injections: Sequence[BaseInjection],
        model_routing: Mapping[Any, str] | None = None,
        emitter: StepEmitter | None = None,
        run_id: str | None = None,
        run_metadata: Mapping[str, Any] | None = None,
        step_budget_s: float | None = None,
        scorer: str | Scorer | Callable[..., float] | None = None,
        agent: str = "",
        agent_kind: str = "",
    ) -> None:
        if not callable(score_fn):
            raise TypeError("score_fn must be callable")
        if fsm is not None and not isinstance(fsm, DifficultyFSM):
            raise TypeError(f"fsm must be a DifficultyFSM, got {type(fsm).__name__}")
        if not isinstance(state_manager, TraceStateManager):
            raise TypeError(f"state_manager must be a TraceStateManager, got {type(state_manager).__name__}")
        bad = [type(i).__name__ for i in injections if not isinstance(i, BaseInjection)]
        if bad:
            raise TypeError(f"injections must be BaseInjection instances, got {', '.join(bad)}")
        if step_budget_s is not None and not step_budget_s > 0:
            raise ValueError(f"step_budget_s must be positive, got {step_budget_s!r}")
        self.step_budget_s = step_budget_s
        self.agent_kind = agent_kind
        self._scoring = StepScoring(
            score_fn,
            scorer,
            agent=agent,
            task_id=str((run_metadata or {}).get("task_id", "") or ""),
            kind=agent_kind,
        )
        if fsm is None:
            # No FSM given: the scorer's preset for this run when it has one (the pilot's is relative to the
            # agent's earlier runs), else ReasonBlocks' defaults.
            fsm = DifficultyFSM(**(self._scoring.fsm_thresholds() or {}))
        self.fsm = fsm
        self.state_manager = state_manager
        self.model_routing = {s: str(v) for s, v in parse_model_routing(model_routing).items()}
        self._emitter: StepEmitter | None = None
        self._events: StepEmitter = as_emitter(None)
        self._observer: RemoteCallObserver | None = None
        self.emitter = emitter
        self.run_id = run_id or state_manager.trace_id
        self.run_metadata: dict[str, Any] = dict(run_metadata or {})
        self.step_log: list[StepLogEntry] = []
        self._guidance = GuidancePipeline(injections)
        self._thoughts: deque[str] = deque(maxlen=5)
        self._next_step = 0
        self._open: dict[int, StepRecord | None] = {}
        self._started = False
        self._finished = False
        self._failure_reason: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------

    @property
    def emitter(self) -> StepEmitter | None:
        return self._emitter

    @emitter.setter
    def emitter(self, value: StepEmitter | None) -> None:
        # Decided once here, not on every step or remote call: the emitter every hook of which can be called
        # (``as_emitter``), and whether it observes remote calls.
        self._emitter = value
        self._events = as_emitter(value)
        self._observer = as_observer(value)

    @property
    def state(self) -> FSMState:
        return self.state_manager.state.current_state

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def steps_begun(self) -> int:
        """How many ``begin_step`` calls this run has had (the next step's index)."""
        return self._next_step

    def start(self) -> None:
        """Emit ``run_start`` once; later calls do nothing."""
        if self._started:
            return
        self._started = True
        emit(self._events.run_start, self.run_id, self.run_metadata)

    def mark_failure(self, *, reason: str = "failure") -> None:
        """Replace the default ``success`` outcome with ``reason`` (must come before ``finish``)."""
        self._failure_reason = str(reason) or "failure"

    def finish(self, *, outcome_status: str = "success", error: BaseException | None = None) -> None:
        """End the run: emit ``run_finish`` once (later calls do nothing), with the run's risk and ``error``, the
        exception that ended a failed run. A ``mark_failure`` reason wins over the default ``success``."""
        if self._finished:
            return
        self.start()
        self._finished = True
        risk = self.risk
        self._scoring.finish()
        outcome = self._failure_reason if outcome_status == "success" and self._failure_reason else outcome_status
        emit(self._events.run_finish, self.run_id, outcome, risk=risk, error=error)

    def record_outcome(self, outcome: str | bool, *, score: float | None = None, reason: str | None = None) -> None:
        """This run's outcome, known now (a test passed, a ticket closed): ``"success"``, ``"failure"`` or a bool
        (``True``: success), with an optional ``score`` (any scale) and ``reason`` (free text, recorded only when
        content capture is on). Any time after the run started, during it or after ``finish``; the emitter records
        it (the telemetry: a ``gen_ai.evaluation.result`` event parented to the run span). A bad argument raises
        ``ValueError``/``TypeError`` naming it; nothing else raises. Another process records it with
        ``ReasonBlocks.record_outcome(run_id, ...)``."""
        checked = checked_outcome(self.run_id, outcome, score, reason)
        emit(self._events.outcome, checked.run_id, checked.outcome, score=checked.score, reason=checked.reason)

    def close(self, *, timeout: float = 5.0) -> None:
        """Drain and stop the emitter; safe to call more than once."""
        if self.emitter is not None:
            emit(self._events.close, timeout)

    def __enter__(self) -> SteeringSession:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is None:
                self.finish()
            else:
                self.finish(outcome_status=f"failure: {exc_type.__name__}")
        finally:
            self.close()

    async def __aenter__(self) -> SteeringSession:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- steps -------------------------------------------------------------------------------------------

    def begin_step(
        self,
        *,
        thought: str | None,
        action: str | None = None,
        action_input: Any = None,
        observation: Any = None,
        model_id: str = "",
        error: bool = False,
        tokens: int = 0,
        reasoning: str = "",
    ) -> StepDecision:
        """Score, transition, evaluate monitors and retrieve guidance for the next model call.

        ``thought=None`` takes the first-call path: no scoring, no monitors, only E3. ``model_id`` is the model
        the call would use without routing; patterns are rendered for the routed model, else for it. ``error``
        (the observation was an error: tool error status, non-zero exit) and ``tokens`` (the previous call's)
        and ``reasoning`` (thinking content not in ``thought``) are read by a step scorer only.
        """
        if thought is not None and not isinstance(thought, str):
            raise TypeError(f"begin_step(thought=...) expects a str or None, got {type(thought).__name__}")
        started = time.perf_counter()
        self.start()
        step = self._next_step
        score = (
            None
            if thought is None
            else self._scoring.score(
                thought,
                action=action,
                action_input=action_input,
                observation=observation,
                error=error,
                tokens=tokens,
                reasoning=reasoning,
            )
        )
        self._next_step += 1  # only once the step is certain to exist

        if score is None or thought is None:
            record = None
            state = self.state_manager.state.current_state
            entry = StepLogEntry(step=step, fsm_state=state.value, thought_preview=FIRST_CALL_PREVIEW)
        else:
            record = self._record_scored(thought, action, action_input, observation, score)
            state = record.state
            entry = StepLogEntry(
                step=step,
                fsm_state=state.value,
                thought_preview=thought[:THOUGHT_PREVIEW_CHARS],
                difficulty=score,
                scorer=self._scoring.name,
                scorer_labels=self._scoring.labels,
            )
        self._open[step] = record

        ctx = self._context(step, state, first_call=record is None, model_id=model_id)
        pending, evaluation = self._guidance.collect(ctx, entry)
        override = self.model_routing.get(state)
        rendered = render_guidance(pending, entry, render_model=override or model_id)
        return StepDecision(
            state=state,
            entry=entry,
            pending=pending,
            model_override=override,
            rendered_injection_text="\n\n".join(rendered),
            steering_ms=(time.perf_counter() - started) * 1000.0,
            evaluation=evaluation,
        )

    def _context(self, step: int, state: FSMState, *, first_call: bool, model_id: str) -> StepContext:
        """What the injections of this step see."""
        meta = self.run_metadata
        return StepContext(
            step=step,
            state=state,
            first_call=first_call,
            thoughts=list(self._thoughts),
            trace_steps=self.state_manager.state.steps,
            model=model_id or str(meta.get("model", "")),
            task=str(meta.get("task", "") or ""),
            task_profile=str(meta.get("task_profile", "coding") or "coding"),
            monitor_weights=meta.get("monitor_weights"),
            deadline=None if self.step_budget_s is None else time.monotonic() + self.step_budget_s,
            observer=self._observer,
        )

    def _record_scored(
        self, thought: str, action: str | None, action_input: Any, observation: Any, score: float
    ) -> StepRecord:
        """Add a scored step to the trace and move the FSM; the record carries the state it moved to."""
        trace = self.state_manager.state
        record = StepRecord(
            step_index=len(trace.steps),
            thought=thought,
            action=None if action is None else str(action),
            action_input=preview(action_input, 1 << 20),
            observation=preview(observation, OBSERVATION_CHARS),
            difficulty=score,
        )
        self.state_manager.record_step(record)
        state = self.fsm.transition(trace.current_state, trace.difficulty_history)
        record.state = state
        self.state_manager.set_state(state)
        self._thoughts.append(thought)
        return record

    def end_step(
        self,
        decision: StepDecision,
        *,
        model_id: str = "",
        tokens: int = 0,
        tool_calls: Sequence[str] | None = None,
        latency_ms: float = 0.0,
        observation: Any = None,
    ) -> StepLogEntry:
        """Complete ``decision.entry`` with the call's results, append it to ``step_log`` and emit it."""
        if not isinstance(decision, StepDecision):
            raise TypeError(f"end_step expects the StepDecision from begin_step, got {type(decision).__name__}")
        entry = decision.entry
        if entry.step not in self._open:
            raise ValueError(f"step {entry.step} was already ended (or does not belong to this session)")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(f"tokens must be a non-negative int, got {tokens!r}")
        if not isinstance(latency_ms, int | float) or not math.isfinite(latency_ms):
            raise ValueError(f"latency_ms must be a finite number, got {latency_ms!r}")
        record = self._open.pop(entry.step)
        entry.model_id = model_id or decision.model_override or ""
        entry.tokens = tokens
        entry.tool_calls = [str(t) for t in (tool_calls or ())]
        entry.latency_ms = float(latency_ms)
        self.state_manager.add_tokens(tokens)
        if record is not None:
            record.tokens_used += tokens
        if observation is not None and self.state_manager.state.steps:
            self.state_manager.state.steps[-1].observation = preview(observation, OBSERVATION_CHARS)
        self.step_log.append(entry)
        if self.emitter is not None:
            evaluation = decision.evaluation
            emit(
                self._events.step,
                self.run_id,
                entry,
                steering_ms=decision.steering_ms,
                composite=evaluation.composite if evaluation is not None else None,
                monitor_scores=evaluation.scores if evaluation is not None and entry.monitors_fired else None,
            )
        return entry

    def stop(self, decision: StepDecision, *, reason: str = "stopped at SKIP (on_skip='stop')") -> StepLogEntry:
        """End the run at ``decision`` instead of making its model call (an adapter's ``on_skip="stop"``): the
        step goes into ``step_log`` with ``skipped_reason`` and no tokens, the emitter is told (``stopped``),
        and the run's outcome becomes ``stopped``. The adapter then ends the run as it ends any other."""
        entry = decision.entry
        if self._open.pop(entry.step, _MISSING) is _MISSING:
            raise ValueError(f"step {entry.step} was already ended (or does not belong to this session)")
        entry.skipped_reason = reason
        entry.model_id = ""
        self.step_log.append(entry)
        self._failure_reason = OUTCOME_STOPPED
        emit(self._events.stopped, self.run_id, entry)
        return entry

    def discard_step(self, decision: StepDecision) -> None:
        """Forget a step whose model call failed: nothing is appended to ``step_log``."""
        self._open.pop(decision.entry.step, None)

    # -- internals ---------------------------------------------------------------------------------------

    @property
    def score_fn(self) -> Callable[[str], float]:
        return self._scoring.score_fn

    @property
    def run_scorer(self) -> RunScorer | None:
        """This run's step scorer (the pilot's :class:`~rb_otel.steering.pilot.PilotRun`), ``None`` with
        ``score_fn``."""
        return self._scoring.run

    @property
    def scorer_name(self) -> str:
        """``rb.scorer``: what produces this run's difficulty."""
        return self._scoring.name

    @property
    def scorer_labels(self) -> int:
        """``rb.scorer.labels``: the labelled runs of this run's agent its scoring model was fitted on (0 for every
        model but one ``rb-otel train --watch`` learned for the agent)."""
        return self._scoring.labels

    @property
    def injections(self) -> list[BaseInjection]:
        """This run's injections, in pipeline order."""
        return self._guidance.injections

    @property
    def monitor_evaluations(self) -> list[MonitorEvaluation]:
        """The run's recent monitor evaluations, oldest first (what the E1 gate reads)."""
        return self._guidance.eval_history

    @property
    def risk(self) -> float | None:
        """The run-level risk so far: the step scorer's, else the mean difficulty of the scored steps."""
        return self._scoring.risk(self.state_manager.state.difficulty_history)
