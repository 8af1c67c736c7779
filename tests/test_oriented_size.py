"""Before a fit of an agent is trusted, its labelled runs orient its size: the measure and direction they point,
written to the store as ``pilot/agent-size:<key>@<n>``, with SLOW and SKIP where its cross-fitted record earns them
(docs/learning.md)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from components import wait_until
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.baselines.models import model_store_of
from rb_otel.backends.baselines.opening import open_summary_store
from rb_otel.backends.pilot import PilotScorer
from rb_otel.evaluation.metrics import auroc
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.pilot import MemorySummaryStore, PilotRun, pilot_fsm_thresholds
from rb_otel.steering.scoring import ScorerStep
from rb_otel.training import oriented_size as oriented_size_module
from rb_otel.training.dataset import Dataset, LabelledRun
from rb_otel.training.oriented_size import JUDGE, MIN_EACH, STEPS_WEIGHTS, oriented_size
from rb_otel.training.thresholds import SKIP_OFF, fsm_states, holding_bound
from rb_otel.training.watch import MIN_LABELS, Watcher, fit_agent


def _run(i: int, failed: bool, *, chars: int, steps: int = 12, agent: str = "coder|m") -> LabelledRun:
    """A coding run of ``steps`` steps writing about ``chars`` characters in each (``i`` varies it a little)."""
    text = "x" * (chars + 7 * (i % 5))
    done = [ScorerStep(thought=text, action="bash", action_input="pytest -q", observation="ok", tokens=500 + k)
            for k in range(steps)]  # fmt: skip
    return LabelledRun(f"r{i}", "test", agent, f"task-{i % 17}", failed, done, [500 + 10 * k for k in range(steps)],
                       [500] * steps)  # fmt: skip


def _short_runs_fail(n: int = MIN_LABELS, agent: str = "coder|m") -> list[LabelledRun]:
    """An agent whose failing runs write less (it gives up early): a third of them fail."""
    return [_run(i, i % 3 == 0, chars=80 if i % 3 == 0 else 400, agent=agent) for i in range(n)]


def test_the_labels_choose_the_size_and_its_direction() -> None:
    size = oriented_size(_short_runs_fail(), agent="coder|m", kind="coding")
    assert size is not None
    assert size.measure == "size_chars" and size.direction == -1 and size.last > 0.9
    assert "characters written so far, less means failure" in size.describe()
    # the model ranks a short run above a long one at every step: the direction its runs point, not "longer"
    short, long = _run(999, True, chars=80), _run(998, False, chars=400)
    scores = {}
    for run in (short, long):
        scorer = PilotRun(size.model, BaselineCache(MemorySummaryStore()), "fresh|m")
        scores[run.run_id] = [scorer.score(step) for step in run.steps]
    assert all(s > lo for s, lo in zip(scores["r999"], scores["r998"], strict=True))


def _write_less_and_go_on_longer(n: int = MIN_LABELS) -> list[LabelledRun]:
    """gpt-5-mini's shape: its failing runs write less at each step, and end far later (so more in all by the end)."""
    return [_run(i, i % 3 == 0, chars=80 if i % 3 == 0 else 400, steps=80 if i % 3 == 0 else 12 + i % 3)
            for i in range(n)]  # fmt: skip


def test_an_agent_whose_failing_runs_write_less_early_and_go_on_longer_is_ranked_by_both() -> None:
    runs = _write_less_and_go_on_longer()
    size = oriented_size(runs, agent="coder|m", kind="coding")
    assert size is not None
    assert (size.measure, size.direction) == ("size_chars", -1) and size.steps > 0
    assert size.model.features == ("size_chars", "size_steps")
    assert "characters written so far, less means failure, with more steps" in size.describe()
    assert size.last > 0.9 and size.early > 0.9
    failing, successful = _run(999, True, chars=80, steps=80), _run(998, False, chars=400, steps=12)
    scores = {}
    for run in (failing, successful):
        scorer = PilotRun(size.model, BaselineCache(MemorySummaryStore()), "fresh|m")
        scores[run.failed] = [scorer.score(step) for step in run.steps]
    assert scores[True][9] > scores[False][9]  # at step 10, by the characters alone (both have taken ten steps)
    assert scores[True][-1] > scores[False][-1]  # at the end, the steps outweigh the characters written


def test_the_heaviest_steps_weight_keeps_the_scores_apart_where_thresholds_are_chosen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the sum is divided by 1 + the steps weight: undivided, a weight of 16 put every step past the agent's usual
    # length at a probability of 1.0 (or within the 1e-6 that thresholds are chosen to), so no SKIP threshold could
    # sit between a run that goes on a little longer and one that goes on and on
    monkeypatch.setattr(oriented_size_module, "STEPS_WEIGHTS", (max(STEPS_WEIGHTS),))
    size = oriented_size(_write_less_and_go_on_longer(), agent="coder|m", kind="coding")
    assert size is not None and size.steps == 16
    scorer = PilotRun(size.model, BaselineCache(MemorySummaryStore()), "fresh|m")
    scores = [scorer.score(step) for step in _run(999, True, chars=80, steps=80).steps]
    late = scores[20:]
    assert all(b - a > 1e-6 for a, b in itertools.pairwise(late))  # every later step a little higher
    assert late[-1] < 0.999


def test_an_unearned_state_is_never_entered_and_nothing_makes_it_relative_again() -> None:
    size = oriented_size(_short_runs_fail(), agent="coder|m", kind="coding")
    assert size is not None
    fsm = size.model.fsm
    assert not any(k.endswith("_quantile") for k in fsm)  # nothing would make them relative to the agent again
    assert size.model.trained["earned"] == {"slow": size.slow, "skip": size.skip}
    assert (fsm["skip_threshold"] < SKIP_OFF) == size.skip and (fsm["slow_threshold"] < SKIP_OFF) == size.slow


def _long_runs_fail(n: int = 450) -> list[LabelledRun]:
    """An agent whose failing runs go on and on (30 steps) where its successful ones end by step 12."""
    return [_run(i, i % 3 == 0, chars=300, steps=30 if i % 3 == 0 else 8 + i // 5 % 5) for i in range(n)]


def test_a_size_whose_cross_fitted_record_stops_failing_runs_earns_slow_and_skip() -> None:
    size = oriented_size(_long_runs_fail(), agent="coder|m", kind="coding")
    assert size is not None and size.last > 0.9
    assert size.slow and size.skip
    assert "earned SLOW, SKIP" in size.describe()
    fsm = DifficultyFSM(**pilot_fsm_thresholds(size.model))
    stops = {}
    for run in (_run(1, True, chars=300, steps=30), _run(2, False, chars=300, steps=9)):
        scorer = PilotRun(size.model, BaselineCache(MemorySummaryStore()), "fresh|m")
        stops[run.failed] = "SKIP" in fsm_states(fsm, [scorer.score(step) for step in run.steps])
    assert stops == {True: True, False: False}


def test_skip_needs_enough_successful_runs_for_its_bound() -> None:
    # 100 successful runs: even with no false stop, the z = 2 bound (4 / 104) is above the 2% budget (it needs about
    # 200 successful runs in the folds a threshold is chosen on, so about 250 labelled successful runs)
    size = oriented_size(_long_runs_fail(150), agent="coder|m", kind="coding")
    assert size is not None and size.slow and not size.skip


def test_a_size_that_points_the_other_way_earns_no_stop_it_cannot_justify() -> None:
    # shorter runs fail, and the runs are alike for their first steps: a stop would have to guess
    runs = [_run(i, i % 3 == 0, chars=300, steps=4 if i % 3 == 0 else 12 + i % 5) for i in range(150)]
    size = oriented_size(runs, agent="coder|m", kind="coding")
    assert size is not None and size.direction == -1
    assert not size.skip


def test_runs_whose_size_says_nothing_earn_no_model() -> None:
    same = [_run(i, i % 3 == 0, chars=300) for i in range(60)]  # the outcome is not in the size
    assert oriented_size(same, agent="coder|m", kind="coding") is None


def test_too_few_runs_of_an_outcome_earn_no_model() -> None:
    runs = [_run(i, i < MIN_EACH - 1, chars=80 if i < MIN_EACH - 1 else 400) for i in range(60)]
    assert oriented_size(runs, agent="coder|m", kind="coding") is None


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(20, 2000), st.integers(3, 25)), min_size=40, max_size=70))
def test_whatever_it_writes_ranks_its_own_runs_live_as_it_measured_them(outcomes: list[tuple[bool, int, int]]) -> None:
    runs = [_run(i, failed, chars=chars, steps=steps) for i, (failed, chars, steps) in enumerate(outcomes)]
    size = oriented_size(runs, agent="coder|m", kind="coding")
    if size is None:
        return
    last_scores = []
    for run in runs:
        scorer = PilotRun(size.model, BaselineCache(MemorySummaryStore()), "fresh|m")
        last_scores.append([scorer.score(step) for step in run.steps][-1])
    assert size.last > 0.5
    # a worker's scores rank the runs exactly as the choice measured them (its size and steps, as the pilot counts)
    assert auroc([r.failed for r in runs], last_scores) == pytest.approx(size.last, abs=1e-9)


def test_below_a_trusted_fit_the_watcher_writes_the_oriented_size_and_a_worker_scores_by_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    models = model_store_of(open_summary_store(url))
    assert models is not None
    runs = _short_runs_fail()
    lines: list[str] = []
    watcher = Watcher(["x"], models, read=lambda paths, **_: Dataset(runs=list(runs)), say=lines.append)
    (fit,) = watcher.poll()  # the real fit: 50 runs are too few to judge one, the size is clear
    assert not fit.trusted and fit.publishes
    assert "fit not trusted" in fit.line() and "less means failure" in fit.line()
    stored = models.model("coder|m")
    assert stored is not None and stored.name == "pilot/agent-size:coder|m@50"
    assert stored.model["trained"]["earned"] == {"slow": stored.slow, "skip": stored.skip}
    scorer = PilotScorer(baselines=url)
    assert scorer.models is not None
    scorer.models.refresh_s = 0.2
    wait_until(lambda: scorer.name_for("coding", "coder|m") == "pilot/agent-size:coder|m@50", timeout=60,
               what="the oriented size")  # fmt: skip
    run = scorer.start_run("coder|m", kind="coding")
    risks = [run.score(s) for s in _run(1000, True, chars=80).steps]
    assert risks[-1] > 0.5  # a short run: its agent's failing kind
    scorer.models.close()
    # a later fit whose runs no longer make a size clear withdraws it: workers go back to the kind's default
    runs += [_run(i, i % 3 == 0, chars=80 if i % 3 else 400) for i in range(MIN_LABELS, 80)]
    runs[:] = [_run(i, r.failed, chars=300) for i, r in enumerate(runs)]
    watcher.poll()
    assert models.model("coder|m") is None
    assert any("withdrew its model" in line for line in lines)


def test_a_size_with_its_steps_reaches_a_worker_through_the_store_as_it_was_chosen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    models = model_store_of(open_summary_store(url))
    assert models is not None
    runs = _write_less_and_go_on_longer()
    watcher = Watcher(["x"], models, read=lambda paths, **_: Dataset(runs=list(runs)), say=lambda line: None)
    (fit,) = watcher.poll()
    assert fit.publishes and "with more steps" in fit.line()
    stored = models.model("coder|m")
    assert stored is not None and stored.pilot is not None
    assert stored.pilot.features == ("size_chars", "size_steps") and stored.model["trained"]["steps_weight"] > 0
    scorer = PilotScorer(baselines=url)
    assert scorer.models is not None
    scorer.models.refresh_s = 0.2
    wait_until(lambda: scorer.name_for("coding", "coder|m") == "pilot/agent-size:coder|m@50", timeout=60,
               what="the oriented size with its steps")  # fmt: skip
    scores = {}
    for run in (_run(999, True, chars=80, steps=80), _run(998, False, chars=400, steps=12)):
        worker = scorer.start_run("coder|m", kind="coding")
        scores[run.failed] = [worker.score(step) for step in run.steps]
        worker.finish()
    scorer.models.close()
    assert scores[True][9] > scores[False][9] and scores[True][-1] > scores[False][-1]


def test_fit_agent_tells_why_no_fit_was_trusted_beside_the_size_it_wrote() -> None:
    fit = fit_agent(_short_runs_fail(60))
    assert "a fit is judged from 100 runs" in fit.why
    assert fit.oriented is not None and fit.record().name == "pilot/agent-size:coder|m@60"


@pytest.mark.parametrize("kind", ["coding", "customer_service", ""])
def test_each_kind_gets_a_whole_preset(kind: str) -> None:
    size = oriented_size(_short_runs_fail(), agent="coder|m", kind=kind)
    assert size is not None
    assert {"fast_threshold", "slow_threshold", "skip_threshold", "hysteresis_margin"} <= set(size.model.fsm)
    thresholds = pilot_fsm_thresholds(size.model)
    DifficultyFSM(**thresholds)  # a preset the state machine takes


def test_the_cross_fitted_false_stops_are_judged_by_the_stricter_bound_the_oriented_size_asks_for() -> None:
    # 100 failing runs end high (0.97); of 300 successful runs, three in three folds end a little lower (0.96, 0.965,
    # 0.968). A fold's thresholds sit at the lowest successful peak its training side can afford to stop, so the
    # folds holding the two higher ones stop them out of fold: 2 false stops in 300, within the 2% budget by the
    # Wilson bound at z = 1 (1.3%), not at z = 2 (2.5%)
    runs = [_run(i, i < 100, chars=300) for i in range(400)]
    ends = {**dict.fromkeys(range(100), 0.97), 100: 0.96, 101: 0.965, 102: 0.968}
    probabilities = [[0.1] * 4 + [ends[i]] * 8 if i in ends else [0.1] * 12 for i in range(400)]
    folds = np.arange(400) % 5
    loose, _ = holding_bound(runs, probabilities, folds, 0.02, (1.0,), judge=1.0)
    strict, states = holding_bound(runs, probabilities, folds, 0.02, (1.0,), judge=JUDGE)
    assert loose == 1.0 and strict is None
    assert not any("SKIP" in s for s in states)  # with SKIP off, no run reaches it
