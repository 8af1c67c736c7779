"""Value types: StepLogEntry.as_dict rules and round trip, FSMState."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rb_otel import FSMState, StepLogEntry
from rb_otel.types import ETrace

ALWAYS = {
    "step",
    "timestamp",
    "fsm_state",
    "injections",
    "injection_sources",
    "intervention_texts",
    "monitors_fired",
    "thought_preview",
    "tool_calls",
    "tokens",
    "latency_ms",
}


def test_as_dict_omits_empty_optional_fields_and_keeps_the_rest() -> None:
    d = StepLogEntry(step=0, fsm_state="INIT", thought_preview="(first call)").as_dict()
    assert set(d) == ALWAYS
    assert d["injections"] == [] and d["tokens"] == 0


def test_as_dict_rounds_and_includes_optional_fields_when_set() -> None:
    e = StepLogEntry(
        step=3,
        fsm_state="SLOW",
        thought_preview="t",
        difficulty=0.123456,
        model_id="a:b",
        skipped_reason="r",
        failure_type="semantic_loop",
        latency_ms=12.345,
    )
    d = e.as_dict()
    assert d["difficulty"] == 0.1235 and d["latency_ms"] == 12.3
    assert d["model_id"] == "a:b" and d["skipped_reason"] == "r" and d["failure_type"] == "semantic_loop"
    json.dumps(d)


def test_fsm_state_values_round_trip() -> None:
    assert [s.value for s in FSMState] == ["INIT", "FAST", "NORMAL", "SLOW", "SKIP", "END"]
    assert FSMState("SLOW") is FSMState.SLOW


def test_etrace_level_alias() -> None:
    assert ETrace(tier="e2").level == "e2"


entries = st.builds(
    StepLogEntry,
    step=st.integers(0, 10_000),
    fsm_state=st.sampled_from(["INIT", "FAST", "NORMAL", "SLOW", "SKIP"]),
    thought_preview=st.text(max_size=120),
    timestamp=st.floats(0, 2e9),
    difficulty=st.none() | st.floats(0, 1),
    model_id=st.text(max_size=20),
    injections=st.lists(st.text(max_size=150), max_size=3),
    tool_calls=st.lists(st.text(max_size=10), max_size=3),
    tokens=st.integers(0, 10**7),
    latency_ms=st.floats(0, 1e6),
    failure_type=st.none() | st.text(min_size=1, max_size=10),
)


@given(entries)
def test_from_dict_inverts_as_dict(entry: StepLogEntry) -> None:
    data = json.loads(json.dumps(entry.as_dict()))
    back = StepLogEntry.from_dict(data)
    assert back.as_dict() == entry.as_dict()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"fsm_state": "INIT"}, "missing the field 'step'"),
        ({"step": "x", "fsm_state": "INIT"}, "integer"),
        ({"step": 1, "fsm_state": "WARP"}, "bad step log entry"),
    ],
)
def test_from_dict_errors_are_clear(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StepLogEntry.from_dict(data)
