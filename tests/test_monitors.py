"""Monitors: profiles and weight resolution, the six local v1 heuristics, and the exact v0 suite."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.steering import LocalMonitorBackend
from rb_otel.steering.monitors import (
    DEFAULT_WEIGHTS,
    PROFILES,
    V1_MONITORS,
    MonitorRequest,
    evaluate_all,
    register_profile,
    resolve_weights,
    v0_signals,
)
from rb_otel.steering.monitors.local import INTERVENTION_TEXTS
from rb_otel.types import StepRecord


def rec(
    i: int, thought: str = "", action: str | None = None, action_input: object = None, observation: str | None = None
) -> StepRecord:
    text = action_input if action_input is None or isinstance(action_input, str) else json.dumps(action_input)
    return StepRecord(step_index=i, thought=thought, action=action, action_input=text, observation=observation)


def evaluate(steps: list[StepRecord], profile: str = "coding", task: str = "", **weights: float):
    backend = LocalMonitorBackend()
    return backend.evaluate(
        MonitorRequest(model="m", task_profile=profile, steps=steps, task=task, weights=weights or None)
    )


# -- profiles ------------------------------------------------------------------------------------------------


def test_profile_tables_sum_to_one_and_match_the_spec() -> None:
    for name in ("coding", "pr_review", "qa"):
        assert sum(PROFILES[name].values()) == pytest.approx(1.0)
    assert PROFILES["coding"]["claim_contradiction"] == 0.30
    assert PROFILES["pr_review"]["semantic_loop"] == 0.30
    assert PROFILES["qa"]["silent_topic_drift"] == 0.25


def test_overrides_are_partial_clamped_and_unknown_names_dropped() -> None:
    w = resolve_weights("coding", {"semantic_loop": 2.0, "late_sprawl": -1, "made_up": 0.5})
    assert w["semantic_loop"] == 1.0
    assert w["late_sprawl"] == 0.0
    assert "made_up" not in w
    assert w["claim_contradiction"] == 0.30  # untouched, not renormalised


def test_unknown_profile_and_bad_weight_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown task_profile 'nope'"):
        resolve_weights("nope")
    with pytest.raises(ValueError, match="finite number"):
        resolve_weights("coding", {"semantic_loop": "high"})  # type: ignore[dict-item]


def test_custom_profile_can_be_registered_and_used() -> None:
    register_profile("test-custom", {"semantic_loop": 0.9})
    w = resolve_weights("test-custom")
    assert w["semantic_loop"] == 0.9 and w["verification_skip"] == PROFILES["coding"]["verification_skip"]


# -- local backend: response shape -----------------------------------------------------------------------------


def test_empty_trace_is_a_quiet_evaluation() -> None:
    ev = evaluate([])
    assert not ev.inject and ev.fired == () and ev.composite == 0.0
    assert set(ev.scores) == set(V1_MONITORS)


def test_response_has_the_evaluate_shape_and_composite_is_the_weighted_sum() -> None:
    steps = [rec(i, "searching again", "search", {"query": "session timeout"}) for i in range(4)]
    ev = evaluate(steps)
    assert set(ev.as_dict()) == {
        "inject",
        "intervention_text",
        "fired",
        "scores",
        "composite",
        "failure_type",
        "intervention_source",
    }
    weights = PROFILES["coding"]
    assert ev.composite == pytest.approx(sum(weights[k] * v for k, v in ev.scores.items()), abs=1e-6)
    assert "semantic_loop" in ev.fired
    assert ev.inject and ev.failure_type in ev.fired
    assert ev.intervention_text == INTERVENTION_TEXTS[ev.failure_type]


def test_profile_changes_the_composite() -> None:
    steps = [rec(i, "searching again", "search", {"query": "session timeout"}) for i in range(4)]
    assert evaluate(steps, "pr_review").composite > evaluate(steps, "qa").composite


# -- the six heuristics, each firing and not firing -------------------------------------------------------------


def test_semantic_loop_counts_paraphrased_repeats_only() -> None:
    paraphrases = ["session timeouts", "the session timeout", "session timeout", "timeout session"]
    looping = [rec(i, "look", "search", {"query": q}) for i, q in enumerate(paraphrases)]
    assert evaluate(looping).scores["semantic_loop"] == 1.0
    varied = [rec(i, "look", "search", {"query": q}) for i, q in enumerate(["auth", "cookie parser", "db pool"])]
    assert evaluate(varied).scores["semantic_loop"] == 0.0


def test_verification_skip_fires_when_done_is_declared_after_an_unverified_edit() -> None:
    steps = [
        rec(0, "reading", "read_file", {"path": "a.py"}),
        rec(1, "edit", "str_replace_editor", {"path": "a.py"}),
        rec(2, "Done, the fix is complete."),
    ]
    assert "verification_skip" in evaluate(steps).fired
    verified = [*steps[:2], rec(2, "run tests", "bash", "pytest tests/"), rec(3, "Done, the fix is complete.")]
    assert evaluate(verified).scores["verification_skip"] == 0.0


def test_cyclic_compression_fires_on_repeated_recaps() -> None:
    steps = [rec(i, f"To summarize what we know so far, item {i}.") for i in range(4)]
    assert "cyclic_compression" in evaluate(steps).fired
    assert (
        evaluate([rec(i, f"Opening file number {i}.", "read_file", f"f{i}.py") for i in range(4)]).scores[
            "cyclic_compression"
        ]
        == 0.0
    )


def test_late_sprawl_fires_on_new_tools_late_in_the_run() -> None:
    early = [rec(i, "work", "read_file", f"src/a{i % 2}.py") for i in range(8)]
    late = [rec(8 + i, "new", tool, f"other/x{i}.py") for i, tool in enumerate(["browser", "sql", "curl", "ssh"])]
    assert "late_sprawl" in evaluate(early + late).fired
    assert evaluate(early + early[:4]).scores["late_sprawl"] == 0.0


def test_silent_topic_drift_fires_when_recent_steps_ignore_the_task() -> None:
    task = "fix the login session timeout bug in the auth module"
    on_topic = [rec(i, "checking the login session timeout in auth", "read_file", "auth.py") for i in range(6)]
    off_topic = on_topic[:3] + [
        rec(3 + i, "refactoring the billing invoices renderer", "read_file", "billing.py") for i in range(3)
    ]
    assert evaluate(on_topic, task=task).scores["silent_topic_drift"] == 0.0
    assert "silent_topic_drift" in evaluate(off_topic, task=task).fired
    announced = [*off_topic[:5], rec(5, "switching to billing instead", "read_file", "billing.py")]
    assert (
        evaluate(announced, task=task).scores["silent_topic_drift"]
        < evaluate(off_topic, task=task).scores["silent_topic_drift"]
    )


def test_claim_contradiction_fires_on_a_negated_claim_or_repeated_retractions() -> None:
    flip = [rec(0, "The parser is broken, clearly."), rec(1, "Looking closer, the parser is not broken.")]
    assert evaluate(flip).scores["claim_contradiction"] == 1.0
    retract = [rec(0, "Never mind, I was wrong about that."), rec(1, "Scratch that, my mistake again.")]
    assert "claim_contradiction" in evaluate(retract).fired
    assert evaluate([rec(0, "The parser is fine."), rec(1, "The cache is fine.")]).scores["claim_contradiction"] == 0.0


def test_observation_attached_after_evaluation_is_seen_next_time() -> None:
    backend = LocalMonitorBackend()
    steps = [rec(0, "x", "str_replace_editor", {"path": "a.py"})]
    request = MonitorRequest(model="", task_profile="coding", steps=steps)
    backend.evaluate(request)
    assert not backend._features.features(steps)[0].is_error  # what the backend cached before
    steps[0].observation = "Traceback: KeyError"
    steps.append(rec(1, "y", "read_file", "a.py"))
    backend.evaluate(request)
    # The backend's own cache (not a fresh one) recomputed the step whose observation arrived late.
    assert backend._features.features(steps)[0].is_error


def test_a_late_observation_recomputes_the_step_and_keeps_its_links() -> None:
    from rb_otel.steering.monitors.features import FeatureCache

    thought = "checking the session timeout handling in the auth module"
    steps = [rec(i, thought, "read_file", "src/auth.py") for i in range(3)]
    cache = FeatureCache()
    before = cache.features(steps)[-1]
    assert (before.restates, before.tool_gap, before.path_gaps, before.is_error) == (1, 1, (1,), False)
    steps[-1].observation = "Traceback: KeyError"  # attached after the step was evaluated
    after = cache.features(steps)[-1]
    assert after is not before and after.is_error
    assert (after.restates, after.tool_gap, after.path_gaps) == (1, 1, (1,))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(max_size=60), st.sampled_from([None, "search", "read_file", "edit", "bash"]), st.text(max_size=30)
        ),
        max_size=50,
    )
)
def test_scores_are_always_in_range(raw: list[tuple[str, str | None, str]]) -> None:
    steps = [rec(i, t, a, x if a else None) for i, (t, a, x) in enumerate(raw)]
    ev = evaluate(steps)
    assert all(0.0 <= s <= 1.0 for s in ev.scores.values())
    assert ev.inject == bool(ev.fired)


# -- v0 suite (spec 5.7, exact) ---------------------------------------------------------------------------------


def step(
    i: int,
    action: str = "",
    action_input: object = "",
    thought: str = "",
    observation: str = "",
    is_error: bool = False,
) -> dict[str, object]:
    return {
        "step_index": i,
        "action": action,
        "action_input": action_input,
        "thought": thought,
        "observation": observation,
        "is_error": is_error,
    }


def test_v0_default_weights() -> None:
    assert dict(DEFAULT_WEIGHTS) == {
        "streak": 0.35,
        "call_count": 0.15,
        "edit_revert": 0.15,
        "test_repeat": 0.15,
        "diversity": 0.10,
        "hedge": 0.10,
    }


@pytest.mark.parametrize(("run", "score"), [(1, 0.0), (2, 0.4), (3, 0.6), (5, 1.0), (7, 1.0)])
def test_v0_streak(run: int, score: float) -> None:
    steps = [step(0, "other", "x")] + [step(i + 1, "grep", "same") for i in range(run)]
    assert v0_signals(steps)["streak"] == pytest.approx(score)


def test_v0_streak_skips_steps_without_action() -> None:
    steps = [step(0, "grep", "a"), step(1), step(2, "grep", "a"), step(3), step(4, "grep", "a")]
    assert v0_signals(steps)["streak"] == pytest.approx(0.6)


def test_v0_call_count_fires_at_12() -> None:
    result = evaluate_all([step(i, f"t{i}", str(i)) for i in range(12)])
    assert result["scores"]["call_count"] == pytest.approx(0.6)
    assert "call_count" in result["fired"]


def test_v0_edit_revert_content_revert_and_edit_fail_edit() -> None:
    revert = [
        step(0, "edit", "alpha beta gamma delta"),
        step(1, "edit", "zzzz yyyy xxxx wwww"),
        step(2, "edit", "alpha beta gamma delta"),
    ]
    assert v0_signals(revert)["edit_revert"] == 1.0
    cycle = []
    for i in range(2):
        cycle += [
            step(4 * i, "edit", {"path": "a.py", "new": f"v{i}"}),
            step(4 * i + 1, "bash", "pytest", observation="Traceback: error", is_error=True),
        ]
    cycle.append(step(9, "edit", {"path": "a.py", "new": "v3"}))
    assert v0_signals(cycle)["edit_revert"] == 1.0
    assert v0_signals([step(0, "edit", {"path": "a.py"}), step(1, "edit", {"path": "b.py"})])["edit_revert"] == 0.0


def test_v0_test_repeat_normalises_noise() -> None:
    a = "FAILED test_x - AssertionError at 0x7f3a2b at 2026-01-02 10:11:12 pid=4242 in /tmp/abc123/t.py"
    b = "FAILED test_x - AssertionError at 0x11aa at 2027-05-06 01:02:03 pid=99 in /tmp/zzz/t.py"
    assert (
        v0_signals([step(0, "pytest", "", observation=a), step(1, "pytest", "", observation=b)])["test_repeat"] == 1.0
    )
    c = "FAILED test_y - AssertionError: other"
    assert (
        v0_signals([step(0, "pytest", "", observation=a), step(1, "pytest", "", observation=c)])["test_repeat"] == 0.0
    )


def test_v0_diversity() -> None:
    warm = [step(i, f"w{i}") for i in range(3)]
    assert v0_signals(warm + [step(10 + i, "grep") for i in range(5)])["diversity"] == 1.0
    assert v0_signals(warm + [step(10 + i, t) for i, t in enumerate("aabab")])["diversity"] == 0.7
    assert v0_signals(warm + [step(10 + i, t) for i, t in enumerate("ababa")])["diversity"] == 0.0
    assert v0_signals([step(i, "grep") for i in range(7)])["diversity"] == 0.0  # fewer than 8 calls


def test_v0_hedge() -> None:
    assert v0_signals([step(0, thought="I was wrong about the cache.")])["hedge"] == 1.0
    early = [step(i, thought="the value is set by the loader here") for i in range(3)]
    late = [step(3 + i, thought="maybe perhaps it might be, not sure") for i in range(3)]
    assert v0_signals(early + late)["hedge"] == 1.0
    assert v0_signals(early + early)["hedge"] == 0.0


def test_v0_evaluate_all_merges_partial_weights() -> None:
    result = evaluate_all([step(i, "grep", "q") for i in range(5)], weights={"streak": 0.5})
    assert result["weights"]["streak"] == 0.5 and result["weights"]["hedge"] == 0.10
    assert result["total"] == pytest.approx(sum(result["weights"][k] * v for k, v in result["scores"].items()))
