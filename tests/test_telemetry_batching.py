"""Finished work done in batches (``telemetry/batch.py``): what waits, what never waits, what flushes it."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from components import wait_until
from conftest import Otel, add, calc_script
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import interrupt
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from rb_otel import ReasonBlocks
from rb_otel.telemetry import RunInfo
from rb_otel.telemetry.batch import HANDOVER_BOUND_MS, MAX_PENDING, Batch
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.run_metrics import RunMetrics
from rb_otel.testing import ScriptedChatModel, tool_call
from rb_otel.types import RunFields, StepLogEntry

THOUGHTS = ["Reading src/app.py first.", "Maybe the error is a KeyError, not sure.", "Adding a test for it."]


def _rb(otel: Otel, window: float) -> ReasonBlocks:
    return ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, telemetry_batch_window=window
    )


def _steps(session: Any, thoughts: list[str], *, pause: float = 0.0) -> None:
    for thought in thoughts:
        decision = session.begin_step(thought=thought)
        time.sleep(pause)
        session.end_step(decision, tokens=5, tool_calls=["read"])


def test_a_fast_run_batches_step_metrics_until_it_ends(otel: Otel) -> None:
    rb = _rb(otel, 60)
    session = rb.session(agent_name="batch")
    _steps(session, THOUGHTS)
    assert otel.spans("chat") == []  # their ends wait
    assert rb.telemetry.pending > 0  # ... and so do their measurements
    assert otel.metric_sum("rb.runs.active") == 1  # state metrics never wait (a collection flushes the rest)
    assert otel.metric_sum("rb.fsm.transitions") == 1
    session.finish()
    chats = sorted(otel.spans("chat"), key=lambda s: s.start_time or 0)
    (root,) = otel.spans("invoke_agent")
    assert len(chats) == len(THOUGHTS) and all(s.parent and s.parent.span_id == root.context.span_id for s in chats)
    for chat, following in itertools.pairwise(chats):  # each ended when its step did, not at the flush
        assert (chat.end_time or 0) <= (following.start_time or 0)
    assert dict(chats[-1].attributes or {})["rb.tokens"] == 5  # the attributes set at the end are there
    assert otel.metric_sum("rb.steps") == len(THOUGHTS)
    assert otel.metric_sum("rb.step.difficulty") == len(THOUGHTS)
    assert otel.metric_sum("gen_ai.client.operation.duration") == len(THOUGHTS)
    assert otel.metric_sum("rb.runs.active") == 0 and otel.metric_sum("rb.runs") == 1


def test_batched_measurements_keep_their_steps_span_as_exemplar(otel: Otel) -> None:
    rb = _rb(otel, 60)
    session = rb.session(agent_name="batch")
    _steps(session, THOUGHTS)
    session.finish()
    chat_spans = {s.context.span_id for s in otel.spans("chat")}
    assert len(chat_spans) == len(THOUGHTS)
    exemplar_spans = {
        e.span_id for _, point in otel.metric_points("rb.step.difficulty") for e in getattr(point, "exemplars", ())
    }
    assert exemplar_spans and exemplar_spans <= chat_spans  # each points at a chat span, not at the run span


def test_window_zero_records_every_step_at_once(otel: Otel) -> None:
    rb = _rb(otel, 0)
    session = rb.session(agent_name="batch")
    for done, thought in enumerate(THOUGHTS, start=1):
        _steps(session, [thought])
        assert otel.metric_sum("rb.steps") == done
    session.finish()


def test_a_run_slower_than_the_window_records_at_once(otel: Otel) -> None:
    window = 0.01
    rb = _rb(otel, window)
    session = rb.session(agent_name="batch")
    for done, thought in enumerate(THOUGHTS, start=1):
        _steps(session, [thought], pause=2 * window)  # a model call longer than the window
        assert otel.metric_sum("rb.steps") == done
    session.finish()


def test_flush_records_what_a_run_in_flight_is_batching(otel: Otel) -> None:
    rb = _rb(otel, 60)
    session = rb.session(agent_name="batch")
    _steps(session, THOUGHTS)
    rb.flush()
    assert otel.metric_sum("rb.steps") == len(THOUGHTS) and len(otel.spans("chat")) == len(THOUGHTS)
    assert otel.metric_sum("rb.runs.active") == 1 and otel.spans("invoke_agent") == []  # still in flight
    session.finish()
    assert otel.metric_sum("rb.steps") == len(THOUGHTS)  # nothing recorded twice
    assert len(otel.spans("chat")) == len(THOUGHTS) and len(otel.spans("invoke_agent")) == 1


def test_an_agent_run_has_every_metric_recorded_when_invoke_returns(otel: Otel) -> None:
    rb = _rb(otel, 60)
    mw = rb.middleware(agent_name="calc")
    agent = create_agent(ScriptedChatModel(script=calc_script(3)), [add], middleware=[mw])
    agent.invoke({"messages": [("user", "x")]})
    assert otel.metric_sum("rb.steps") == len(mw.step_log) == 4
    assert otel.metric_sum("gen_ai.execute_tool.duration") == 3
    chats = sorted(otel.spans("chat"), key=lambda s: s.start_time or 0)
    tools = sorted(otel.spans("execute_tool"), key=lambda s: s.start_time or 0)
    assert len(chats) == 4 and len(tools) == 3
    for chat, tool_span, next_chat in zip(chats, tools, chats[1:], strict=False):  # ended in order, when they did
        assert (chat.end_time or 0) <= (tool_span.start_time or 0) <= (tool_span.end_time or 0)
        assert (tool_span.end_time or 0) <= (next_chat.start_time or 0)


@tool
def ask_human(question: str) -> str:
    """Ask a human."""
    return str(interrupt(question))


def test_an_interrupted_run_records_its_steps_before_it_pauses(otel: Otel) -> None:
    rb = _rb(otel, 60)
    script = [tool_call("ask_human", {"question": "ok?"}, "q1", content="Asking."), AIMessage("Thanks, done.")]
    agent = create_agent(
        ScriptedChatModel(script=script), [ask_human], middleware=[rb.middleware()], checkpointer=InMemorySaver()
    )
    out = agent.invoke({"messages": [("user", "x")]}, {"configurable": {"thread_id": "t1"}})
    assert "__interrupt__" in out
    assert otel.metric_sum("rb.steps") == 1


@pytest.mark.parametrize(
    ("window", "error"),
    [(-1, ValueError), (math.nan, ValueError), (math.inf, ValueError), ("1", TypeError), (True, TypeError)],
)
def test_a_bad_window_fails_at_construction(window: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="telemetry_batch_window: expected seconds"):
        ReasonBlocks(telemetry_batch_window=window)


@pytest.mark.parametrize("window", [0.0, 60.0])
def test_tool_metrics_from_many_threads_are_recorded_once_each(window: float) -> None:
    # Parallel tool calls of one run end on several threads; queueing and flushing must lose and repeat nothing.
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    batch = Batch(window)
    metrics = RunMetrics(Instruments(provider.get_meter("t")), "agent", batch)
    threads, calls = 8, 400
    start = threading.Barrier(threads)

    def work() -> None:
        start.wait()
        for i in range(calls):
            metrics.tool("add", None, 0.001, trace.set_span_in_context(trace.INVALID_SPAN))
            batch.settle()
            if i % 50 == 0:
                batch.flush()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    batch.flush()
    assert batch.pending == 0
    data = reader.get_metrics_data()
    assert data is not None
    counts = [
        p.count
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "gen_ai.execute_tool.duration"
        for p in m.data.data_points
    ]
    assert counts == [threads * calls]
    provider.shutdown()


def test_a_step_recorded_after_its_run_ended_is_recorded_at_once(otel: Otel) -> None:
    rb = _rb(otel, 60)
    recorder = rb.telemetry.run(RunInfo(run_id="late", fields=RunFields(agent_name="batch")))
    recorder.run_start("late", {})
    recorder.run_finish("late", "success")
    late_step = StepLogEntry(step=0, fsm_state="NORMAL", thought_preview="late")  # e.g. a model call outliving it
    recorder.step("late", late_step, steering_ms=0.1)
    assert otel.metric_sum("rb.steps") == 1


class _BrokenCounter:
    def add(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("meter failure")


def test_a_meter_failing_at_the_flush_still_ends_the_run(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    rb = _rb(otel, 60)
    rb.telemetry.instruments.steps = _BrokenCounter()  # type: ignore[assignment]
    session = rb.session(agent_name="batch")
    _steps(session, THOUGHTS)
    session.finish()
    assert len(otel.spans("invoke_agent")) == 1 and len(otel.spans("chat")) == len(THOUGHTS)  # every span ended
    assert otel.metric_sum("rb.runs.active") == 0 and otel.metric_sum("rb.runs") == 1
    assert "meter failure" in caplog.text  # logged with its traceback, not raised into the agent


def test_a_meter_failing_at_the_run_end_still_ends_the_run_span(otel: Otel) -> None:
    rb = _rb(otel, 60)
    rb.telemetry.instruments.runs = _BrokenCounter()  # type: ignore[assignment]
    session = rb.session(agent_name="batch")
    _steps(session, THOUGHTS)
    session.finish()
    assert len(otel.spans("invoke_agent")) == 1 and len(otel.spans("chat")) == len(THOUGHTS)
    assert otel.metric_sum("rb.runs.active") == 0 and otel.metric_sum("rb.steps") == len(THOUGHTS)


_EXIT_SCRIPT = """
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.metrics import MeterProvider
from rb_otel import ReasonBlocks

provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(formatter=lambda s: s.name + "\\n")))
rb = ReasonBlocks(tracer_provider=provider, meter_provider=MeterProvider(), telemetry_batch_window=3600)
session = rb.session(agent_name="exit")
for thought in ("Reading the file.", "Fixing the bug.", "Running the tests."):
    session.end_step(session.begin_step(thought=thought), tokens=1)
print("steps done")
"""


def test_what_a_run_in_flight_holds_goes_out_at_interpreter_exit() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_SCRIPT], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    before, _, after = done.stdout.partition("steps done")
    assert "chat" not in before  # held while the run steps fast
    assert after.count("chat") == 3  # ended by the exit hook, before the provider shut down


def test_a_long_fast_run_flushes_whenever_its_queue_is_full(otel: Otel) -> None:
    rb = _rb(otel, 3600)  # the window never expires here: only the size bound can flush
    session = rb.session(agent_name="batch")
    steps = 100
    _steps(session, [f"Step {i}: reading module_{i}.py" for i in range(steps)])
    held = steps - len(otel.spans("chat"))
    assert 0 < held < steps  # some went out on the way, the newest still wait
    assert held * 2 <= MAX_PENDING  # each step queues at least two items (its span end, its rb.steps add)
    session.finish()
    assert len(otel.spans("chat")) == steps and otel.metric_sum("rb.steps") == steps


def _exported(reader: InMemoryMetricReader) -> dict[tuple[str, tuple[tuple[str, Any], ...]], float]:
    """Every data point read: (metric, attributes) -> its sum (a counter) or count + sum (a histogram)."""
    data = reader.get_metrics_data()
    points: dict[tuple[str, tuple[tuple[str, Any], ...]], float] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = (metric.name, tuple(sorted((p.attributes or {}).items())))
                    points[key] = p.value if hasattr(p, "value") else p.count * 1e6 + p.sum
    return points


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["steps", "fired", "tool", "flush"]),
        st.sampled_from(["NORMAL", "SLOW", "FAST"]),
        st.integers(min_value=1, max_value=3),
    ),
    max_size=40,
)


@given(ops=_OPS)
@settings(max_examples=60, deadline=None)
def test_coalesced_counter_adds_export_what_adding_each_at_once_does(ops: list[tuple[str, str, int]]) -> None:
    # The plain definition (window=0: every add done as it comes) against the batch that sums equal waiting adds.
    results = []
    for window in (0.0, 60.0):
        reader = InMemoryMetricReader()
        provider = MeterProvider(metric_readers=[reader])
        inst = Instruments(provider.get_meter("t"))
        batch = Batch(window)
        for op, state, value in ops:
            labels = {"gen_ai.agent.name": "a", "rb.fsm_state": state}
            if op == "steps":
                batch.add(inst.steps, value, labels, None)
            elif op == "fired":
                batch.add(inst.monitor_fired, value, {**labels, "rb.monitor": "m"}, None)
            elif op == "tool":
                batch.record(inst.execute_tool_duration, value / 10, {"gen_ai.tool.name": state}, None)
            else:
                batch.flush()
            batch.settle()
        batch.close()
        assert batch.pending == 0
        results.append(_exported(reader))
        provider.shutdown()
    assert results[0] == results[1]


def test_equal_waiting_adds_are_one_record() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    inst = Instruments(provider.get_meter("t"), summed=False)  # the SDK's synchronous counters
    batch = Batch(60.0)
    for _ in range(5):
        batch.add(inst.steps, 1, {"rb.fsm_state": "NORMAL"}, None)
    batch.add(inst.steps, 1, {"rb.fsm_state": "SLOW"}, None)
    assert batch.pending == 2
    batch.flush()
    batch.add(inst.steps, 1, {"rb.fsm_state": "NORMAL"}, None)  # after a flush, a new sum
    assert batch.pending == 1
    batch.close()
    assert _exported(reader)[("rb.steps", (("rb.fsm_state", "NORMAL"),))] == 6
    provider.shutdown()


def test_summed_counters_are_added_at_once_not_queued() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    inst = Instruments(provider.get_meter("t"))
    batch = Batch(60.0)
    batch.add(inst.steps, 1, {"rb.fsm_state": "NORMAL"}, None)
    batch.add(inst.steps, 2, {"rb.fsm_state": "NORMAL"}, None)
    assert batch.pending == 0
    assert _exported(reader)[("rb.steps", (("rb.fsm_state", "NORMAL"),))] == 3
    provider.shutdown()


#: How long a test waits for the flusher thread: twice the handover bound, and a second for a slow machine.
_HANDOVER_WAIT_S = 2 * HANDOVER_BOUND_MS / 1000 + 1.0


def test_a_watched_batch_takes_the_flushers_lock_once_and_its_later_work_is_still_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``settle`` hands a batch to the flusher thread once per quiet spell: the steps after the first queue into a
    watched batch without the flusher's lock, and the flusher still does all of it within the handover bound.
    Once done, the next work is watched afresh."""
    from rb_otel.telemetry import batch as batch_module

    reader = InMemoryMetricReader()
    histogram = MeterProvider(metric_readers=[reader]).get_meter("t").create_histogram("h")
    watched: list[Batch] = []
    real_watch = batch_module._FLUSHER.watch

    def counting_watch(batch: Batch) -> None:
        watched.append(batch)
        real_watch(batch)

    monkeypatch.setattr(batch_module._FLUSHER, "watch", counting_watch)
    batch = Batch(window=0.05)
    for spell in (1, 2):
        batch.flush()  # the window starts now: what follows waits
        for value in range(5):
            batch.record(histogram, float(value), {}, None)
            batch.settle()
        assert len(watched) == spell and batch.pending == 5  # watched once for the five steps
        wait_until(lambda: batch.pending == 0, timeout=_HANDOVER_WAIT_S, interval=0.01, what="the queue done")
        assert batch.pending == 0  # the flusher did every step's work, the ones queued while watched too
    data = reader.get_metrics_data()
    assert data is not None
    (point,) = data.resource_metrics[0].scope_metrics[0].metrics[0].data.data_points
    assert point.count == 10


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=0.004), min_size=1, max_size=30))
def test_work_queued_while_the_flusher_does_the_queue_is_never_left_behind(pauses: list[float]) -> None:
    """However a run's steps fall against the flusher thread's turns (it clears a batch's watch, then does its
    queue), nothing a step queued is left waiting once the run goes quiet for the handover bound."""
    reader = InMemoryMetricReader()
    histogram = MeterProvider(metric_readers=[reader]).get_meter("t").create_histogram("h")
    batch = Batch(window=0.005)
    for pause in pauses:
        batch.record(histogram, 1.0, {}, None)
        batch.settle()
        time.sleep(pause)
    wait_until(lambda: batch.pending == 0, timeout=_HANDOVER_WAIT_S, interval=0.005, what="the queue done")
    assert batch.pending == 0
