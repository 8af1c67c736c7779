"""A long thought costs a bounded amount: the heuristic scorer and the monitors read its head and tail
(``rb_otel.steering.text.text_view``), and score and fire on a 50,000-character thought exactly as on that view."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.steering import DifficultyFSM, SteeringSession, TraceStateManager, create_injections, score_step
from rb_otel.steering.monitors.features import _compute
from rb_otel.steering.text import MAX_TEXT_CHARS, TEXT_VIEW, bounded_view, text_view
from rb_otel.types import StepRecord

WORDS = (
    "maybe the test fails because KeyError in src/auth.py is not handled I think we should retry perhaps "
    "done fixed the patch all tests pass now let me check again instead actually no wait".split()
)


def _thought(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:chars]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), chars=st.integers(0, 60_000))
def test_the_heuristic_scores_any_thought_as_its_view(seed: int, chars: int) -> None:
    text = _thought(random.Random(seed), chars)
    view = text_view(text)
    assert len(view) <= MAX_TEXT_CHARS
    assert (view is text) == (len(text) <= MAX_TEXT_CHARS)
    assert score_step(text) == score_step(view)


def test_the_view_is_the_head_and_the_tail() -> None:
    text = "a" * 3000 + "MIDDLE" + "z" * 47_000
    view = text_view(text)
    head, tail = TEXT_VIEW
    assert view == text[:head] + "\n" + text[-tail:] and "MIDDLE" not in view
    assert text_view(text) is view  # asked again for the same object: the same view, its tokens cached
    assert text_view(view) is view  # a view is its own view
    assert bounded_view(text, head, tail) == view


def test_a_50k_thought_scores_as_its_view_and_the_end_counts() -> None:
    calm = _thought(random.Random(1), 48_000).replace("maybe", "so").replace("perhaps", "so")
    worried = calm + " " + "maybe perhaps not sure I think it fails again KeyError " * 30
    assert score_step(worried) == score_step(text_view(worried))
    assert score_step(worried) > score_step(calm)  # the tail, where the decision is, is read


def test_the_monitors_read_a_long_thought_as_its_view() -> None:
    long_thought = _thought(random.Random(3), 50_000) + " we are done, the fix should work"
    record = StepRecord(step_index=0, thought=long_thought, action="edit", action_input="src/a.py", difficulty=0.5)
    viewed = StepRecord(
        step_index=0, thought=text_view(long_thought), action="edit", action_input="src/a.py", difficulty=0.5
    )
    assert _compute(record) == _compute(viewed)
    assert _compute(record).declares_done  # "should work" at the very end is seen


def _session() -> SteeringSession:
    return SteeringSession(fsm=DifficultyFSM(), state_manager=TraceStateManager(), injections=create_injections())


def test_a_session_steers_a_long_thought_as_its_view() -> None:
    rng = random.Random(11)
    thoughts = [_thought(rng, 50_000) for _ in range(6)]
    full, viewed = _session(), _session()
    full.begin_step(thought=None)
    viewed.begin_step(thought=None)
    for thought in thoughts:
        a = full.begin_step(thought=thought, action="bash", action_input="pytest -x", observation="1 failed")
        b = viewed.begin_step(
            thought=text_view(thought), action="bash", action_input="pytest -x", observation="1 failed"
        )
        assert (a.entry.difficulty, a.state, a.entry.monitors_fired) == (
            b.entry.difficulty,
            b.state,
            b.entry.monitors_fired,
        )
        full.end_step(a, tokens=10)
        viewed.end_step(b, tokens=10)
