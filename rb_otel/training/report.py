"""The training report: what the fit would do on runs it never saw, measured before anything is written.

Every figure comes from pooled task-grouped out-of-fold scores (:mod:`rb_otel.training.cv`). The stopping
figures use thresholds that are themselves cross-fitted: each fold's runs are judged with the SLOW/SKIP
thresholds chosen on the other folds' out-of-fold scores, so the false-stop rate shown is one the budget did not
see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rb_otel.evaluation.early import EarlyRow, StopFigures, stop_line

__all__ = ["MIN_FAILURES", "MIN_RUNS", "Figure", "TrainingReport"]

#: Below these a fit is not trusted: the report says so and the file is written only with ``--force``.
MIN_RUNS = 100
MIN_FAILURES = 20


@dataclass(frozen=True, slots=True)
class Figure:
    """An AUROC for failure with its 95% interval (bootstrap over task groups)."""

    name: str
    auroc: float
    low: float
    high: float
    runs: int
    baseline: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "auroc": self.auroc, "ci95": [self.low, self.high], "runs": self.runs,
                "baseline": self.baseline}  # fmt: skip


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
        score, *baselines = self.last_step
        best = max((b for b in baselines if not math.isnan(b.auroc)), key=lambda b: b.auroc, default=None)
        if best is not None and not score.auroc >= best.auroc:
            out.append(
                f"at the last step the fit ({score.auroc:.3f}) does not beat the {best.name} baseline "
                f"({best.auroc:.3f}) out of fold"
            )
        row = next((r for r in self.early if r.k == early_step), None)
        if row is not None:
            pairs = (("characters", row.chars), ("prompt tokens", row.prompt_tokens))
            worse = [f"{n} so far ({v:.3f})" for n, v in pairs if not math.isnan(v) and not row.score >= v]
            if worse:
                out.append(
                    f"at step {early_step} the fit ({row.score:.3f}) does not beat {', '.join(worse)} out of fold"
                )
        self.warnings = out

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
            name = f"{f.name} (baseline)" if f.baseline else f.name
            lines.append(f"  {name:<32}{f.auroc:>7.3f}  {_interval(f.low, f.high):<14}{f.runs:>6}")
        header = f"  {'step':>4} {'runs':>6} {'failed':>6} {'fit':>7} {'chars so far':>13} {'prompt tokens':>14}"
        lines += ["", "early warning (runs still going at step k; baselines from the same first k steps):", header]
        for r in self.early:
            lines.append(
                f"  {r.k:>4} {r.runs:>6} {r.failed:>6} {r.score:>7.3f} {r.chars:>13.3f} {_na(r.prompt_tokens):>14}"
            )
        lines += ["", "stopping runs (thresholds cross-fitted: chosen without the runs they judge):"]
        lines += [f"  {stop_line(s)}" for s in self.stopping]
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
