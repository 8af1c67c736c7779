"""research/skip_ceiling.py: the most a SKIP on one size could stop within the false-stop budget, in hindsight."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.evaluation.metrics import wilson_upper
from rb_otel.steering.scoring import ScorerStep
from rb_otel.training.dataset import LabelledRun

SCRIPT = Path(__file__).resolve().parent.parent / "research" / "skip_ceiling.py"


@pytest.fixture(scope="module")
def ceiling() -> ModuleType:
    spec = importlib.util.spec_from_file_location("research_skip_ceiling", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(i: int, failed: bool, steps: int, chars: int = 100, tokens: int = 1000) -> LabelledRun:
    done = [ScorerStep(thought="x" * chars, action="bash", action_input="ls", observation="ok") for _ in range(steps)]
    return LabelledRun(f"r{i}", "test", "coder|m", f"task-{i}", failed, done, [tokens + k for k in range(steps)],
                       [tokens] * steps)  # fmt: skip


def test_a_length_no_successful_run_reaches_is_the_stop(ceiling: ModuleType) -> None:
    # 300 successful runs end by step 12; of 100 failing runs, 30 go on to step 40
    runs = [_run(i, False, 8 + i % 5) for i in range(300)]
    runs += [_run(300 + i, True, 40 if i < 30 else 10) for i in range(100)]
    best = ceiling.best_stop(runs, "steps taken", 0.02)
    assert best["stopped_failing"] == pytest.approx(0.30)
    assert best["stopped_successful"] == 0.0 and best["rule"] == {"step": 13, "direction": "more", "threshold": 13.0}


def test_a_size_that_is_lower_in_failing_runs_stops_them_by_less(ceiling: ModuleType) -> None:
    runs = [_run(i, False, 20, chars=400) for i in range(300)]
    runs += [_run(300 + i, True, 20, chars=50 if i < 25 else 400) for i in range(100)]
    best = ceiling.best_stop(runs, "characters written so far", 0.02)
    assert best["stopped_failing"] == pytest.approx(0.25) and best["rule"]["direction"] == "less"


def test_too_few_successful_runs_for_the_bound_stop_nothing(ceiling: ModuleType) -> None:
    # with 40 successful runs even no false stop has a Wilson upper bound (z = 1) above 2%
    runs = [_run(i, False, 8) for i in range(40)] + [_run(40 + i, True, 40) for i in range(40)]
    assert ceiling.best_stop(runs, "steps taken", 0.02) == {"stopped_failing": 0.0, "rule": None}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 30), st.integers(0, 50)), min_size=2, max_size=120))
def test_the_stop_it_keeps_is_always_within_the_budget(ceiling: ModuleType, runs: list[tuple[bool, int, int]]) -> None:
    module = ceiling
    labelled = [_run(i, failed, steps, chars) for i, (failed, steps, chars) in enumerate(runs)]
    if all(r.failed for r in labelled) or not any(r.failed for r in labelled):
        return
    for size in module.SIZES:
        best = module.best_stop(labelled, size, 0.2)
        if best["rule"] is None:
            assert best["stopped_failing"] == 0.0
            continue
        successful = sum(not r.failed for r in labelled)
        assert best["false_stop_bound"] == wilson_upper(round(best["stopped_successful"] * successful), successful)
        assert best["false_stop_bound"] <= 0.2 and 0 < best["stopped_failing"] <= 1
