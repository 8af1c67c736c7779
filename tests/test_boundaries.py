"""Every strict comparison the spec states, pinned on its boundary.

Thresholds here are sums that are exact in binary floating point (multiples of 1/8), so "exactly on the
boundary" really is: ``0.2 + 0.1`` is ``0.30000000000000004`` and would leave ``>`` vs ``>=`` untested. The rule
for users is in docs/development.md: a threshold plus or minus the hysteresis margin is computed in floating point.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rb_otel.importers import replay
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.monitors.features import _compute
from rb_otel.steering.monitors.local import LocalMonitorBackend, MonitorRequest
from rb_otel.steering.monitors.v1 import semantic_loop
from rb_otel.steering.text import content_words, jaccard
from rb_otel.types import FSMState, StepRecord

FAST, SLOW, SKIP, MARGIN = 0.25, 0.75, 0.875, 0.25
assert FAST + MARGIN == 0.5 and SLOW - MARGIN == 0.5  # exact in binary


def above(x: float) -> float:
    return math.nextafter(x, 2.0)


def below(x: float) -> float:
    return math.nextafter(x, -1.0)


@pytest.fixture
def fsm() -> DifficultyFSM:
    return DifficultyFSM(
        fast_threshold=FAST, slow_threshold=SLOW, skip_threshold=SKIP, hysteresis_margin=MARGIN,
        fast_window=2, slow_window=2, skip_window=2,
    )  # fmt: skip


def test_fast_exit_is_strictly_above_threshold_plus_margin(fsm: DifficultyFSM) -> None:
    assert fsm.transition(FSMState.FAST, [0.5]) is FSMState.FAST
    assert fsm.transition(FSMState.FAST, [above(0.5)]) is FSMState.NORMAL


def test_slow_exit_is_strictly_below_threshold_minus_margin(fsm: DifficultyFSM) -> None:
    assert fsm.transition(FSMState.SLOW, [0.9, 0.5]) is FSMState.SLOW
    assert fsm.transition(FSMState.SLOW, [0.9, below(0.5)]) is FSMState.NORMAL
    assert fsm.transition(FSMState.SKIP, [0.9, 0.5]) is FSMState.SKIP
    assert fsm.transition(FSMState.SKIP, [0.9, below(0.5)]) is FSMState.NORMAL


def test_entries_are_strict(fsm: DifficultyFSM) -> None:
    assert fsm.transition(FSMState.NORMAL, [SLOW, SLOW]) is FSMState.NORMAL
    assert fsm.transition(FSMState.NORMAL, [above(SLOW), above(SLOW)]) is FSMState.SLOW
    assert fsm.transition(FSMState.NORMAL, [FAST, FAST]) is FSMState.NORMAL
    assert fsm.transition(FSMState.NORMAL, [below(FAST), below(FAST)]) is FSMState.FAST
    assert fsm.transition(FSMState.SLOW, [SKIP, SKIP]) is FSMState.SLOW
    assert fsm.transition(FSMState.SLOW, [above(SKIP), above(SKIP)]) is FSMState.SKIP
    # one score in the window on the wrong side keeps the state
    assert fsm.transition(FSMState.NORMAL, [SLOW, above(SLOW)]) is FSMState.NORMAL
    assert fsm.transition(FSMState.SLOW, [SKIP, above(SKIP)]) is FSMState.SLOW


def _record(i: int, action_input: str) -> StepRecord:
    return StepRecord(step_index=i, thought="Trying the tool.", action="search", action_input=action_input)


def test_semantic_loop_counts_a_jaccard_of_exactly_point_six() -> None:
    a, b = "alpha bravo charlie delta", "alpha bravo charlie echo"  # 3 shared of 5: exactly 0.6
    assert jaccard(content_words(a), content_words(b)) == 0.6
    window = [_compute(_record(0, a)), _compute(_record(1, b))]
    assert semantic_loop(window, frozenset()) == pytest.approx(1 / 3)
    c = "alpha bravo echo foxtrot"  # 2 shared of 6
    assert jaccard(content_words(a), content_words(c)) < 0.6
    assert semantic_loop([_compute(_record(0, a)), _compute(_record(1, c))], frozenset()) == 0.0


def test_a_monitor_fires_at_exactly_the_threshold() -> None:
    steps = [_record(i, "alpha bravo charlie delta") for i in range(3)]  # two earlier repeats: score 2/3
    request = MonitorRequest(model="m", task_profile="coding", steps=steps)
    at = LocalMonitorBackend(fire_threshold=2 / 3).evaluate(request)
    assert at.scores["semantic_loop"] == 2 / 3 and "semantic_loop" in at.fired
    over = LocalMonitorBackend(fire_threshold=above(2 / 3)).evaluate(request)
    assert "semantic_loop" not in over.fired


def test_io_harness_commits_the_last_row_of_a_step(tmp_path: Path) -> None:
    from test_importers import make_store

    path = tmp_path / "store.sqlite3"
    make_store(path)  # step 2 of run 1 has three rows: a first attempt, a retry after a 503, the committed one
    [run] = replay(path)
    assert [e.thought_preview for e in run.steps] == [
        "wrote docs/dry-run.md",
        "spawned the test writer",
        "wrote the flag",
    ]


# -- what validation accepts, on its edges -------------------------------------------------------------------


def test_threshold_validation_edges() -> None:
    DifficultyFSM(fast_threshold=0.0, slow_threshold=1.0, skip_threshold=1.0, hysteresis_margin=0.0)  # both ends
    DifficultyFSM(fast_window=1, slow_window=1, skip_window=1)  # a window of one step is allowed
    for bad in (True, float("nan"), float("inf"), -0.01, 1.01, "0.5"):
        with pytest.raises(ValueError, match=r"DifficultyFSM: slow_threshold must be"):
            DifficultyFSM(slow_threshold=bad)
    for bad_window in (0, True, 2.0):
        with pytest.raises(ValueError, match=r"DifficultyFSM: slow_window must be"):
            DifficultyFSM(slow_window=bad_window)
    with pytest.raises(
        ValueError, match=r"^DifficultyFSM: fast_threshold must be below slow_threshold \(0\.5 >= 0\.5\)$"
    ):
        DifficultyFSM(fast_threshold=0.5, slow_threshold=0.5)
    with pytest.raises(ValueError, match=r"unknown threshold key\(s\) a, b; accepted: fast_threshold, fast_window, "):
        DifficultyFSM(b=1, a=2)


def test_windows_over_any_sequence_equal_windows_over_lists(fsm: DifficultyFSM) -> None:
    from collections import deque

    for history in ([0.9, 0.1, 0.9, 0.9], [0.1, 0.2, 0.1], [0.9, 0.95, 0.96]):
        for state in (FSMState.NORMAL, FSMState.SLOW, FSMState.FAST):
            assert fsm.transition(state, deque(history)) is fsm.transition(state, history)
