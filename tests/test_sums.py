"""The contract's counters as in-process sums (``rb_otel/telemetry/sums.py``) export what the SDK's synchronous
counters (the plain definition) export: the same points, kinds and temporality, for any sequence of adds and for
real agent runs."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from conftest import add, calc_script
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from opentelemetry.sdk.metrics import Counter, MeterProvider, ObservableCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

from rb_otel import ReasonBlocks
from rb_otel.telemetry import hub
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.sums import SummedCounter
from rb_otel.testing import ScriptedChatModel

# what OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE=delta selects (up-down counters stay cumulative)
DELTA = {Counter: AggregationTemporality.DELTA, ObservableCounter: AggregationTemporality.DELTA}
LABELS = [{}, {"a": "x"}, {"a": "y"}, {"a": "x", "b": "1"}, {"b": "1", "a": "x"}, {"c": 2}]  # 3 and 4: one set


def _points(reader: InMemoryMetricReader) -> dict[str, Any]:
    """Per metric: its kind, monotonicity, temporality and ``{attributes: value}``."""
    out: dict[str, Any] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                sums = getattr(metric.data, "is_monotonic", None)
                if sums is None:
                    continue  # histograms: not what this module changes
                out[metric.name] = (
                    type(metric.data).__name__,
                    metric.data.is_monotonic,
                    metric.data.aggregation_temporality,
                    metric.unit,
                    metric.description,
                    {frozenset((p.attributes or {}).items()): p.value for p in metric.data.data_points},
                )
    return out


def _pair(temporality: dict[type, AggregationTemporality] | None) -> tuple[Any, ...]:
    readers = [InMemoryMetricReader(preferred_temporality=temporality or {}) for _ in range(2)]
    meters = [MeterProvider(metric_readers=[r]).get_meter("t") for r in readers]
    summed = (
        SummedCounter(meters[0], "c", unit="{x}", description="d"),
        SummedCounter(meters[0], "u", unit="{x}", description="d", monotonic=False),
    )
    plain = (
        meters[1].create_counter("c", unit="{x}", description="d"),
        meters[1].create_up_down_counter("u", unit="{x}", description="d"),
    )
    return readers, summed, plain


adds = st.lists(
    st.tuples(st.sampled_from([0, 1]), st.integers(0, 5), st.sampled_from(range(len(LABELS))), st.booleans()),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(adds=adds, delta=st.booleans())
def test_any_sequence_of_adds_exports_the_same_points(adds: list[tuple[int, int, int, bool]], delta: bool) -> None:
    (summed_reader, plain_reader), summed, plain = _pair(DELTA if delta else None)
    for which, amount, label, collect in adds:
        value = amount if which == 0 else amount - 2  # the up-down counter goes both ways
        summed[which].add(value, LABELS[label])
        plain[which].add(value, LABELS[label])
        if collect:  # a collection between adds: delta points must restart from it alike
            _same(_points(summed_reader), _points(plain_reader))
    _same(_points(summed_reader), _points(plain_reader))


def _same(summed: dict[str, Any], plain: dict[str, Any]) -> None:
    """Equal, but for the one documented difference: with delta temporality a series idle since the last
    collection exports a 0 point from the sums where the synchronous counter exports none (a sum adds nothing)."""
    for name in set(summed) | set(plain):
        ours, theirs = summed.get(name), plain.get(name)
        if theirs is None:
            assert ours is not None and ours[2] is AggregationTemporality.DELTA and set(ours[5].values()) == {0}
            continue
        assert ours is not None and ours[:5] == theirs[:5], name
        idle = {key: value for key, value in ours[5].items() if key not in theirs[5]}
        assert ours[2] is AggregationTemporality.DELTA or not idle, name
        assert set(idle.values()) <= {0}, name
        assert {key: value for key, value in ours[5].items() if key in theirs[5]} == theirs[5], name


def test_sequence_attribute_values_are_one_series() -> None:
    (summed_reader, plain_reader), summed, plain = _pair(None)
    for counter in (summed[0], plain[0]):
        counter.add(1, {"s": ["a", "b"]})
        counter.add(2, {"s": ["a", "b"]})
    assert _points(summed_reader) == _points(plain_reader)


def _agent_runs(otel_reader: InMemoryMetricReader, *, summed: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(hub, "Instruments", functools.partial(Instruments, summed=summed))
    rb = ReasonBlocks(meter_provider=MeterProvider(metric_readers=[otel_reader]), telemetry_batch_window=0)
    for calls in (1, 3, 6):
        agent = create_agent(
            ScriptedChatModel(script=calc_script(calls, thought="Maybe this is wrong, not sure; retrying.")),
            [add],
            middleware=[rb.middleware(agent_name=f"calc{calls % 2}")],
        )
        agent.invoke({"messages": [("user", "add them")]})
    return _points(otel_reader)


def test_real_agent_runs_export_the_same_counters(monkeypatch: pytest.MonkeyPatch) -> None:
    summed = _agent_runs(InMemoryMetricReader(), summed=True, monkeypatch=monkeypatch)
    plain = _agent_runs(InMemoryMetricReader(), summed=False, monkeypatch=monkeypatch)
    assert summed == plain
    assert {"rb.steps", "rb.runs", "rb.runs.active", "rb.fsm.transitions", "rb.runs.skip"} <= set(summed)
    steps = summed["rb.steps"][-1]
    assert sum(steps.values()) == 2 + 4 + 7  # every model call of the three runs


def test_two_reasonblocks_on_one_meter_provider_add_to_the_same_counters() -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    for rb in (ReasonBlocks(meter_provider=provider), ReasonBlocks(meter_provider=provider, telemetry_enabled=False)):
        mw = rb.ab_middleware("exp", unit_id="u1", on_fraction=1.0, agent_name="twin")  # telemetry forced on
        agent = create_agent(ScriptedChatModel(script=calc_script(1)), [add], middleware=[mw])
        agent.invoke({"messages": [("user", "add")]})
        rb.flush()
    runs = _points(reader)["rb.runs"][-1]
    assert sum(runs.values()) == 2  # the enabled one's run and the disabled one's always-on run
