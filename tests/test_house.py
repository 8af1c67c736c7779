"""The house rules (docs/architecture.md): whatever starts a span ends it, every emitter hook declared, called as a
method, and its order in its arguments, one run end per adapter, a moved name moved (no alias left behind), one FSM
replay, one severity order, one atomic writer, and no ignored combination left silent."""

from __future__ import annotations

import ast
import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rb_otel import ReasonBlocks, RunFields
from rb_otel.files import write_atomically
from rb_otel.steering import DifficultyFSM, SteeringSession, StepEmitter, TraceStateManager
from rb_otel.steering.emitters import FanOutEmitter
from rb_otel.telemetry import ChatResponse
from rb_otel.types import FSMState, StepLogEntry
from tests.conftest import Otel


def _rb(otel: Otel, **kwargs: Any) -> ReasonBlocks:
    return ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, telemetry_batch_window=0, **kwargs
    )


# -- one path per lifetime ------------------------------------------------------------------------------------


def test_the_invocation_that_started_a_chat_span_ends_it_with_the_completed_step(otel: Otel) -> None:
    rb = _rb(otel)
    run = rb.runs.open(RunFields(agent_name="custom"), run_id="r1")
    run.session.start()
    run.session.end_step(run.session.begin_step(thought=None, model_id="m"), tokens=1)
    decision = run.session.begin_step(thought="I am not sure this works; maybe retry.", model_id="m")
    chat = run.recorder.start_chat(decision.entry, request_model="m", provider="p", steering_ms=decision.steering_ms)
    step = run.session.end_step(decision, tokens=42, tool_calls=["search"])
    assert [s.name for s in otel.spans()].count("chat m") == 0  # the session's step event left it open
    chat.stop(ChatResponse(input_tokens=30, output_tokens=12), step=step)
    ended = [s for s in otel.spans() if s.name == "chat m"]
    assert len(ended) == 1  # ended by stop, before the run ends
    attributes = ended[0].attributes or {}
    assert attributes["rb.tokens"] == 42 and attributes["rb.step"] == 1
    assert attributes["rb.tool_calls"] == ("search",) and attributes["gen_ai.usage.output_tokens"] == 12
    run.session.finish()


def test_the_previous_order_stop_then_end_step_still_makes_one_span(otel: Otel) -> None:
    rb = _rb(otel)
    run = rb.runs.open(RunFields(agent_name="custom"))
    run.session.start()
    decision = run.session.begin_step(thought=None, model_id="m")
    chat = run.recorder.start_chat(decision.entry, request_model="m", provider="p")
    chat.stop(ChatResponse(input_tokens=3, output_tokens=4))
    run.session.end_step(decision, tokens=7)  # the session's step event leaves a step with an invocation alone
    run.session.finish()
    rb.flush()
    assert [s.name for s in otel.spans()].count("chat m") == 1


def test_a_step_with_no_live_call_is_built_and_ended_by_the_step_event(otel: Otel) -> None:
    rb = _rb(otel)
    run = rb.runs.open(RunFields(agent_name="custom"))
    with run.session:
        run.session.end_step(run.session.begin_step(thought=None, model_id="m"), tokens=5)
    rb.flush()
    (chat,) = [s for s in otel.spans() if s.name.startswith("chat")]
    assert (chat.attributes or {})["rb.tokens"] == 5


# -- the emitter interface ------------------------------------------------------------------------------------


class _Recording(StepEmitter):
    """Overrides what it needs; the other hooks are the interface's defaults."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def step(
        self,
        run_id: str,
        entry: StepLogEntry,
        *,
        steering_ms: float | None = None,
        composite: float | None = None,
        monitor_scores: Mapping[str, float] | None = None,
    ) -> None:
        self.events.append(("step", entry.step, monitor_scores))

    def run_finish(
        self, run_id: str, outcome: str, *, risk: float | None = None, error: BaseException | None = None
    ) -> None:
        self.events.append(("finish", outcome, risk, error))


def _session(emitter: object) -> SteeringSession:
    return SteeringSession(state_manager=TraceStateManager(), injections=[], emitter=emitter)  # type: ignore[arg-type]


def test_a_subclass_gets_each_hook_directly_with_what_it_needs_in_its_arguments() -> None:
    emitter = _Recording()
    session = _session(emitter)
    session.end_step(session.begin_step(thought=None))
    session.end_step(session.begin_step(thought="error: failed again, retry, traceback, exception"))
    boom = RuntimeError("boom")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a subclass is called as it is: no adaptation, no warning
        session.finish(outcome_status="failure: RuntimeError", error=boom)
    assert [e[0] for e in emitter.events] == ["step", "step", "finish"]
    finish = emitter.events[-1]
    assert finish[1] == "failure: RuntimeError" and isinstance(finish[2], float) and finish[3] is boom


def test_an_emitter_with_only_the_methods_gets_the_ones_it_has_in_order_and_nothing_else() -> None:
    calls: list[str] = []

    class MethodsOnly:
        def run_start(self, run_id: str, metadata: Any) -> None:
            calls.append("run_start")

        def step(self, run_id: str, entry: StepLogEntry, **kw: Any) -> None:
            assert "monitor_scores" not in kw  # called as such an emitter was written
            calls.append("step")

        def run_risk(self, run_id: str, risk: float) -> None:
            calls.append("run_risk")  # a hook StepEmitter does not declare: never called

        def run_finish(self, run_id: str, outcome: str) -> None:
            calls.append("run_finish")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        session = _session(MethodsOnly())
        session.end_step(session.begin_step(thought=None))
        session.end_step(session.begin_step(thought="a thought"))
        session.finish()
    assert calls == ["run_start", "step", "step", "run_finish"]


def test_emitter_hooks_are_called_as_methods_never_chosen_by_a_name_in_a_variable() -> None:
    # getattr(emitter, <a variable>) is how a hook is called by its name as a string: not in the emitter code
    steering = Path(__file__).resolve().parents[1] / "rb_otel" / "steering"
    by_name = [
        f"{path.name}:{node.lineno}"
        for path in (steering / "emitters.py", steering / "session.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and not (len(node.args) > 1 and isinstance(node.args[1], ast.Constant))
    ]
    assert by_name == []


def test_fan_out_gives_remote_calls_to_the_first_emitter_that_observes_them(otel: Otel) -> None:
    rb = _rb(otel)
    run = rb.runs.open(RunFields(agent_name="custom"))
    fan = FanOutEmitter([_Recording(), run.recorder])
    with fan.remote_call("monitors.evaluate", step=0, tier=None, server="local") as note:
        note.count = 1
    run.recorder.run_finish(run.recorder.info.run_id, "success")
    rb.flush()
    assert any(s.name.startswith("rb.monitors") for s in otel.spans())


# -- moved names: gone, not forwarded (tests/test_layout.py lists each) ------------------------------------------


def test_rb_otel_pilot_scorer_is_the_fleet_pilot_and_pilot_by_name_is_too() -> None:
    import rb_otel
    from rb_otel.backends.pilot import PilotScorer
    from rb_otel.steering.scoring import resolve_scorer

    assert rb_otel.PilotScorer is PilotScorer
    assert isinstance(resolve_scorer("pilot"), PilotScorer)


def test_build_middleware_warns_and_keeps_working() -> None:
    from rb_otel import ReasonBlocksConfig, build_middleware

    with pytest.warns(DeprecationWarning, match=r"ReasonBlocks\.from_config"):
        middleware = build_middleware(ReasonBlocksConfig(enable_e1=False, enable_e2=False, enable_e3=False,
                                                         enable_monitor_steering=False))  # fmt: skip
    assert [type(m).__name__ for m in middleware] == ["TokenSavingMiddleware"]


# -- one of each ----------------------------------------------------------------------------------------------


@given(st.lists(st.floats(0, 1), max_size=60))
def test_the_one_fsm_replay_is_the_step_by_step_transition(scores: list[float]) -> None:
    fsm = DifficultyFSM(slow_window=2, skip_window=3, fast_window=2)
    state, history, expected = FSMState.INIT, [], []
    for value in scores:
        history.append(value)
        state = fsm.transition(state, history)
        expected.append(state)
    assert list(fsm.replay(scores)) == expected


def test_severity_by_name_is_the_states_own_order() -> None:
    assert [FSMState.severity_of(s.value) for s in FSMState] == [s.severity for s in FSMState]
    assert FSMState.severity_of("nonsense") == FSMState.INIT.severity


def test_the_atomic_writer_replaces_the_file_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "model.json"
    write_atomically(target, "first")
    write_atomically(target, "second")
    assert target.read_text() == "second"
    assert [p.name for p in target.parent.iterdir()] == ["model.json"]


# -- no ignored combination is silent -------------------------------------------------------------------------


def test_a_pattern_store_with_e_traces_off_warns(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    from rb_otel.steering import InMemoryPatternStore

    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        _rb(otel, e_traces_enabled=False, pattern_store=InMemoryPatternStore())
    assert "pattern_store is set but e_traces_enabled=False" in caplog.text


def test_from_config_says_it_ignores_e_traces_enabled(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    from rb_otel import ReasonBlocksConfig

    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        ReasonBlocks.from_config(
            ReasonBlocksConfig(enable_general_monitor=False, enable_token_saving=False),
            e_traces_enabled=False,
            tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider,
        )
    assert "from_config(e_traces_enabled=...) is ignored" in caplog.text
