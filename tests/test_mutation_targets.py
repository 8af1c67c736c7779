"""Exact checks of what the previous release added, written against what mutation testing found untested
(docs/mutation.md): the A/B statistics, arm assignment, the pilot's relative thresholds and bounds, evaluate's
AUROC and the Messages loop's cache marks."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from rb_otel.ab.assign import assign_arm, check_experiment
from rb_otel.ab.stats import SRM_ALPHA, Z_95, median, newcombe_diff_ci, srm_check, wilson_interval, winsorized_mean
from rb_otel.evaluation.metrics import auroc, auroc_interval, calibration_bins, rank_average

# -- the A/B statistics, against scipy's independent implementations ------------------------------------------


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 400), data=st.data())
def test_wilson_is_scipys_wilson(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n))
    ci = scipy_stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(ci.low, abs=1e-9) and hi == pytest.approx(ci.high, abs=1e-9)


def test_wilson_edges_and_its_z() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(1, 1)[1] == 1.0 and wilson_interval(0, 1)[0] == 0.0
    assert wilson_interval(0, 1) == pytest.approx((0.0, 0.7934), abs=1e-4)
    wide, narrow = wilson_interval(5, 10, z=3.0), wilson_interval(5, 10, z=1.0)
    assert wide[0] < narrow[0] and wide[1] > narrow[1]
    assert pytest.approx(scipy_stats.norm.ppf(0.975), abs=1e-12) == Z_95


def _newcombe(a: int, n_a: int, b: int, n_b: int, z: float = Z_95) -> tuple[float, float]:
    """Newcombe's method 10 from scipy's Wilson bounds (the definition, over an independent Wilson)."""
    conf = 2 * scipy_stats.norm.cdf(z) - 1
    la, ua = scipy_stats.binomtest(a, n_a).proportion_ci(conf, method="wilson")
    lb, ub = scipy_stats.binomtest(b, n_b).proportion_ci(conf, method="wilson")
    pa, pb = a / n_a, b / n_b
    return pa - pb - math.hypot(pa - la, ub - pb), pa - pb + math.hypot(ua - pa, pb - lb)


@settings(max_examples=60, deadline=None)
@given(n_a=st.integers(1, 200), n_b=st.integers(1, 200), data=st.data())
def test_newcombe_is_method_10_over_wilson(n_a: int, n_b: int, data: st.DataObject) -> None:
    a, b = data.draw(st.integers(0, n_a)), data.draw(st.integers(0, n_b))
    lower, upper = newcombe_diff_ci(a, n_a, b, n_b)
    want_lower, want_upper = _newcombe(a, n_a, b, n_b)
    assert lower == pytest.approx(max(-1.0, want_lower), abs=1e-9)
    assert upper == pytest.approx(min(1.0, want_upper), abs=1e-9)


def test_newcombe_published_example_its_z_and_bounds() -> None:
    assert newcombe_diff_ci(56, 70, 48, 80) == pytest.approx((0.0524, 0.3339), abs=1e-4)
    assert newcombe_diff_ci(56, 70, 48, 80, z=1.0) == pytest.approx(_newcombe(56, 70, 48, 80, z=1.0), abs=1e-9)
    full = _newcombe(10, 10, 0, 10)
    assert full[1] > 1.0 or full[1] == pytest.approx(1.0)
    assert newcombe_diff_ci(10, 10, 0, 10) == pytest.approx((full[0], 1.0), abs=1e-9)  # upper clamped at 1
    assert newcombe_diff_ci(0, 10, 10, 10) == pytest.approx((-1.0, -full[0]), abs=1e-9)
    lower, upper = newcombe_diff_ci(0, 0, 5, 10)  # an empty arm counts as 0.5 with the widest interval
    assert lower == pytest.approx(0.0 - math.hypot(0.5, wilson_interval(5, 10)[1] - 0.5), abs=1e-12)
    assert upper == pytest.approx(0.0 + math.hypot(0.5, 0.5 - wilson_interval(5, 10)[0]), abs=1e-12)
    lower, upper = newcombe_diff_ci(5, 10, 0, 0)
    assert lower == pytest.approx(-math.hypot(0.5 - wilson_interval(5, 10)[0], 0.5), abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(n_on=st.integers(0, 500), n_off=st.integers(0, 500), fraction=st.floats(0.01, 0.99))
def test_srm_is_pearsons_chi_square(n_on: int, n_off: int, fraction: float) -> None:
    result = srm_check(n_on, n_off, fraction)
    total = n_on + n_off
    assert result.expected_on == pytest.approx(total * fraction) and result.expected_off == pytest.approx(
        total * (1 - fraction)
    )
    if total == 0:
        assert (result.chi_square, result.p_value, result.flagged) == (0.0, 1.0, False)
        return
    chi, p = scipy_stats.chisquare([n_on, n_off], [total * fraction, total * (1 - fraction)])
    assert result.chi_square == pytest.approx(chi, rel=1e-9, abs=1e-12)
    assert result.p_value == pytest.approx(p, rel=1e-7, abs=1e-15)
    assert result.flagged == (result.p_value < SRM_ALPHA)


def test_srm_threshold_is_strict_and_alpha_is_read() -> None:
    result = srm_check(60, 40, 0.5)  # chi 4.0, p 0.0455
    assert not result.flagged and srm_check(60, 40, 0.5, alpha=0.05).flagged
    assert not srm_check(60, 40, 0.5, alpha=result.p_value).flagged  # p == alpha is not below it
    assert SRM_ALPHA == 0.001
    assert tuple(srm_check(60, 40, 0.5)) == (
        result.chi_square,
        result.p_value,
        result.flagged,
        50.0,
        50.0,
    )


def test_srm_with_an_arm_that_expects_nothing() -> None:
    assert tuple(srm_check(0, 10, 0.0)) == (0.0, 1.0, False, 0.0, 10.0)
    assert tuple(srm_check(10, 0, 1.0)) == (0.0, 1.0, False, 10.0, 0.0)
    assert tuple(srm_check(1, 9, 0.0)) == (math.inf, 0.0, True, 0.0, 10.0)
    assert tuple(srm_check(9, 1, 1.0)) == (math.inf, 0.0, True, 10.0, 0.0)
    one = srm_check(1, 0, 0.5)
    assert one.chi_square == pytest.approx(1.0) and not one.flagged


def test_srm_and_counts_refuse_bad_input_with_a_message() -> None:
    with pytest.raises(ValueError, match=r"on_fraction must be in \[0, 1\], got 1.5"):
        srm_check(1, 1, 1.5)
    with pytest.raises(ValueError, match=r"on_fraction must be in \[0, 1\], got -0.1"):
        srm_check(1, 1, -0.1)
    assert srm_check(1, 1, 1.0).flagged and srm_check(1, 1, 0.0).flagged
    with pytest.raises(TypeError, match=r"^counts must be integers$"):
        srm_check(True, 1, 0.5)
    with pytest.raises(TypeError, match="counts must be integers"):
        wilson_interval(1, 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="counts must be integers"):
        wilson_interval(1.0, 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="counts must be integers"):
        wilson_interval(1, True)
    with pytest.raises(ValueError, match="counts must satisfy 0 <= successes <= n, got 3 of 2"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="got -1 of 2"):
        wilson_interval(-1, 2)
    with pytest.raises(ValueError, match="got 0 of -1"):
        wilson_interval(0, -1)
    assert wilson_interval(2, 2)[1] == 1.0 and wilson_interval(0, 2)[0] == 0.0


def test_median_and_winsorized_mean() -> None:
    assert median([]) is None and median([3.0]) == 3.0 and median([1.0, 5.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert winsorized_mean([]) is None
    values = [float(v) for v in range(1, 20)] + [1000.0]  # 20 values: one clamped at each end
    assert winsorized_mean(values) == pytest.approx((2 + sum(range(2, 20)) + 19) / 20)
    assert winsorized_mean([1.0, 2.0, 100.0]) == pytest.approx(103.0 / 3)  # under 20 values: nothing clamped
    assert winsorized_mean(values, share=0.1) == pytest.approx((3 * 2 + sum(range(3, 19)) + 18 * 2) / 20)


# -- arm assignment ---------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(experiment=st.text(min_size=1).filter(str.strip), unit=st.text(min_size=1), fraction=st.floats(0, 1))
def test_assignment_is_the_specs_hash(experiment: str, unit: str, fraction: float) -> None:
    digest = hashlib.sha256(f"{experiment}\x1f{unit}".encode()).digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    assert assign_arm(experiment, unit, fraction) == ("on" if draw < fraction else "off")


def test_assignment_edges_and_messages() -> None:
    digest = hashlib.sha256(b"exp\x1funit-7").digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    assert assign_arm("exp", "unit-7", draw) == "off"  # the draw must be below the fraction
    assert assign_arm("exp", "unit-7", math.nextafter(draw, 1.0)) == "on"
    assert assign_arm("exp", "unit-7") == ("on" if draw < 0.5 else "off")
    assert {assign_arm("e", f"u{i}", 0.0) for i in range(50)} == {"off"}
    assert {assign_arm("e", f"u{i}", 1.0) for i in range(50)} == {"on"}
    with pytest.raises(ValueError, match="unit_id must be a non-empty string, got ''"):
        assign_arm("e", "")
    with pytest.raises(ValueError, match="unit_id must be a non-empty string, got 7"):
        assign_arm("e", 7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="experiment_id must be a non-empty string, got '  '"):
        check_experiment("  ", 0.5)
    with pytest.raises(ValueError, match="experiment_id must be a non-empty string, got None"):
        check_experiment(None, 0.5)
    assert check_experiment("e", 1) == 1.0
    with pytest.raises(ValueError, match=r"^on_fraction must be a number in \[0.0, 1.0\], got 2$"):
        check_experiment("e", 2)


# -- evaluate's AUROC ----------------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.5, 0.9, 1.0, 0.25]), min_size=1, max_size=30))
def test_ranks_are_scipys_average_ranks(values: list[float]) -> None:
    np.testing.assert_allclose(rank_average(np.asarray(values)), scipy_stats.rankdata(values, method="average"))


@settings(max_examples=80, deadline=None)
@given(pairs=st.lists(st.tuples(st.booleans(), st.sampled_from([0.0, 0.2, 0.2, 0.5, 0.7, 1.0])), max_size=40))
def test_auroc_is_mann_whitneys_u(pairs: list[tuple[bool, float]]) -> None:
    failed = [f for f, _ in pairs]
    scores = [s for _, s in pairs]
    value = auroc(failed, scores)
    positives = [s for f, s in pairs if f]
    negatives = [s for f, s in pairs if not f]
    if not positives or not negatives:
        assert math.isnan(value)
        return
    u = scipy_stats.mannwhitneyu(positives, negatives).statistic
    assert value == pytest.approx(u / (len(positives) * len(negatives)), abs=1e-12)


def test_auroc_by_hand_and_its_message() -> None:
    assert auroc([True, False], [0.9, 0.1]) == 1.0
    assert auroc([True, False], [0.1, 0.9]) == 0.0
    assert auroc([True, False, True, False], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert auroc([True, True, False], [0.8, 0.3, 0.5]) == 0.5
    with pytest.raises(ValueError, match="auroc: 2 outcomes but 3 scores"):
        auroc([True, False], [0.1, 0.2, 0.3])


def _bootstrap(failed: list[bool], scores: list[float], clusters: list[str] | None, resamples: int, seed: int):
    """The percentile bootstrap written out with numpy's generator: the same draws, group by group."""
    rng = np.random.default_rng(seed)
    keys = list(range(len(failed))) if clusters is None else sorted(set(clusters))
    members = [[i for i in range(len(failed)) if (i if clusters is None else clusters[i]) == key] for key in keys]
    values = []
    for _ in range(resamples):
        index = [i for g in rng.integers(0, len(members), len(members)) for i in members[g]]
        value = auroc([failed[i] for i in index], [scores[i] for i in index])
        if not math.isnan(value):
            values.append(value)
    return tuple(np.percentile(values, [2.5, 97.5]))


def test_the_bootstrap_resamples_runs_or_whole_clusters() -> None:
    rng = np.random.default_rng(3)
    failed = [bool(v) for v in rng.integers(0, 2, 40)]
    scores = [float(v) for v in rng.random(40)]
    clusters = [f"task{i % 9}" for i in range(40)]
    assert auroc_interval(failed, scores, resamples=200, seed=5) == pytest.approx(
        _bootstrap(failed, scores, None, 200, 5)
    )
    assert auroc_interval(failed, scores, clusters, resamples=200, seed=5) == pytest.approx(
        _bootstrap(failed, scores, clusters, 200, 5)
    )
    assert auroc_interval(failed, scores, resamples=200, seed=5) != auroc_interval(
        failed, scores, resamples=200, seed=6
    )
    lo, hi = auroc_interval(failed, scores)  # 1,000 resamples, seed 0
    assert (lo, hi) == pytest.approx(_bootstrap(failed, scores, None, 1000, 0))
    assert math.isnan(auroc_interval([True, True], [0.1, 0.2])[0])
    assert all(math.isnan(v) for v in auroc_interval([], []))


def test_calibration_bins_by_hand() -> None:
    bins = calibration_bins([True, False, True, True, False], [0.05, 0.15, 0.95, 1.0, 1.5], bins=10)
    assert bins == [(0.05, 1.0, 1), (0.15, 0.0, 1), (pytest.approx(0.9833333), 2 / 3, 3)]
    two = calibration_bins([True, False, False], [0.2, 0.6, 0.4], bins=2)
    assert two == [(pytest.approx(0.3), 0.5, 2), (0.6, 0.0, 1)]
    assert calibration_bins([True], [-0.5]) == [(0.0, 1.0, 1)]
    assert len(calibration_bins([True] * 3, [0.1, 0.5, 0.9])) == 3


# -- the pilot's features, relative thresholds and bounds, by hand ---------------------------------------------

import json  # noqa: E402
from math import exp, log1p  # noqa: E402
from pathlib import Path  # noqa: E402

from rb_otel.backends.baselines.cache import BaselineCache  # noqa: E402
from rb_otel.backends.pilot import PilotScorer  # noqa: E402
from rb_otel.steering.pilot import FEATURES, PilotModel, PilotRun, pilot_fsm_thresholds  # noqa: E402
from rb_otel.steering.pilot.baselines import (  # noqa: E402
    RELATIVE_AFTER,
    RunSummary,
)
from rb_otel.steering.scoring import ScorerStep  # noqa: E402

PRIOR = {
    "mean_steps": 10.0, "mean_chars": 1000.0, "mean_context": 5000.0, "mean_hedges": 4.0, "mean_errors": 2.0,
    "median_steps": 8.0, "median_chars": 800.0, "median_context": 4000.0,
    "log_cps": 5.0, "error_rate": 0.1, "repeat_rate": 0.05, "hedging": 0.01, "log_tps": 7.0,
}  # fmt: skip
FSM = {"fast_threshold": 0.2, "slow_threshold": 0.4, "skip_threshold": 0.5, "hysteresis_margin": 0.05,
       "fast_window": 6, "slow_window": 2, "skip_window": 3, "slow_quantile": 0.5, "skip_quantile": 0.9}  # fmt: skip


def _model(weights: tuple[float, ...] | None = None, fsm: dict[str, float] | None = None) -> PilotModel:
    return PilotModel(
        intercept=-1.0,
        weights=weights or (0.0,) * len(FEATURES),
        prior=PRIOR,
        fsm=FSM if fsm is None else fsm,
        version="pilot/2",
        features=FEATURES,
    )


def _store(*summaries: dict[str, float]) -> BaselineCache:
    store = BaselineCache("memory://")
    for values in summaries:
        store.summaries.append([("a", RunSummary(0.0, values))])
    return store


def test_the_features_of_a_first_run_against_the_prior() -> None:
    run = PilotRun(_model(), _store(), "a")
    first = run.observe(ScorerStep(thought="maybe it fails", action="bash", action_input="ls", error=True, tokens=300))
    want = [
        1 - exp(-1 / 10), 1 - exp(-16 / 1000), 1 - exp(-300 / 5000), 1 - exp(-1 / 4), 1 - exp(-1 / 2),
        log1p(16 / 1) - 5.0,
        (1 + 3 * 0.1) / (1 + 3) - 0.1,
        (0 + 3 * 0.05) / (1 + 3) - 0.05,
        (1 + 3 * 0.01) / (3 + 3) - 0.01,
        1 / 3,
        0.0, 0.0, 0.0,
        log1p(300 / 1) - 7.0,
        log1p(1), log1p(16), log1p(300),  # the same-prefix size signals: steps, characters, largest call so far
        # the progress signals: one step since a change (none yet), no change, no repeat, a failing observation
        log1p(1), 0.0, 0.0, 0.0, log1p(1), 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
    ]  # fmt: skip
    assert first.features == pytest.approx(want, abs=1e-12)
    second = run.observe(ScorerStep(thought="", action="bash", action_input="ls", tokens=100)).features
    want2 = [
        1 - exp(-2 / 10), 1 - exp(-18 / 1000), 1 - exp(-300 / 5000), 1 - exp(-1 / 4), 1 - exp(-1 / 2),
        log1p(18 / 2) - 5.0,
        (1 + 0.3) / (2 + 3) - 0.1,
        (1 + 0.15) / (2 + 3) - 0.05,  # the same call again: a repeat
        (1 + 0.03) / (3 + 3) - 0.01,
        1 / 3,
        0.0, 0.0, 0.0,
        log1p(300 / 2) - 7.0,
        log1p(2), log1p(18), log1p(300),
        log1p(2), 0.0, 1 / 2, log1p(1), 0.0, 1 / 2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,  # `ls` again: a repeat, no failure
    ]  # fmt: skip
    assert second == pytest.approx(want2, abs=1e-12)


def test_features_fold_the_step_in_and_return_the_model_columns() -> None:
    two = PilotModel(intercept=0.0, weights=(0.0, 0.0), prior=PRIOR, fsm=FSM, version="pilot/2",
                     features=(FEATURES[3], FEATURES[0]))  # fmt: skip
    steps = [ScorerStep(thought="maybe", action="bash", action_input="ls", error=True, tokens=300), ScorerStep("")]
    observed, folded = PilotRun(_model(), _store(), "a"), PilotRun(two, _store(), "a")
    for step in steps:
        every = observed.observe(step).features
        assert folded.features(step) == pytest.approx([every[3], every[0]])  # in the model's order


def test_no_tokens_reported_and_no_thought() -> None:
    run = PilotRun(_model(), _store(), "a")
    features = run.observe(ScorerStep(thought="", action=None, tokens=0)).features
    assert features[2] == features[1] == pytest.approx(1 - exp(0.0))  # chars stand in for the unknown context
    wrote = PilotRun(_model(), _store(), "a").observe(ScorerStep(thought="a" * 300, tokens=0)).features
    assert wrote[2] == wrote[1] == pytest.approx(1 - exp(-300 / 1000))  # not the context's own (0) overrun
    assert features[13] == 0.0 and features[12] == 0.0 and features[7] == pytest.approx(0.15 / 4 - 0.05)
    assert features[8] == pytest.approx(0.03 / 3 - 0.01)  # no words yet: the agent's normal, shrunk


def _summary(steps: float, chars: float, context: float, hedges: float, errors: float, **more: float) -> dict:
    return {"steps": steps, "chars": chars, "context": context, "hedges": hedges, "errors": errors,
            "peak_slow": more.pop("peak_slow", 0.3), "peak_skip": more.pop("peak_skip", 0.4),
            "log_cps": 4.0, "error_rate": 0.2, "repeat_rate": 0.0, "hedging": 0.02, "log_tps": 6.0, **more}  # fmt: skip


def test_the_features_against_an_agents_own_runs() -> None:
    runs = [_summary(s, 100 * s, 0.0 if s == 4 else 1000 * s, s / 2, 1) for s in (2, 4, 6, 8, 10, 12)]
    store = _store(*runs)
    run = PilotRun(_model(), store, "a")
    assert run.baseline.known == 6
    for _ in range(7):
        view = run.observe(ScorerStep(thought="perhaps", action="read", action_input="a.py", tokens=7000))
    f = view.features
    blend = 6 / (6 + 3)
    steps_below = 3 / 6  # 2, 4, 6 < 7
    assert f[0] == pytest.approx(blend * steps_below + (1 - blend) * (1 - exp(-7 / 10)))
    chars = 7 * (7 + 4)
    assert f[1] == pytest.approx(blend * 0 + (1 - blend) * (1 - exp(-chars / 1000)))  # every run wrote more
    # a context of 0 is "unknown" and left out: of the 5 known (2000, 6000, 8000, 10000, 12000) two are below
    assert f[2] == pytest.approx(blend * (2 / 5) + (1 - blend) * (1 - exp(-7000 / 5000)))
    assert f[3] == pytest.approx(blend * (6 / 6) + (1 - blend) * (1 - exp(-7 / 4)))  # 7 hedges beat every run
    assert f[4] == pytest.approx(blend * 0 + (1 - blend) * (1 - exp(0.0)))  # no errors: 0 of them below 0
    normal_cps = blend * 4.0 + (1 - blend) * 5.0
    assert f[5] == pytest.approx(log1p(chars / 7) - normal_cps)
    error_rate = blend * 0.2 + (1 - blend) * 0.1
    assert f[6] == pytest.approx((0 + 3 * error_rate) / (7 + 3) - error_rate)
    repeat_rate = blend * 0.0 + (1 - blend) * 0.05
    assert f[7] == pytest.approx((6 + 3 * repeat_rate) / (7 + 3) - repeat_rate)
    hedging = blend * 0.02 + (1 - blend) * 0.01
    assert f[8] == pytest.approx((7 + 3 * hedging) / (7 + 3) - hedging)
    assert f[9] == 0.0
    # five runs or more: "beyond" is measured from the agent's own medians (the 0.5 quantile: index 3 of 6)
    assert f[10] == pytest.approx(max(log1p(7) - log1p(8), 0.0)) == 0.0
    assert f[11] == 0.0  # below the median run's 800 characters
    assert f[12] == 0.0  # the median context is 8000 (the unknown 0 sorts first)
    assert f[13] == pytest.approx(log1p(7000 / 7) - (blend * 6.0 + (1 - blend) * 7.0))
    big = PilotRun(_model(), store, "a").observe(ScorerStep(thought="x" * 1500, tokens=9000)).features
    assert big[11] == pytest.approx(log1p(1500) - log1p(800)) and big[12] == pytest.approx(log1p(9000) - log1p(8000))


def test_beyond_uses_the_prior_median_before_five_runs_and_the_mean_without_one() -> None:
    store = _store(*[_summary(1, 10, 10, 0, 0) for _ in range(4)])
    run = PilotRun(_model(), store, "a")
    f = run.observe(ScorerStep(thought="x" * 999, tokens=9000)).features
    assert f[11] == pytest.approx(log1p(999) - log1p(800)) and f[12] == pytest.approx(log1p(9000) - log1p(4000))
    no_median = {k: v for k, v in PRIOR.items() if not k.startswith("median_")}
    model = PilotModel(intercept=0.0, weights=(0.0,) * len(FEATURES), prior=no_median, fsm=FSM, version="pilot/2",
                       features=FEATURES)  # fmt: skip
    f = PilotRun(model, _store(), "a").observe(ScorerStep(thought="x" * 999, tokens=9000)).features
    assert f[11] == 0.0  # 999 characters: below the prior's mean of 1,000
    assert f[12] == pytest.approx(log1p(9000) - log1p(5000))
    assert f[10] == pytest.approx(max(log1p(1) - log1p(10), 0.0))


def test_scores_are_the_logistic_of_the_weighted_features_and_the_peaks_are_sustained_minima() -> None:
    weights = tuple({"recent_errors": 3.0, "overrun_steps": 2.0}.get(name, 0.0) for name in FEATURES)
    store = _store()
    run = PilotRun(_model(weights), store, "a")
    errors = [True, True, False, True, True, True, False]
    scores = [run.score(ScorerStep(thought="go", action=f"t{i}", error=e)) for i, e in enumerate(errors)]
    recent = [sum(errors[max(0, i - 2) : i + 1]) / 3 for i in range(len(errors))]
    logits = [-1.0 + 3.0 * r + 2.0 * (1 - exp(-(i + 1) / 10)) for i, r in enumerate(recent)]
    assert scores == pytest.approx([1 / (1 + exp(-z)) for z in logits])
    assert run.risk() == scores[-1]
    run.finish()
    run.finish()  # once only
    store.flush()
    (summary,) = store.get("a").recent
    peak_slow = max(min(scores[i - 1 : i + 1]) for i in range(1, len(scores)))
    peak_skip = max(min(scores[i - 2 : i + 1]) for i in range(2, len(scores)))
    assert summary.values["peak_slow"] == pytest.approx(peak_slow)
    assert summary.values["peak_skip"] == pytest.approx(peak_skip)
    assert summary.values["steps"] == 7 and summary.values["errors"] == 5 and summary.values["chars"] == 14
    assert summary.values["error_rate"] == pytest.approx(5 / 7)
    assert summary.values["log_cps"] == pytest.approx(log1p(2.0))
    assert summary.values["repeat_rate"] == 0.0 and summary.values["hedging"] == 0.0
    assert "log_tps" not in summary.values  # no tokens reported: no rate of them


def test_a_finished_runs_summary_with_tokens_and_hedges() -> None:
    store = _store()
    run = PilotRun(_model(), store, "a")
    for tokens in (100, 300, 200):
        run.score(ScorerStep(thought="hmm maybe we wait", action="x", action_input="y", tokens=tokens))
    run.finish()
    store.flush()
    values = store.get("a").recent[0].values
    assert values["context"] == 300 and values["hedges"] == 9 and values["repeat_rate"] == pytest.approx(2 / 3)
    assert values["hedging"] == pytest.approx(9 / 12) and values["log_tps"] == pytest.approx(log1p(100.0))
    empty = PilotRun(_model(), store, "b")
    empty.finish()
    store.flush()
    assert store.get("b").known == 0  # a run with no steps records nothing


def test_relative_thresholds_once_the_agent_has_enough_runs() -> None:
    model = _model()
    assert pilot_fsm_thresholds(model) == {
        "fast_threshold": 0.2, "slow_threshold": 0.4, "skip_threshold": 0.5, "hysteresis_margin": 0.05,
        "fast_window": 6, "slow_window": 2, "skip_window": 3,
    }  # fmt: skip
    assert all(isinstance(pilot_fsm_thresholds(model)[k], int) for k in ("fast_window", "slow_window", "skip_window"))
    few = _store(*[_summary(5, 50, 50, 1, 1, peak_slow=0.7, peak_skip=0.8) for _ in range(RELATIVE_AFTER - 1)])
    assert PilotRun(model, few, "a").fsm_thresholds() == pilot_fsm_thresholds(model)
    peaks = [0.1 + 0.02 * i for i in range(RELATIVE_AFTER)]
    enough = _store(*[_summary(5, 50, 50, 1, 1, peak_slow=p, peak_skip=p + 0.1) for p in peaks])
    got = PilotRun(model, enough, "a").fsm_thresholds()
    slow = sorted(peaks)[int(0.5 * RELATIVE_AFTER)]
    skip = sorted(p + 0.1 for p in peaks)[int(0.9 * RELATIVE_AFTER)]
    assert got["slow_threshold"] == pytest.approx(max(slow, 0.2 + 2 * 0.05))
    assert got["skip_threshold"] == pytest.approx(max(skip, got["slow_threshold"]))
    assert got["fast_threshold"] == 0.2 and got["slow_window"] == 2
    low = _store(*[_summary(5, 50, 50, 1, 1, peak_slow=0.01, peak_skip=0.0) for _ in range(RELATIVE_AFTER)])
    bounded = PilotRun(model, low, "a").fsm_thresholds()
    assert bounded["slow_threshold"] == pytest.approx(0.3)  # never below FAST's exit plus two margins
    assert bounded["skip_threshold"] == pytest.approx(0.3)  # never below SLOW
    high = _store(*[_summary(5, 50, 50, 1, 1, peak_slow=1.0, peak_skip=1.0) for _ in range(RELATIVE_AFTER)])
    capped = PilotRun(model, high, "a").fsm_thresholds()
    assert capped["slow_threshold"] == 0.99 and capped["skip_threshold"] == 1.0
    fixed = _model(fsm={k: v for k, v in FSM.items() if not k.endswith("_quantile")})
    assert PilotRun(fixed, enough, "a").fsm_thresholds() == pilot_fsm_thresholds(fixed)  # a fitted model's own
    defaults = _model(fsm={"slow_quantile": 0.5, "skip_quantile": 0.9})
    assert PilotRun(defaults, low, "a").fsm_thresholds()["slow_threshold"] == pytest.approx(0.2 + 2 * 0.05)


def test_the_scorer_front() -> None:
    scorer = PilotScorer(_model(), BaselineCache("memory://"))
    assert scorer.name == "pilot/2" and scorer.model.prior == PRIOR
    run = scorer.start_run("agent-x", "task")
    run.score(ScorerStep(thought="a", action="b"))
    run.finish()
    scorer.baselines.flush()
    assert scorer.baselines.get("agent-x").known == 1
    assert PilotScorer().name == "pilot/1"


# -- rendering and the Messages loop's cache marks --------------------------------------------------------------

from rb_otel.steering import rendering  # noqa: E402
from rb_otel.steering.rendering import (  # noqa: E402
    CACHE_CONTROL,
    guidance_block,
    model_family_is_claude,
    render_injection,
    render_pattern,
    system_blocks,
)
from rb_otel.types import REASONBLOCKS_HEADER, PendingInjection  # noqa: E402

FIELDS = {
    "zeta": "last", "unlock": " open the handler ", "title": "KeyError in handler", "empty": "",
    "dead_ends": ["retry", "reinstall"], "guidance": "read the traceback", "meta": {"b": 2, "a": "x"},
    "none": None, "nothing": [], "blank": {}, "count": 3,
}  # fmt: skip


def test_the_model_family() -> None:
    claudes = ("claude-sonnet-4-5", "CLAUDE-3", "anthropic:claude-opus", "anthropic:x", "bedrock:claude-3", "m:claude")
    for claude in claudes:
        assert model_family_is_claude(claude), claude
    for other in ("gpt-4o", "openai:gpt-4o", "openai:my:claude", "", "claudeish:gpt"):
        assert not model_family_is_claude(other), other  # the part after a provider prefix decides
    assert model_family_is_claude("vertex:claude-3:latest")  # only the first prefix is stripped


def test_a_pattern_for_claude_exactly() -> None:
    assert render_pattern("E2", "claude-3", FIELDS) == (
        '<e2_pattern heading="Known failure pattern">\n'
        "<title>KeyError in handler</title>\n"
        "<guidance>read the traceback</guidance>\n"
        "<dead_ends>\n  - retry\n  - reinstall</dead_ends>\n"
        "<unlock>open the handler</unlock>\n"
        "<count>3</count>\n"
        "<meta>a: x; b: 2</meta>\n"
        "<zeta>last</zeta>\n"
        "</e2_pattern>"
    )


def test_a_pattern_for_other_models_exactly() -> None:
    assert render_pattern("e1", "gpt-4o", FIELDS) == (
        "**Relevant prior experience**\n"
        "- title: KeyError in handler\n"
        "- guidance: read the traceback\n"
        "- dead ends: \n  - retry\n  - reinstall\n"
        "- unlock: open the handler\n"
        "- count: 3\n"
        "- meta: a: x; b: 2\n"
        "- zeta: last"
    )
    assert render_pattern("x9", "gpt", {"guidance": "g"}) == "**Guidance (x9)**\n- guidance: g"
    assert render_pattern("e3", "gpt", {"rules": [["a", "b"], {"k": ["v"]}]}) == (
        "**Standing rule**\n- rules: \n  - \n  - a\n  - b\n  - k: \n  - v"
    )


def test_injections_render_once_per_pattern_and_again_when_it_changes() -> None:
    rendering._RENDERED.clear()
    text = PendingInjection(source="e3", text="plain text")
    assert render_injection(text, "claude") == "plain text"
    loose = PendingInjection(source="e2", tier="E2", fields={"guidance": "g"})
    assert render_injection(loose, "claude") == render_pattern("E2", "claude", {"guidance": "g"})
    assert render_injection(PendingInjection(source="e2"), "gpt") == "**Guidance ()**\n"
    stored = PendingInjection(source="e1", tier="e1", fields={"guidance": "first"}, pattern_id="p1")
    first = render_injection(stored, "gpt")
    assert first == "**Relevant prior experience**\n- guidance: first"
    assert rendering._RENDERED.get(("p1", "e1", False)) == ({"guidance": "first"}, first)
    assert render_injection(stored, "gpt") is first  # the cached text itself
    assert render_injection(stored, "claude") == render_pattern("e1", "claude", {"guidance": "first"})
    changed = PendingInjection(source="e1", tier="e1", fields={"guidance": "second"}, pattern_id="p1")
    assert render_injection(changed, "gpt") == "**Relevant prior experience**\n- guidance: second"


def test_the_guidance_block_and_the_cache_marks() -> None:
    assert guidance_block("") == "" and guidance_block("x") == REASONBLOCKS_HEADER + "x"
    base = [{"type": "text", "text": "one"}, {"type": "text", "text": "two", "cache_control": {"type": "x"}}]
    marked = system_blocks(base, "advice")
    assert marked == [
        {"type": "text", "text": "one"},
        {"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": REASONBLOCKS_HEADER + "advice"},  # guidance never cache-marked
    ]
    assert base[1]["cache_control"] == {"type": "x"}  # the caller's blocks are not changed
    assert marked[1]["cache_control"] is not CACHE_CONTROL and CACHE_CONTROL == {"type": "ephemeral"}
    bare = system_blocks(base, "advice", cache_control=False)
    assert bare == [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}, marked[2]]
    image_last = [{"type": "text", "text": "one"}, {"type": "image", "source": "s"}]
    assert system_blocks(image_last, "") == image_last  # only a text block takes the mark
    assert system_blocks([], "") == [] and system_blocks([], "a") == [marked[2] | {"text": REASONBLOCKS_HEADER + "a"}]


def test_a_first_runs_state_and_the_default_windows() -> None:
    fsm = {k: v for k, v in FSM.items() if not k.endswith("_window")}
    weights = tuple(2.0 if name == "overrun_steps" else 0.0 for name in FEATURES)  # rising scores
    store = _store()
    run = PilotRun(_model(weights, fsm=fsm), store, "a")
    assert run.risk() is None  # nothing scored yet
    errors = [True, False, True, True, True, False, True, True, True, True, False]
    scores = [run.score(ScorerStep(thought="go", action=f"t{i}", error=e)) for i, e in enumerate(errors)]
    run.finish()
    store.flush()
    values = store.get("a").recent[0].values
    # without windows in the model: SLOW's is 3 steps, SKIP's 8
    assert values["peak_slow"] == pytest.approx(max(min(scores[i - 2 : i + 1]) for i in range(2, len(scores))))
    assert values["peak_skip"] == pytest.approx(max(min(scores[i - 7 : i + 1]) for i in range(7, len(scores))))
    assert values["peak_slow"] == pytest.approx(scores[-3]) and values["peak_skip"] == pytest.approx(scores[-8])


def test_repeats_are_the_same_call_within_the_last_five() -> None:
    run = PilotRun(_model(), _store(), "a")
    tokens = [
        run.observe(ScorerStep(thought="", action="read", action_input=name)).tokens
        for name in ("a", "b", "c", "d", "e", "f", "a", "f")
    ]
    assert ["repeat" in t for t in tokens] == [False] * 7 + [True]  # "a" came back six calls later: not a repeat
    long_input = "x" * 512
    run2 = PilotRun(_model(), _store(), "a")
    run2.observe(ScorerStep(thought="", action="edit", action_input=long_input + "1"))
    second = run2.observe(ScorerStep(thought="", action="edit", action_input=long_input + "2")).tokens
    assert "repeat" in second  # calls are compared on their first 512 characters


def test_a_fitted_models_text_weights_move_the_score() -> None:
    from rb_otel.steering.pilot import TextWeights
    from rb_otel.steering.pilot.text import TextScore, bucket, step_tokens

    step = ScorerStep(thought="", action="bash", action_input="pytest -x", error=True)
    weights = {bucket(token, 14): 0.5 for token in step_tokens(step)}
    text = TextWeights(bits=14, value="log", weights=weights)
    model = PilotModel(intercept=-1.0, weights=(0.0,) * len(FEATURES), prior=PRIOR, fsm=FSM, version="pilot/2",
                       features=FEATURES, text=text)  # fmt: skip
    run = PilotRun(model, _store(), "a")
    score = run.score(step)
    reference = TextScore(weights, 14, "log")
    reference.add(step_tokens(step))
    assert reference.value > 0
    assert score == pytest.approx(1 / (1 + exp(-(-1.0 + reference.value))))


def test_beyond_at_the_edges_of_the_agents_medians() -> None:
    five = _store(*[_summary(4, 0, 0, 0, 0) for _ in range(5)])  # five runs: their own medians count
    f = PilotRun(_model(), five, "a").observe(ScorerStep(thought="x", action="a", tokens=1)).features
    assert f[11] == pytest.approx(log1p(1) - log1p(0))  # a median of 0 characters is the agent's own
    assert f[12] == pytest.approx(max(log1p(1) - log1p(4000), 0.0))  # a context median of 0: unknown, the prior's
    assert f[2] == pytest.approx(1 - exp(-1 / 5000))  # no run knows its context: the prior alone
    assert f[13] == pytest.approx(log1p(1 / 1) - ((5 / 8) * 6.0 + (3 / 8) * 7.0))  # one token is a known context
    four = _store(*[_summary(4, 0, 0, 0, 0) for _ in range(4)])
    g = PilotRun(_model(), four, "a").observe(ScorerStep(thought="x", action="a", tokens=1)).features
    assert g[11] == 0.0  # four runs: the prior's median of 800 characters
    no_tps = {k: v for k, v in PRIOR.items() if k != "log_tps"}
    model = PilotModel(intercept=0.0, weights=(0.0,) * len(FEATURES), prior=no_tps, fsm=FSM, version="pilot/2",
                       features=FEATURES)  # fmt: skip
    h = PilotRun(model, _store(), "a").observe(ScorerStep(thought="x", tokens=10)).features
    assert h[13] == pytest.approx(log1p(10.0))  # a prior without the rate: 0


def test_a_summary_of_a_run_with_one_token_and_no_words() -> None:
    store = _store()
    run = PilotRun(_model(), store, "a")
    run.score(ScorerStep(thought="", action="x", tokens=1))
    run.finish()
    store.flush()
    values = store.get("a").recent[0].values
    assert values["log_tps"] == pytest.approx(log1p(1.0)) and values["hedging"] == 0.0


def test_relative_thresholds_need_both_peaks_and_read_the_margin() -> None:
    fsm = dict(FSM, hysteresis_margin=0.1)
    low = _store(*[_summary(5, 50, 50, 1, 1, peak_slow=0.01, peak_skip=0.0) for _ in range(RELATIVE_AFTER)])
    assert PilotRun(_model(fsm=fsm), low, "a").fsm_thresholds()["slow_threshold"] == pytest.approx(0.2 + 2 * 0.1)
    over = _store(*[_summary(5, 50, 50, 1, 1, peak_slow=0.5, peak_skip=1.4) for _ in range(RELATIVE_AFTER)])
    assert PilotRun(_model(), over, "a").fsm_thresholds()["skip_threshold"] == 1.0


def test_a_scorer_loads_its_model_file(tmp_path: Path) -> None:
    path = tmp_path / "pilot.json"
    path.write_text(json.dumps(_model().as_dict()))
    scorer = PilotScorer(str(path), BaselineCache("memory://"))
    assert scorer.model.prior == PRIOR and scorer.name == "pilot/2"
    run = scorer.start_run()
    run.score(ScorerStep(thought="a", action="b"))
    run.finish()
    scorer.baselines.flush()
    assert scorer.baselines.get("").known == 1  # the default agent key is ""


def test_a_context_median_of_one_token_is_the_agents_own() -> None:
    store = _store(*[_summary(4, 10, 1, 0, 0) for _ in range(5)])
    f = PilotRun(_model(), store, "a").observe(ScorerStep(thought="x", tokens=50)).features
    assert f[12] == pytest.approx(log1p(50) - log1p(1))


def test_auroc_reads_zero_one_outcomes_and_warns_about_nothing() -> None:
    import warnings

    assert auroc([1, 0, 1, 0], [0.9, 0.2, 0.4, 0.5]) == auroc([True, False, True, False], [0.9, 0.2, 0.4, 0.5]) == 0.75
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one class only: nan, without a division by zero
        assert math.isnan(auroc([True, True], [0.1, 0.2])) and math.isnan(auroc([False], [0.3]))


def test_calibration_uses_ten_bins_by_default() -> None:
    assert len(calibration_bins([True, False], [0.09, 0.095])) == 1  # one bin of [0, 0.1)
    assert len(calibration_bins([True, False], [0.09, 0.1])) == 2
