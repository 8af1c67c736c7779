"""What an agent's own labels earn before a fit of it is trusted: its size, in the direction its runs point, with
its steps beside it where they sharpen the end.

From :data:`~rb_otel.training.watch.MIN_LABELS` labelled runs, a fit of the agent is made on the watcher's
schedule; until one is trusted (it needs :data:`~rb_otel.training.report.MIN_RUNS` runs and has to beat both
chance and the size baselines out of fold), the agent would keep its kind's default, whose size points one way
for every agent: longer than this agent's usual means trouble. Some agents' failures are the short runs (one that
gives up, or transfers the customer early), and a size that points the wrong way ranks them worse than chance.

So the labels choose, among the same-prefix sizes the figures compare with (the characters written so far and
the largest call so far; the pilot's ``size_chars`` and ``size_context``), the one that separates this agent's
failing runs from its successful ones best, its direction, and how much the steps taken so far weigh beside it
(``size_steps``, one of :data:`STEPS_WEIGHTS`, 0 included); the score is a logistic curve of that sum divided by
1 + the steps weight (the two weigh as a weighted mean), each part standardised on the agent's runs and centred on
its median run, so a run of median size and length scores 0.5. Undivided, a heavy steps weight put every late
step at a probability of 1.0, where no threshold can tell a run that goes on a little longer from one that goes
on and on, and the scores of the models an agent has in turn could not be compared.
The steps are never chosen alone: at a given step every run has taken as many, so they cannot rank runs early
(on the development agents, choosing them for the last step cost more at step 10 than it gained at the end).
Beside a size they change nothing at step 10 and can sharpen the end, which matters where the two point apart:
gpt-5-mini's failing runs write less than its successful ones early on and go on longer in the end, so a size
alone ranked them well at one of the two and badly at the other (docs/learning.md).

The choice is by AUROC on the labelled runs at the last step and at step 10, averaged; it is written only when
it is clear at the last step: at least :data:`MIN_EACH` runs of each outcome, and its AUROC away from 0.5 by more
than one standard error (Hanley and McNeil's).

SLOW and SKIP are earned as a fit's are, on a cross-fitted record: task-grouped folds, each fold's runs scored
by the size chosen (measure, direction, steps weight, centres) on the other folds, the thresholds of each fold
chosen on the others' scores (:func:`~rb_otel.training.thresholds.holding_bound`, its bound from z = 2:
:data:`STRICTNESS`; the false stops those thresholds make, judged by the bound at z = 2: :data:`JUDGE`), and
:func:`~rb_otel.training.earned.earned_states` on what stopping at them did. A size that points the other way
(shorter runs fail) starts every run high, so its record earns neither.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rb_otel.backends.baselines.models import ORIENTED_SIZE
from rb_otel.evaluation.early import at_first_state, stopping
from rb_otel.evaluation.metrics import auroc
from rb_otel.steering.pilot import FEATURES, PilotModel
from rb_otel.training.cv import grouped_folds
from rb_otel.training.dataset import LabelledRun
from rb_otel.training.earned import earned_states, run_traces, with_states
from rb_otel.training.features import PrefixData, extract, prior_of
from rb_otel.training.thresholds import choose_fsm, holding_bound

__all__ = ["BASIS", "JUDGE", "MEASURES", "MIN_EACH", "STRICTNESS", "OrientedSize", "oriented_size"]

#: ``trained["basis"]`` of a model this module builds (what a stored record's name is read from).
BASIS = ORIENTED_SIZE
#: The sizes it chooses among, with what each is in words.
MEASURES: dict[str, str] = {
    "size_chars": "characters written so far",
    "size_context": "largest call so far",
}
#: The steps taken so far (log): never a choice on its own (every run has taken as many at a given step, so it cannot
#: rank them early), but weighed beside the size it sharpens the last step: an agent whose failing runs write less
#: early on and go on longer in the end (gpt-5-mini's) is ranked by the size at step 10 and by both at the end.
STEPS = "size_steps"
#: The weights of the steps (both standardised on the agent's runs) it chooses among, with the size's as 1.
STEPS_WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: The fewest labelled runs of each outcome it orients on.
MIN_EACH = 10
#: The step of the early figure (the online figures' step 10).
EARLY = 10


#: Task-grouped folds of the cross-fitted record.
FOLDS = 5
#: How strict SKIP's false-stop bound is made, in turn (Wilson's ``z``; a fit starts at 1). One size's SKIP sits in
#: the tail of the successful runs' sizes, which a few later runs can pass: on the first replay of the development
#: agents, a bound from z = 1 let SKIP on for gpt-5-mini in two orders of three, and it then stopped 4.8% and 5.8%
#: of the later successful runs. Chosen after that replay, and said so in docs/learning.md.
STRICTNESS = (2.0, 3.0)
#: The Wilson ``z`` the cross-fitted false stops are judged by (a fit's record is judged at 1). Once the steps
#: weight no longer pushed the scores to 1.0 (the sum is divided by 1 + its weight), the record judged at z = 1 let
#: SKIP on for gpt-5-mini in every order of the replay, and it stopped 2.2% to 3.0% of the later successful runs:
#: the choice among bounds and holds is itself a choice made on those folds. Chosen after that replay too.
JUDGE = 2.0


@dataclass(frozen=True, slots=True)
class OrientedSize:
    """The size an agent's labelled runs chose (``measure``, a feature of :data:`MEASURES`), its ``direction``
    (+1: longer means failure), its AUROC on those runs in that direction (last step, step 10), what its
    cross-fitted record earned, and the model."""

    measure: str
    direction: int
    steps: float  # the weight of the steps taken beside it (0: the size alone)
    last: float
    early: float  # nan where too few runs reach step 10 with both outcomes
    slow: bool
    skip: bool
    model: PilotModel

    def describe(self) -> str:
        way = "more" if self.direction > 0 else "less"
        steps = f", with more steps (weighed {self.steps:g} to 1 beside it)" if self.steps else ""
        early = "" if math.isnan(self.early) else f", {self.early:.3f} at step {EARLY}"
        states = ", ".join(s for s, on in (("SLOW", self.slow), ("SKIP", self.skip)) if on) or "neither SLOW nor SKIP"
        return (f"{MEASURES[self.measure]}, {way} means failure{steps} (AUROC on its runs {self.last:.3f} at the end"
                f"{early}); earned {states}")  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Choice:
    """A size, its direction, the weight of the steps beside it, and where each is centred and how spread, chosen
    on some of the runs."""

    measure: str
    direction: int
    steps: float  # the weight of the steps taken (standardised) beside the size: one of STEPS_WEIGHTS
    last: float  # AUROC at the last step on the runs it was chosen on
    early: float
    centre: float
    spread: float
    steps_centre: float
    steps_spread: float

    def linear(self) -> tuple[tuple[str, ...], tuple[float, ...], float]:
        """The score's features, weights and intercept (its logit is the intercept plus the weighted features): the
        size in its direction and the steps, each standardised, the steps weighed :attr:`steps` to the size's 1,
        the sum divided by 1 + :attr:`steps`. The written model and the cross-fitted record both score by it."""
        scale = 1.0 + self.steps
        features: tuple[str, ...] = (self.measure,)
        weights: tuple[float, ...] = (self.direction / self.spread / scale,)
        intercept = -self.direction * self.centre / self.spread / scale
        if self.steps:
            features, weights = (*features, STEPS), (*weights, self.steps / self.steps_spread / scale)
            intercept -= self.steps * self.steps_centre / self.steps_spread / scale
        return features, weights, intercept

    def logits(self, data: PrefixData) -> NDArray[np.float64]:
        features, weights, intercept = self.linear()
        columns = [FEATURES.index(f) for f in features]
        return np.asarray(intercept + data.dense[:, columns] @ np.asarray(weights, dtype=np.float64), dtype=np.float64)


def _choose(data: PrefixData, failed: NDArray[np.bool_], chosen_on: NDArray[np.bool_]) -> _Choice:
    """The size, direction and steps weight that separate the runs ``chosen_on`` (a mask over runs) best, averaged
    over the last step and step 10 (ties: the smaller steps weight, then the first measure)."""
    last_row = np.r_[np.flatnonzero(np.diff(data.run)), len(data.run) - 1]
    last_row = last_row[chosen_on[data.run[last_row]]]
    last_failed = failed[data.run[last_row]]
    early_row = np.flatnonzero((data.step == EARLY) & chosen_on[data.run])
    early_failed = failed[data.run[early_row]]
    early_known = min(int(early_failed.sum()), int((~early_failed).sum())) >= MIN_EACH // 2
    taken = data.dense[last_row, FEATURES.index(STEPS)]
    steps_centre, steps_spread = float(np.median(taken)), float(np.std(taken)) or 1.0
    standard_steps = (taken - steps_centre) / steps_spread
    best: tuple[float, _Choice] | None = None
    for measure in MEASURES:
        column = data.dense[:, FEATURES.index(measure)]
        ends = column[last_row]
        centre, spread = float(np.median(ends)), float(np.std(ends)) or 1.0
        standard = (ends - centre) / spread
        # at step 10 every run has taken as many steps: the steps weight cannot change how they rank there
        at_early = auroc(early_failed, column[early_row]) if early_known else float("nan")
        for direction in (1, -1):
            early = 0.5 + direction * (at_early - 0.5)
            for weight in STEPS_WEIGHTS:
                last = auroc(last_failed, direction * standard + weight * standard_steps)
                known = [a - 0.5 for a in (last, early) if not math.isnan(a)]
                lean = float(np.mean(known)) if known else 0.0
                if best is None or lean > best[0] + 1e-12:
                    choice = _Choice(measure, direction, weight, last, early, centre, spread, steps_centre,
                                     steps_spread)  # fmt: skip
                    best = (lean, choice)
    assert best is not None
    return best[1]


def oriented_size(
    runs: Sequence[LabelledRun], *, agent: str, kind: str = "", max_false_stops: float = 0.02
) -> OrientedSize | None:
    """The oriented size of one agent's labelled ``runs`` (module docstring); ``None`` when they do not make one
    clear (too few of an outcome, or no size away from chance by a standard error at the last step)."""
    runs = list(runs)
    failed = np.array([r.failed for r in runs], dtype=bool)
    if min(int(failed.sum()), int((~failed).sum())) < MIN_EACH:
        return None
    prior = prior_of(runs)
    data = extract(runs, prior)
    choice = _choose(data, failed, np.ones(len(runs), dtype=bool))
    if choice.last - 0.5 <= _standard_error(choice.last, int(failed.sum()), int((~failed).sum())):
        return None
    slow, skip, fsm = _earned(runs, data, failed, choice, max_false_stops)
    trained = {
        "basis": BASIS,
        "kind": kind,
        "measure": choice.measure,
        "direction": choice.direction,
        "steps_weight": choice.steps,
        "auroc_on_labels": {
            "last": round(choice.last, 4),
            "early": None if math.isnan(choice.early) else round(choice.early, 4),
        },
    }
    features, weights, intercept = choice.linear()
    model = PilotModel(intercept=intercept, weights=weights, prior=prior, fsm=fsm, version="pilot/agent-size",
                       features=features, trained=trained)  # fmt: skip
    model = with_states(model, agent, len(runs), slow, skip)
    return OrientedSize(choice.measure, choice.direction, choice.steps, choice.last, choice.early, slow, skip, model)


def _earned(
    runs: list[LabelledRun], data: PrefixData, failed: NDArray[np.bool_], choice: _Choice, max_false_stops: float
) -> tuple[bool, bool, dict[str, float]]:
    """What the oriented size's cross-fitted record earns (module docstring), and the FSM thresholds of the model
    that is written (``choice``), chosen on its own scores of the runs by the procedure the record judged: the
    out-of-fold scores come from each fold's own centre and spread, and thresholds chosen on them would sit on
    another scale than the written model's."""
    groups = len({r.group for r in runs})
    if groups < 2:  # no fold could be judged by the others: nothing is earned
        preset = {k: v for k, v in PilotModel.default_for(runs[0].kind).fsm.items() if not k.endswith("_quantile")}
        return False, False, preset
    folds = grouped_folds([r.group for r in runs], min(FOLDS, groups), seed=0)
    logits = np.zeros(len(data.run))
    for fold in np.unique(folds):
        others = _choose(data, failed, folds != fold)
        rows = folds[data.run] == fold
        logits[rows] = others.logits(data)[rows]
    probabilities = data.probabilities(logits)
    strictness, states = holding_bound(runs, probabilities, folds, max_false_stops, STRICTNESS, judge=JUDGE)
    traces = run_traces(runs, probabilities, states)
    record = [stopping(traces, "SKIP", at_first_state("SKIP")), stopping(traces, "SLOW", at_first_state("SLOW"))]
    slow, skip = earned_states(record, strictness is not None)
    scores = data.probabilities(choice.logits(data))
    fsm = choose_fsm(
        [p for p, r in zip(scores, runs, strict=True) if not r.failed],
        scores,
        max_false_stops=max_false_stops,
        failing=[p for p, r in zip(scores, runs, strict=True) if r.failed],
        z=strictness,
    )
    return slow, skip, fsm


def _standard_error(area: float, positives: int, negatives: int) -> float:
    """Hanley and McNeil's standard error of an AUROC ``area`` over ``positives`` and ``negatives``."""
    q1, q2 = area / (2 - area), 2 * area * area / (1 + area)
    variance = (area * (1 - area) + (positives - 1) * (q1 - area * area) + (negatives - 1) * (q2 - area * area)) / (
        positives * negatives
    )
    return math.sqrt(max(variance, 0.0))
