"""The training report: what the fit would do on runs it never saw, measured before anything is written.

Every figure comes from pooled task-grouped out-of-fold scores (:mod:`rb_otel.training.cv`). The stopping
figures use thresholds that are themselves cross-fitted: each fold's runs are judged with the SLOW/SKIP
thresholds chosen on the other folds' out-of-fold scores, so the false-stop rate shown is one the budget did not
see. Baselines are *oriented on the training side* (each fold's direction from the other folds: a baseline that
predicts failure by being small is as strong as it is), and the report shows their direction. Intervals are the
wider of a bootstrap over task groups and the spread of the per-fold AUROCs.

A fit is trusted only when nothing in :meth:`TrainingReport.check` objects: enough runs and failures, not a
constant, better than chance by a permutation test (:mod:`rb_otel.training.permutation`, p < :data:`ALPHA`), and
better than the best oriented same-prefix baseline at the last step by more than chance moves an AUROC on these
runs (the sd of the permutations' AUROCs), and not below the oriented baselines at the early step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rb_otel.evaluation.early import EarlyRow, StopFigures, stop_line

__all__ = ["ALPHA", "MIN_FAILURES", "MIN_RUNS", "Figure", "TrainingReport"]

#: Below these a fit is not trusted: the report says so and the file is written only with ``--force``.
MIN_RUNS = 100
MIN_FAILURES = 20
#: The permutation test's level: a fit whose p-value is not below it is not trusted.
ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class Figure:
    """An AUROC for failure with its 95% interval (bootstrap over task groups)."""

    name: str
    auroc: float
    low: float
    high: float
    runs: int
    baseline: bool = False
    sign: int = 1  # a baseline's direction, learned on the training side (+1 more means failure, -1 less, 0 mixed)
    folds: tuple[float, ...] = ()  # the AUROC within each outer fold

    @property
    def direction(self) -> str:
        return _sign(self.sign)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "auroc": self.auroc, "ci95": [self.low, self.high], "runs": self.runs,
                "baseline": self.baseline, "direction": self.sign, "per_fold": list(self.folds)}  # fmt: skip


@dataclass(slots=True)
class TrainingReport:
    runs: int
    failed: int
    groups: int
    agents: dict[str, dict[str, int]]
    sources: dict[str, int]
    folds: int
    chosen: list[str]
    last_step: list[Figure]
    early: list[EarlyRow]
    stopping: list[StopFigures]
    order_sensitivity: list[float]  # last-step AUROC with the runs' order shuffled (baselines learned anew)
    problems: list[str] = field(default_factory=list)
    unlabelled: int = 0
    final_candidate: str = ""
    warnings: list[str] = field(default_factory=list)
    permutation: Any = None  # a PermutationTest, when one was run
    skip_on: bool = True  # the written model's SKIP (off: no threshold held the false-stop bound usefully)
    bound_strictness: float | None = 1.0  # the z of the false-stop bound that held on the cross-fitted folds
    held_out: Any = None  # a HeldOutReport (leave one agent out), with runs of two or more agents

    @property
    def trusted(self) -> bool:
        """No warning: enough runs and failures, and the fit beats the same-prefix baselines out of fold."""
        return not self.warnings

    def check(self, early_step: int, constant: bool) -> None:
        """Fill ``warnings``: every reason not to trust the fit, in words."""
        out = []
        if self.runs < MIN_RUNS or self.failed < MIN_FAILURES:
            out.append(
                f"only {self.runs} runs with {self.failed} failures: a fit needs at least {MIN_RUNS} runs and "
                f"{MIN_FAILURES} failures to be judged (and more to be good)"
            )
        if constant:
            out.append("the fitted model is a constant (every weight is zero): it says the same of every run")
        test = self.permutation
        if test is not None and not test.p_value < ALPHA:
            out.append(
                f"the fit does not beat shuffled outcomes: last-step AUROC {test.real:.3f} against "
                f"{test.null_mean:.3f} +- {test.null_sd:.3f} in {len(test.null)} permutations (p = {test.p_value:.3f})"
            )
        out += self._against_baselines(early_step)
        self.warnings = out

    def _chance_spread(self) -> float:
        """How far an AUROC on these runs moves by chance: the sd of the fits on shuffled outcomes (0 without)."""
        test = self.permutation
        return 0.0 if test is None or math.isnan(test.null_sd) else float(test.null_sd)

    def _against_baselines(self, early_step: int) -> list[str]:
        out = []
        score, *baselines = self.last_step
        best = max((b for b in baselines if not math.isnan(b.auroc)), key=lambda b: b.auroc, default=None)
        if best is not None:
            spread = self._chance_spread()
            if not score.auroc - best.auroc > spread:
                out.append(
                    f"at the last step the fit ({score.auroc:.3f}) does not beat the {best.name} baseline "
                    f"(oriented {best.direction}: {best.auroc:.3f}) by more than chance moves an AUROC on these "
                    f"runs ({spread:.3f}, the sd of the fits on shuffled outcomes) out of fold"
                )
        row = next((r for r in self.early if r.k == early_step), None)
        if row is not None:
            pairs = (("characters", row.chars, row.chars_sign), ("prompt tokens", row.prompt_tokens, row.prompt_sign))
            worse = [
                f"{name} so far (oriented {_sign(sign)}: {value:.3f})"
                for name, value, sign in pairs
                if not math.isnan(value) and not row.score >= value
            ]
            if worse:
                out.append(
                    f"at step {early_step} the fit ({row.score:.3f}) does not beat {', '.join(worse)} out of fold"
                )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "failed": self.failed,
            "task_groups": self.groups,
            "unlabelled_skipped": self.unlabelled,
            "agents": self.agents,
            "sources": self.sources,
            "cross_validation": {"folds": self.folds, "chosen_per_fold": self.chosen, "final": self.final_candidate},
            "last_step": [f.as_dict() for f in self.last_step],
            "early_warning": [r.as_dict() for r in self.early],
            "stopping": [s.as_dict() for s in self.stopping],
            "order_sensitivity_auroc_last": self.order_sensitivity,
            "permutation_test": self.permutation.as_dict() if self.permutation is not None else None,
            "skip_on": self.skip_on,
            "false_stop_bound_z": self.bound_strictness,
            "held_out_agents": self.held_out.as_dict() if self.held_out is not None else None,
            "warnings": self.warnings,
            "trusted": self.trusted,
            "problems": self.problems,
        }

    def table(self) -> list[str]:
        lines = [
            f"{self.runs} runs ({self.failed} failed, {self.failed / max(self.runs, 1):.0%}) in {self.groups} task "
            f"groups, {len(self.agents)} agent(s): " + ", ".join(f"{k} ({v['runs']})" for k, v in self.agents.items()),
            f"task-grouped {self.folds}-fold cross-validation, pooled out-of-fold scores (model family chosen per "
            f"fold by an inner CV: {', '.join(sorted(set(self.chosen)))})",
            "",
            f"{'at the last step':<34}{'AUROC':>7}  {'95% interval':<14}{'runs':>6}",
        ]
        for f in self.last_step:
            name = f"{f.name} (baseline, {f.direction})" if f.baseline else f.name
            lines.append(f"  {name:<32}{f.auroc:>7.3f}  {_interval(f.low, f.high):<14}{f.runs:>6}")
        header = f"  {'step':>4} {'runs':>6} {'failed':>6} {'fit':>7} {'chars so far':>13} {'prompt tokens':>14}"
        lines += ["", "early warning (runs still going at step k; baselines from the same first k steps, oriented on "
                  "the training side: + more means failure, - less):", header]  # fmt: skip
        for r in self.early:
            chars, prompt = f"{r.chars:.3f} {_sign(r.chars_sign)}", f"{_na(r.prompt_tokens)} {_sign(r.prompt_sign)}"
            lines.append(f"  {r.k:>4} {r.runs:>6} {r.failed:>6} {r.score:>7.3f} {chars:>13} {prompt:>14}")
        if self.permutation is not None:
            t = self.permutation
            lines += ["", f"against chance: {len(t.null)} fits on shuffled outcomes scored {t.null_mean:.3f} +- "
                      f"{t.null_sd:.3f} (max {max(t.null, default=float('nan')):.3f}) at the last step; the fit "
                      f"{t.real:.3f}, p = {t.p_value:.3f}"]  # fmt: skip
        lines += ["", "stopping runs (thresholds cross-fitted: chosen without the runs they judge):"]
        lines += [f"  {stop_line(s)}" for s in self.stopping]
        if self.held_out is not None:
            lines += ["", *self.held_out.lines()]
        if not self.skip_on:
            why = ("it did not hold its budget on the held-out agents" if self.held_out is not None else
                   "no threshold stopped a useful share of the failing runs within the false-stop bound")  # fmt: skip
            lines.append(f"  SKIP is off in the written model: {why}")
        if self.order_sensitivity:
            lo, hi = min(self.order_sensitivity), max(self.order_sensitivity)
            lines.append(f"\nfile-order sensitivity: last-step AUROC {lo:.3f}-{hi:.3f} with the runs shuffled "
                         f"({len(self.order_sensitivity)} orders; baselines learned in each order)")  # fmt: skip
        if self.warnings:
            lines += ["", "do not trust this fit yet:"] + [f"  - {w}" for w in self.warnings]
        return lines


def _interval(low: float, high: float) -> str:
    return "n/a" if math.isnan(low) else f"{low:.2f}-{high:.2f}"


def _na(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3f}"


def _sign(sign: int) -> str:
    return {1: "+", -1: "-"}.get(sign, "+/-")
