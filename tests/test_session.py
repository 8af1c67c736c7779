"""SteeringSession: the spec 1.7 surface, the per-step pipeline of spec 2.2, and bad input at the boundary."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from rb_otel import FSMState, ReasonBlocks, StepDecision, StepLogEntry
from rb_otel.steering import DifficultyFSM, SteeringSession, TraceStateManager, create_injections
from rb_otel.steering.injections import BaseInjection, E3Injection, StepContext
from rb_otel.types import PendingInjection

HARD = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again."
EASY = "Reading the next file."


class Recorder:
    """A StepEmitter that remembers what it was told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def run_start(self, run_id: str, metadata: Any) -> None:
        self.events.append(("run_start", run_id))

    def step(self, run_id: str, entry: StepLogEntry, **kw: Any) -> None:
        self.events.append(("step", entry.step))

    def run_finish(self, run_id: str, outcome: str) -> None:
        self.events.append(("run_finish", outcome))

    def close(self, timeout: float = 5.0) -> None:
        self.events.append(("close", timeout))


def make(score_fn: Any = ReasonBlocks.score_step, **kw: Any) -> SteeringSession:
    kw.setdefault("injections", create_injections())
    return SteeringSession(score_fn=score_fn, fsm=DifficultyFSM(), state_manager=TraceStateManager(), **kw)


def drive(session: SteeringSession, thoughts: list[str | None]) -> list[StepLogEntry]:
    for t in thoughts:
        session.end_step(session.begin_step(thought=t), tokens=7, tool_calls=["t"])
    return session.step_log


def test_first_call_path() -> None:
    s = make()
    d = s.begin_step(thought=None)
    assert d.state is FSMState.INIT
    assert d.entry.difficulty is None and d.entry.thought_preview == "(first call)"
    assert d.entry.injection_sources and set(d.entry.injection_sources) == {"E3Injection"}
    assert d.entry.monitors_fired == []
    assert d.rendered_injection_text.startswith("**Standing rule**")


def test_scored_path_scores_transitions_and_records() -> None:
    s = make()
    drive(s, [None, HARD])
    entry = s.step_log[1]
    assert entry.fsm_state == "NORMAL"
    assert entry.difficulty == pytest.approx(ReasonBlocks.score_step(HARD))
    assert entry.thought_preview == HARD[:120]
    trace = s.state_manager.state
    assert [r.thought for r in trace.steps] == [HARD]  # no record for the unscored first call
    assert trace.difficulty_history == [entry.difficulty]
    assert trace.total_tokens == 14


def test_e3_runs_once_and_e1_e2_once_each() -> None:
    s = make()
    log = drive(s, [None] + [HARD] * 12)
    sources = [src for e in log for src in e.injection_sources]
    assert sources.count("E3Injection") == len(list(log[0].injection_sources))
    assert all("E3Injection" not in e.injection_sources for e in log[1:])
    injections = s.injections
    assert [getattr(i, "calls", None) for i in injections[1:]] == [1, 1, 1]


def test_fast_bypasses_etraces_with_skipped_reason_but_monitors_still_run() -> None:
    s = make()
    log = drive(s, [None] + [EASY] * 8)
    fast = [e for e in log if e.fsm_state == "FAST"]
    assert fast and all(e.skipped_reason == "FSM=FAST, e-traces skipped" for e in fast)
    assert all(e.skipped_reason is None for e in log if e.fsm_state != "FAST")
    assert len(s.monitor_evaluations) == 8  # every scored step, FAST included


def test_no_skipped_reason_when_etraces_are_disabled() -> None:
    s = make(injections=create_injections(e_traces_enabled=False))
    log = drive(s, [None] + [EASY] * 8)
    assert log[-1].fsm_state == "FAST" and log[-1].skipped_reason is None
    assert log[0].injection_sources == []


def test_routing_reports_override_by_state_never_for_init() -> None:
    s = make(model_routing={"SLOW": "anthropic:claude-sonnet-4-5", FSMState.FAST: "openai:gpt-4o-mini"})
    d0 = s.begin_step(thought=None)
    assert d0.model_override is None
    s.end_step(d0)
    states = []
    for _ in range(6):
        d = s.begin_step(thought=HARD)
        states.append((d.state, d.model_override))
        s.end_step(d)
    assert (FSMState.SLOW, "anthropic:claude-sonnet-4-5") in states
    assert all(o is None for st, o in states if st is FSMState.NORMAL)
    assert s.step_log[-1].model_id == "anthropic:claude-sonnet-4-5"


@pytest.mark.parametrize("routing", [{"INIT": "a:b"}, {"BOGUS": "a:b"}, {"SLOW": ""}])
def test_bad_routing_is_rejected(routing: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="model_routing"):
        make(model_routing=routing)


def test_injection_order_and_rendering_for_the_routed_model() -> None:
    s = make(model_routing={"SLOW": "anthropic:claude-sonnet-4-5"})
    drive(s, [None, HARD, HARD, HARD, HARD])
    d = s.begin_step(thought=HARD, action="search", action_input="x")
    order = {"MonitorSteeringInjection": 0, "E1Injection": 1, "E2Injection": 2, "E3Injection": 3}
    assert [order[p.source] for p in d.pending] == sorted(order[p.source] for p in d.pending)
    for p in d.pending:
        if p.tier:
            assert f"<{p.tier}_pattern" in d.rendered_injection_text  # Claude format after routing


def test_compose_system_prompt() -> None:
    d = StepDecision(
        state=FSMState.NORMAL,
        entry=StepLogEntry(step=0, fsm_state="NORMAL", thought_preview=""),
        rendered_injection_text="do X",
    )
    assert d.compose_system_prompt("Base") == "Base\n\n[REASONBLOCKS]\ndo X"
    assert d.compose_system_prompt(None) == "[REASONBLOCKS]\ndo X"
    quiet = StepDecision(state=FSMState.NORMAL, entry=d.entry)
    assert quiet.compose_system_prompt("Base") == "Base"
    assert quiet.compose_system_prompt("") == ""


def test_lifecycle_is_idempotent_and_emits_in_order() -> None:
    rec = Recorder()
    s = make(emitter=rec, run_id="r1")
    s.start()
    s.start()
    drive(s, [None])
    s.finish()
    s.finish(outcome_status="failure")
    s.close()
    s.close()
    assert rec.events == [("run_start", "r1"), ("step", 0), ("run_finish", "success"), ("close", 5.0), ("close", 5.0)]


def test_context_manager_outcomes() -> None:
    rec = Recorder()
    with make(emitter=rec) as s:
        drive(s, [None])
    assert ("run_finish", "success") in rec.events and rec.events[-1][0] == "close"

    rec = Recorder()
    with pytest.raises(RecursionError), make(emitter=rec):
        raise RecursionError
    assert ("run_finish", "failure: RecursionError") in rec.events

    rec = Recorder()
    with make(emitter=rec) as s:
        s.mark_failure(reason="wrong answer")
    assert ("run_finish", "wrong answer") in rec.events


async def test_async_context_manager() -> None:
    rec = Recorder()
    with pytest.raises(KeyError):
        async with make(emitter=rec):
            raise KeyError("x")
    assert ("run_finish", "failure: KeyError") in rec.events


def test_a_failing_emitter_never_breaks_the_run() -> None:
    class Broken(Recorder):
        def step(self, run_id: str, entry: StepLogEntry, **kw: Any) -> None:
            raise RuntimeError("collector down")

    s = make(emitter=Broken())
    assert len(drive(s, [None, HARD])) == 2


def test_fan_out_delivers_the_optional_events_to_the_emitters_that_have_them() -> None:
    from rb_otel.steering.emitters import FanOutEmitter

    class Stopping(Recorder):
        def stopped(self, run_id: str, entry: StepLogEntry) -> None:
            self.events.append(("stopped", entry.step))

    plain, stopping = Recorder(), Stopping()
    s = make(emitter=FanOutEmitter([stopping, plain]), run_id="r")
    s.start()
    s.end_step(s.begin_step(thought=None), tokens=1)
    s.stop(s.begin_step(thought=HARD))
    s.finish()
    assert stopping.events == [("run_start", "r"), ("step", 0), ("stopped", 1), ("run_finish", "stopped")]
    assert plain.events == [("run_start", "r"), ("step", 0), ("run_finish", "stopped")]


def test_bad_thought_type_is_rejected_and_the_log_is_kept() -> None:
    s = make()
    drive(s, [None, HARD])
    with pytest.raises(TypeError, match="expects a str or None"):
        s.begin_step(thought=42)  # type: ignore[arg-type]
    assert len(s.step_log) == 2
    assert len(drive(s, [HARD])) == 3
    assert [e.step for e in s.step_log] == [0, 1, 2]


@pytest.mark.parametrize(("value", "expected"), [(float("nan"), 0.5), (float("inf"), 0.5), (1.7, 1.0), (-3, 0.0)])
def test_bad_scores_are_clamped(value: float, expected: float) -> None:
    s = make(score_fn=lambda _t: value)
    log = drive(s, [None, "x"])
    assert log[1].difficulty == expected


def test_non_numeric_score_is_a_clear_error_and_changes_nothing() -> None:
    s = make(score_fn=lambda _t: "high")
    drive(s, [None])
    with pytest.raises(TypeError, match="score_fn returned str"):
        s.begin_step(thought="x")
    assert s.state_manager.state.difficulty_history == []
    assert s.steps_begun == 1


def test_end_step_validation() -> None:
    s = make()
    d = s.begin_step(thought=None)
    with pytest.raises(ValueError, match="tokens"):
        s.end_step(d, tokens=-1)
    s.end_step(d)
    with pytest.raises(ValueError, match="already ended"):
        s.end_step(d)


def test_huge_thoughts_are_handled() -> None:
    s = make()
    log = drive(s, [None, "maybe error src/a.py " * 500_000])
    assert len(log[1].thought_preview) == 120


def test_observation_is_attached_to_the_latest_record() -> None:
    s = make()
    drive(s, [None])
    d = s.begin_step(thought=HARD, action="run_tests", action_input={"t": 1})
    s.end_step(d, observation="x" * 1000)
    record = s.state_manager.state.steps[-1]
    assert record.observation == "x" * 400 and record.action == "run_tests"
    assert json.loads(json.dumps(record.action_input)) == "{'t': 1}"


def test_custom_injection_and_failing_injection() -> None:
    class Always(BaseInjection):
        def retrieve(self, ctx: StepContext) -> list[PendingInjection]:
            return [PendingInjection(source=self.source, text=f"step {ctx.step}")]

    class Broken(BaseInjection):
        def retrieve(self, ctx: StepContext) -> list[PendingInjection]:
            raise RuntimeError("store down")

    s = make(injections=[Broken(), Always()])
    log = drive(s, [None, HARD])
    assert log[1].intervention_texts == ["step 1"] and log[1].injection_sources == ["Always"]


def test_token_budget_is_tracked_not_enforced() -> None:
    s = SteeringSession(
        score_fn=ReasonBlocks.score_step,
        fsm=DifficultyFSM(),
        injections=[],
        state_manager=TraceStateManager(token_budget=10),
    )
    drive(s, [None, HARD, HARD])
    assert s.state_manager.get_budget_used() == pytest.approx(2.1)
    assert TraceStateManager().get_budget_used() is None


def test_session_rejects_wrong_collaborators() -> None:
    with pytest.raises(TypeError, match="fsm"):
        SteeringSession(score_fn=len, fsm=object(), state_manager=TraceStateManager(), injections=[])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="BaseInjection"):
        SteeringSession(score_fn=len, fsm=DifficultyFSM(), state_manager=TraceStateManager(), injections=[1])  # type: ignore[list-item]


def test_e3_injection_is_single_shot() -> None:
    e3 = E3Injection(store=__import__("rb_otel.steering").steering.InMemoryPatternStore())
    s = make(injections=[e3])
    drive(s, [None, None])
    assert e3.calls == 1


def test_difficulty_is_finite_everywhere() -> None:
    s = make()
    for e in drive(s, [None] + [HARD, EASY] * 10):
        assert e.difficulty is None or math.isfinite(e.difficulty)


def test_observer_is_taken_from_an_emitter_that_implements_remote_call() -> None:
    from rb_otel.steering.calls import RemoteCallObserver, as_observer

    class ObservingRecorder(Recorder):
        def remote_call(self, operation: str, *, step: int, tier: str | None, server: str) -> Any:
            return None

    class BrokenRecorder(Recorder):
        remote_call = "not callable"

    observing = ObservingRecorder()
    assert isinstance(observing, RemoteCallObserver) and as_observer(observing) is observing
    assert as_observer(BrokenRecorder()) is None and as_observer(Recorder()) is None
    session = make(emitter=observing)
    assert session._observer is observing
    session.emitter = Recorder()
    assert session._observer is None
