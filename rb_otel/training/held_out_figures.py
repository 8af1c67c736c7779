"""What leaving one agent out reports: per held-out agent its figures against the size baselines
(:class:`HeldOutAgent`, :class:`Baseline`) and SKIP's (:class:`SkipFigures`), and for all of them the report
(:class:`HeldOutReport`: the table in words, its summary, whether SKIP holds). The procedure is
:mod:`rb_otel.training.held_out`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "EARLY_STEP",
    "FLOOR_EARLY_RUNS",
    "FLOOR_TOLERANCE",
    "MIN_SUCCESSFUL",
    "Baseline",
    "HeldOutAgent",
    "HeldOutReport",
    "SkipFigures",
]

#: The early step every held-out figure is read at ("step 10"; shorter runs are not still going).
EARLY_STEP = 10
#: The cold-start floor's tolerance: a default may be this far below the best size baseline (issue 60).
FLOOR_TOLERANCE = 0.01
#: Step 10 is judged by the floor only where this many of the agent's runs are still going there.
FLOOR_EARLY_RUNS = 50
#: A held-out agent with fewer successful runs than this cannot show a false-stop bound within 2%
#: (Wilson z = 1 with no false stop: 1 / (n + 1)), so it does not decide whether SKIP holds.
MIN_SUCCESSFUL = 50


@dataclass(frozen=True, slots=True)
class Baseline:
    """A size baseline on the held-out agent: oriented by the training agents, and at its best either way."""

    name: str
    oriented: float
    direction: int  # learned on the training agents: +1 more means failure, -1 less
    either: float  # max(AUROC, 1 - AUROC) on the held-out agent itself

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "oriented": self.oriented, "direction": self.direction, "either_way": self.either}


@dataclass(frozen=True, slots=True)
class SkipFigures:
    """SKIP with the training agents' thresholds, on the held-out agent's runs."""

    on: bool  # the thresholds had SKIP on at all
    false_stops: int
    successful: int
    upper: float  # Wilson upper bound (z = 1) of false_stops / successful
    stopped_failing: float
    failing: int
    tokens_saved_per_stop: float  # mean tokens after the SKIP point over the failing runs it stopped
    holds: bool
    why: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "thresholds_have_skip": self.on,
            "false_stops": self.false_stops,
            "successful_runs": self.successful,
            "false_stop_upper_bound": self.upper,
            "stopped_failing": self.stopped_failing,
            "failing_runs": self.failing,
            "tokens_saved_per_stopped_run": self.tokens_saved_per_stop,
            "holds": self.holds,
            "why": self.why,
        }


@dataclass(frozen=True, slots=True)
class HeldOutAgent:
    """One held-out agent's figures (every one from a fit that never saw its runs)."""

    agent: str
    runs: int
    failed: int
    trained_on: tuple[str, ...]
    training_runs: int
    family: str
    last_step: float
    last_baselines: tuple[Baseline, ...]
    early_runs: int
    early: float
    early_baselines: tuple[Baseline, ...]
    skip: SkipFigures  # SKIP relative to the agent (the rule a held-out agent is judged by)
    absolute_skip: SkipFigures  # SKIP at the training side's absolute threshold, for comparison
    skip_rule: dict[str, float] | None = None  # the relative rule chosen on the training agents
    kind: str = ""  # the agent's kind (agent_kind): coding, or tool use
    across_kinds: bool = False  # fitted on agents of another kind (its kind had no other agent)
    #: The two label-free size defaults (no fit: a kind's default where no learned one clears the floor), scored
    #: the same way: the agent-relative size and the run's own size (rb_otel.steering.pilot.model.SIZE_DEFAULTS).
    size_last: float = float("nan")
    size_early: float = float("nan")
    run_size_last: float = float("nan")
    run_size_early: float = float("nan")

    def best(self, *, early: bool, either: bool) -> float:
        """The best size baseline's AUROC (oriented by the training agents, or ``either`` way on this agent)."""
        baselines = self.early_baselines if early else self.last_baselines
        known = [v for b in baselines if not math.isnan(v := (b.either if either else b.oriented))]
        return max(known) if known else 0.5

    def floor(self, *, size: str = "", either: bool = True) -> dict[str, Any]:
        """The cold-start floor (issue 60) for the fit (or ``size``, a size default: ``"agent-relative"`` or
        ``"run"``): at the last step at least the best size baseline minus :data:`FLOOR_TOLERANCE`; at step 10 the
        same against the same-prefix baselines where :data:`FLOOR_EARLY_RUNS` runs or more are still going (else
        not judged)."""
        last, early = {
            "": (self.last_step, self.early),
            "agent-relative": (self.size_last, self.size_early),
            "run": (self.run_size_last, self.run_size_early),
        }[size]
        last_ok = last >= self.best(early=False, either=either) - FLOOR_TOLERANCE
        judged = self.early_runs >= FLOOR_EARLY_RUNS
        early_ok = (not judged) or early >= self.best(early=True, either=either) - FLOOR_TOLERANCE
        return {
            "last_step": bool(last_ok),
            "early": bool(early_ok) if judged else None,
            "met": bool(last_ok and early_ok),
        }

    def margin(self, *, early: bool, either: bool = False) -> float:
        """The fit's AUROC above the best size baseline (oriented by the training agents, or ``either`` way)."""
        baselines = self.early_baselines if early else self.last_baselines
        known = [b.either if either else b.oriented for b in baselines]
        known = [v for v in known if not math.isnan(v)]
        return (self.early if early else self.last_step) - (max(known) if known else 0.5)

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "runs": self.runs,
            "failed": self.failed,
            "trained_on": list(self.trained_on),
            "training_runs": self.training_runs,
            "family": self.family,
            "kind": self.kind,
            "fitted_across_kinds": self.across_kinds,
            "last_step": {
                "auroc": self.last_step,
                "baselines": [b.as_dict() for b in self.last_baselines],
                "margin_oriented": self.margin(early=False),
                "margin_either_way": self.margin(early=False, either=True),
            },
            "early": {
                "step": EARLY_STEP,
                "runs_still_going": self.early_runs,
                "auroc": self.early,
                "baselines": [b.as_dict() for b in self.early_baselines],
                "margin_oriented": self.margin(early=True),
                "margin_either_way": self.margin(early=True, either=True),
            },
            "agent_relative_size": {"last_step": self.size_last, "early": self.size_early},
            "run_size": {"last_step": self.run_size_last, "early": self.run_size_early},
            "floor": {
                "fit": self.floor(),
                "agent_relative_size": self.floor(size="agent-relative"),
                "run_size": self.floor(size="run"),
                "fit_oriented": self.floor(either=False),
                "agent_relative_size_oriented": self.floor(size="agent-relative", either=False),
                "run_size_oriented": self.floor(size="run", either=False),
            },
            "skip": self.skip.as_dict(),
            "skip_rule": self.skip_rule,
            "absolute_skip": self.absolute_skip.as_dict(),
        }


@dataclass(slots=True)
class HeldOutReport:
    """Every held-out agent, the budget, and whether SKIP held where it can be judged."""

    agents: list[HeldOutAgent]
    max_false_stops: float
    keep_tasks_apart: bool
    skipped: dict[str, str] = field(default_factory=dict)  # agents that could not be held out, and why
    method: str = "leave one agent out"

    def floor_met(self, *, size: str = "", either: bool = True) -> bool:
        """The cold-start floor (:meth:`HeldOutAgent.floor`) met on every held-out agent (and there was one)."""
        return bool(self.agents) and self.floors_met(size=size, either=either) == len(self.agents)

    def floors_met(self, *, size: str = "", either: bool = True) -> int:
        """How many held-out agents the fit (or the size default ``size``) meets the cold-start floor on."""
        return sum(a.floor(size=size, either=either)["met"] for a in self.agents)

    @property
    def judged(self) -> list[HeldOutAgent]:
        """The held-out agents with enough successful runs to judge a false-stop bound (:data:`MIN_SUCCESSFUL`)."""
        return [a for a in self.agents if a.skip.successful >= MIN_SUCCESSFUL]

    @property
    def skip_holds(self) -> bool:
        """SKIP held its budget on every judged held-out agent (and there was one)."""
        judged = self.judged
        return bool(judged) and all(a.skip.holds for a in judged)

    def why_skip_off(self) -> str:
        """In words, why SKIP is off (``""`` when it holds)."""
        if self.skip_holds:
            return ""
        if not self.judged:
            return f"no held-out agent has {MIN_SUCCESSFUL} successful runs to judge a false-stop bound by"
        return "; ".join(f"{a.agent}: {a.skip.why}" for a in self.judged if not a.skip.holds)

    def summary(self, *, early: bool, min_runs: int = 0) -> dict[str, Any]:
        """The median and the worst held-out agent (of those with at least ``min_runs`` runs): the fit's margin over
        the best size baseline oriented on the training agents, and over the best either way on the agent itself."""
        chosen = [
            a
            for a in self.agents
            if a.runs >= min_runs
            and not math.isnan(a.early if early else a.last_step)
            and not math.isnan(a.margin(early=early, either=True))
        ]
        out: dict[str, Any] = {"agents": len(chosen), "min_runs": min_runs}
        for key, either in (("oriented", False), ("either_way", True)):
            margins = sorted((a.margin(early=early, either=either), a.agent) for a in chosen)
            out[key] = {  # None, not NaN, where there is no agent: a report compares equal to itself
                "median_margin": float(np.median([m for m, _ in margins])) if margins else None,
                "worst_margin": margins[0][0] if margins else None,
                "worst_agent": margins[0][1] if margins else "",
            }
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "floor": {
                "fit": self.floor_met(),
                "agent_relative_size": self.floor_met(size="agent-relative"),
                "run_size": self.floor_met(size="run"),
                "fit_oriented": self.floor_met(either=False),
                "agent_relative_size_oriented": self.floor_met(size="agent-relative", either=False),
                "run_size_oriented": self.floor_met(size="run", either=False),
            },
            "summary": {
                "early": self.summary(early=True),
                "last_step": self.summary(early=False),
                "early_100_runs": self.summary(early=True, min_runs=100),
                "last_step_100_runs": self.summary(early=False, min_runs=100),
            },
            "max_false_stops": self.max_false_stops,
            "keep_tasks_apart": self.keep_tasks_apart,
            "agents": [a.as_dict() for a in self.agents],
            "not_held_out": dict(self.skipped),
            "skip_holds": self.skip_holds,
            "why_skip_off": self.why_skip_off(),
        }

    def lines(self) -> list[str]:
        """The report in words, an agent a line and the SKIP decision."""
        out = [f"{self.method} ({len(self.agents)} agents; false-stop budget {self.max_false_stops:.1%}):"]
        for a in self.agents:
            best_last = max((b.oriented for b in a.last_baselines), default=float("nan"))
            best_early = max((b.oriented for b in a.early_baselines), default=float("nan"))
            where = "of any kind" if a.across_kinds else f"of its kind, {a.kind.replace('_', ' ')}"
            out.append(
                f"  {a.agent} ({a.runs} runs, {a.failed} failed; fitted on {a.training_runs} runs of "
                f"{len(a.trained_on)} other agent(s) {where}, {a.family}): last step {a.last_step:.3f} vs size "
                f"{best_last:.3f}; step {EARLY_STEP} {a.early:.3f} vs size so far {best_early:.3f} "
                f"({a.early_runs} runs still going); agent-relative size: last {a.size_last:.3f}, step "
                f"{EARLY_STEP} {a.size_early:.3f}; run size: last {a.run_size_last:.3f}, step {EARLY_STEP} "
                f"{a.run_size_early:.3f}; floor {'met' if a.floor()['met'] else 'missed'} (agent-relative size: "
                f"{'met' if a.floor(size='agent-relative')['met'] else 'missed'}, run size: "
                f"{'met' if a.floor(size='run')['met'] else 'missed'}); SKIP: {a.skip.why}"
            )
        for agent, why in self.skipped.items():
            out.append(f"  {agent}: not held out ({why})")
        for label, early in ((f"step {EARLY_STEP}", True), ("last step", False)):
            summary = self.summary(early=early)
            o, e = summary["oriented"], summary["either_way"]
            if not summary["agents"]:
                continue
            out.append(
                f"  {label}, {summary['agents']} held-out agents: median margin {o['median_margin']:+.3f} over the "
                f"oriented size baselines (worst {o['worst_margin']:+.3f}, {o['worst_agent']}), "
                f"{e['median_margin']:+.3f} either way (worst {e['worst_margin']:+.3f}, {e['worst_agent']})"
            )
        out.append("SKIP holds its budget on the held-out agents" if self.skip_holds else
                   f"SKIP off: {self.why_skip_off()}")  # fmt: skip
        return out
