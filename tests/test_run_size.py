"""The run's own size, a label-free default (docs/signal.md, "A default pilot per kind"): it ranks runs as their
sizes do from an agent's first run, while its SLOW stays relative to the agent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.pilot import MemorySummaryStore, PilotModel, PilotRun
from rb_otel.steering.pilot.baselines import RELATIVE_AFTER
from rb_otel.steering.pilot.model import PILOT_SIZE, RUN_SIZE_FEATURES, run_size, size_default
from rb_otel.steering.scoring import ScorerStep
from rb_otel.training.thresholds import fsm_states

#: the coding default's prior, its typical run made round
PRIOR = {**PilotModel.default_for("coding").prior, "median_steps": 20.0, "median_chars": 10_000.0,
         "median_context": 20_000.0}  # fmt: skip


def _steps(n: int, *, chars: int, tokens: int) -> list[ScorerStep]:
    """``n`` steps writing ``chars`` characters each (thought and action input), every call ``tokens`` long."""
    return [ScorerStep(thought="x" * (chars - 2), action="bash", action_input="ls", observation="ok", tokens=tokens)
            for _ in range(n)]  # fmt: skip


def _scores(run: PilotRun, steps: list[ScorerStep]) -> list[float]:
    out = [run.score(step) for step in steps]
    run.finish()
    return out


def test_a_run_the_size_of_the_kinds_typical_run_scores_one_half() -> None:
    model = run_size(PRIOR)
    assert model.version == PILOT_SIZE and model.features == RUN_SIZE_FEATURES and model.trained["size"] == "run"
    run = PilotRun(model, BaselineCache(MemorySummaryStore()), "fresh|m")
    # 20 steps of 500 characters and a last call of 20,000 tokens: the prior's medians
    scores = _scores(run, _steps(20, chars=500, tokens=20_000))
    assert scores[-1] == pytest.approx(0.5, abs=1e-9)
    assert scores == sorted(scores)  # a run only grows


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 2_000), st.integers(2, 2_000), st.integers(100, 50_000), st.integers(100, 50_000))
def test_it_ranks_two_runs_at_a_step_as_their_sizes_do_from_the_agents_first_run(
    chars_a: int, chars_b: int, tokens_a: int, tokens_b: int
) -> None:
    model = run_size(PRIOR)
    a = _scores(
        PilotRun(model, BaselineCache(MemorySummaryStore()), "new|m"), _steps(10, chars=chars_a, tokens=tokens_a)
    )
    b = _scores(
        PilotRun(model, BaselineCache(MemorySummaryStore()), "new|m"), _steps(10, chars=chars_b, tokens=tokens_b)
    )
    if chars_a >= chars_b and tokens_a >= tokens_b:
        assert a[-1] >= b[-1]
    if chars_a > chars_b and tokens_a > tokens_b:
        assert a[-1] > b[-1]  # no tie, though neither run has an earlier run of its agent to be compared with


def test_its_slow_is_relative_to_the_agents_own_runs() -> None:
    model = run_size(PRIOR)
    baselines = BaselineCache(MemorySummaryStore())
    for _ in range(RELATIVE_AFTER):  # an agent whose runs are all short: 8 steps of 100 characters, small calls
        _scores(PilotRun(model, baselines, "small|m"), _steps(8, chars=100, tokens=2_000))
    states = {}
    for name, steps in (("usual", _steps(8, chars=100, tokens=2_000)), ("long", _steps(30, chars=100, tokens=6_000))):
        run = PilotRun(model, baselines, "small|m")
        fsm = DifficultyFSM(**run.fsm_thresholds())
        states[name] = fsm_states(fsm, _scores(run, steps))
    # both runs are far below the kind's typical run; the long one is longer than every run this agent ended
    assert "SLOW" not in states["usual"] and "SLOW" in states["long"]
    assert "SKIP" not in states["long"]  # SKIP stays off
    assert "FAST" not in states["usual"]  # never FAST


def test_a_size_default_is_named() -> None:
    assert size_default("run", PRIOR).trained["size"] == "run"
    assert size_default("agent-relative", PRIOR).trained["size"] == "agent-relative"
    with pytest.raises(ValueError, match="size default 'bogus': one of agent-relative, run"):
        size_default("bogus", PRIOR)
