"""DifficultyFSM: spec section 4, checked at the boundaries and against an independent transcription."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel import FSMState
from rb_otel.steering import DifficultyFSM

F, N, S, K = FSMState.FAST, FSMState.NORMAL, FSMState.SLOW, FSMState.SKIP


def run(scores: list[float], **thresholds: float) -> list[FSMState]:
    fsm = DifficultyFSM(**thresholds)
    state, history, states = FSMState.INIT, [], []
    for s in scores:
        history.append(s)
        state = fsm.transition(state, history)
        states.append(state)
    return states


def reference(scores: list[float]) -> list[FSMState]:
    """The rules of spec 4.3 written out independently, defaults only."""
    out: list[FSMState] = []
    state = "INIT"
    for i, s in enumerate(scores):
        h = scores[: i + 1]
        if state == "INIT":
            state = "NORMAL"
        elif state == "NORMAL":
            if len(h) >= 6 and max(h[-6:]) < 0.2:
                state = "FAST"
            elif len(h) >= 5 and min(h[-5:]) > 0.6:
                state = "SLOW"
        elif state == "FAST":
            if s > 0.2 + 0.1:
                state = "NORMAL"
        elif state == "SLOW":
            if s < 0.6 - 0.1:
                state = "NORMAL"
            elif len(h) >= 35 and min(h[-35:]) > 0.85:
                state = "SKIP"
        elif state == "SKIP" and s < 0.6 - 0.1:
            state = "NORMAL"
        out.append(FSMState(state))
    return out


def test_first_scored_step_goes_to_normal_whatever_the_score() -> None:
    assert run([0.99]) == [N]
    assert run([0.0]) == [N]


def test_fast_after_six_scores_below_0_2() -> None:
    assert run([0.1] * 6) == [N, N, N, N, N, F]


def test_fast_threshold_is_strict() -> None:
    assert run([0.2] * 8)[-1] is N
    assert run([0.1] * 5 + [0.2])[-1] is N


def test_fast_exit_hysteresis_at_0_3_is_strict() -> None:
    assert run([0.1] * 6 + [0.30])[-1] is F
    assert run([0.1] * 6 + [0.31])[-1] is N


def test_slow_after_five_scores_above_0_6_and_strict() -> None:
    assert run([0.9] * 5) == [N, N, N, N, S]
    assert run([0.6] * 8)[-1] is N


def test_slow_exit_at_0_5_is_strict() -> None:
    assert run([0.9] * 5 + [0.5])[-1] is S
    assert run([0.9] * 5 + [0.49])[-1] is N


def test_skip_after_35_scores_above_0_85_and_strict() -> None:
    states = run([0.9] * 35)
    assert states[4] is S and states[33] is S and states[34] is K
    assert run([0.85] * 40)[-1] is S


def test_skip_exit_and_no_skip_to_slow_edge() -> None:
    base = [0.9] * 35
    assert run([*base, 0.55])[-1] is K  # 0.55 is neither an exit nor a way back to SLOW
    assert run([*base, 0.7])[-1] is K
    assert run([*base, 0.49])[-1] is N


def test_window_spans_history_recorded_in_earlier_states() -> None:
    # Leaving SLOW with 0.4 means five fresh scores > 0.6 are needed to come back.
    states = run([0.9] * 5 + [0.4] + [0.9] * 5)
    assert states[5] is N
    assert states[6:10] == [N, N, N, N]
    assert states[10] is S


def test_thresholds_are_configurable_and_partial() -> None:
    assert run([0.5] * 3, slow_threshold=0.4, slow_window=3)[-1] is S
    assert DifficultyFSM(fast_window=2).thresholds.slow_window == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fast_treshold": 0.1}, "unknown threshold key"),
        ({"fast_window": 0}, "at least 1"),
        ({"slow_threshold": 1.5}, "within"),
        ({"skip_threshold": -0.1}, "within"),
        ({"hysteresis_margin": float("nan")}, "finite"),
        ({"fast_window": 2.5}, "integer"),
        ({"fast_threshold": 0.7}, "below slow_threshold"),
    ],
)
def test_nonsense_thresholds_are_rejected_clearly(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DifficultyFSM(**kwargs)


def test_end_is_never_returned_and_sticky_if_set_by_hand() -> None:
    fsm = DifficultyFSM()
    assert fsm.transition(FSMState.END, [0.1]) is FSMState.END
    assert FSMState.END not in run([0.0, 1.0] * 50 + [0.95] * 60)


scores = st.lists(
    st.sampled_from([0.0, 0.1, 0.19, 0.2, 0.21, 0.3, 0.31, 0.49, 0.5, 0.55, 0.6, 0.61, 0.85, 0.86, 0.9, 1.0]),
    max_size=120,
)


@settings(max_examples=400, deadline=None)
@given(scores)
def test_fsm_matches_independent_transcription(seq: list[float]) -> None:
    assert run(seq) == reference(seq)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), max_size=80))
def test_fsm_matches_transcription_on_arbitrary_floats(seq: list[float]) -> None:
    assert run(seq) == reference(seq)
