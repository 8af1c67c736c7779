"""The steering signal's development runs, by kind of agent: what ``make held-out`` fits and judges the default
pilots on (docs/signal.md, "Leave one agent out: the headline").

The sources are the development data's (``signal/*`` under the data root, :mod:`rb_otel.datasets`), each read
natively (every outcome from the source's own records: a tau2 reward, a SWE-bench evaluation report); runs without
an outcome are left out and counted. Nothing the data's README keeps apart may be among them
(:mod:`rb_otel.training.kept_apart`): reading refuses it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.datasets import data_root, source_folder
from rb_otel.steering.pilot.fingerprint import FitFingerprint
from rb_otel.steering.pilot.kinds import CODING, CUSTOMER_SERVICE
from rb_otel.steering.pilot.model import PILOT_V3, PilotModel
from rb_otel.training.cv import grouped_folds, out_of_fold
from rb_otel.training.dataset import Dataset, LabelledRun, agent_unit, grouped, read_dataset
from rb_otel.training.features import agent_balanced, extract, prior_of
from rb_otel.training.fit import AVERAGE, fit_candidate
from rb_otel.training.held_out import EARLY_STEP, HeldOutReport, leave_one_agent_out
from rb_otel.training.kept_apart import refuse_kept_apart, refuse_kept_apart_files
from rb_otel.training.relative_skip import choose_relative_skip
from rb_otel.training.thresholds import choose_fsm

__all__ = [
    "DEVELOPMENT_SOURCES",
    "HARNESSES",
    "SHIP_MARGIN",
    "KindRuns",
    "default_decision",
    "default_model",
    "harness_of",
    "held_out",
    "read_kind",
]

#: How far above every oriented size baseline at step 10 a kind's pilot must be on the median held-out agent to
#: become that kind's default (and below none with 100 runs or more).
SHIP_MARGIN = 0.05

#: The development sources of each kind (folders or archives under the data root's ``signal/``).
DEVELOPMENT_SOURCES: dict[str, tuple[str, ...]] = {
    CUSTOMER_SERVICE: (
        "tau2_grok",
        "tau2_gpt41_sierra",
        "tau2_gpt41sft_sierra",
        "tau2_sonnet45_aide",
        "tau2_ironshell",
        "tau2_toolorchestra",
        "tau2_whissle",
    ),
    CODING: ("mini_swe_agent_gemini3pro", "msa_gpt5fam_cam", "msa2_deepseek_verified", "terminal_bench_claude_code"),
}


IRONFORGE = "IronForge"
#: The harness of each development source (the README and ``provenance/``): Sierra's tau2 ``llm_agent`` (its own
#: result files, the aide leaderboard submission, the IronShell submission's llm_agent runs); one researcher's fork
#: of tau2 with a changed policy, user simulator and evaluator (the Grok runs); NVIDIA's ToolOrchestra; Whissle's
#: voice stack in text mode; the IronForge agent (an llm_agent with correction rules, split from IronShell's file
#: by :func:`harness_of`); mini-swe-agent (1.x and 2.x: one harness, two versions); the Claude Code CLI.
HARNESSES: dict[str, str] = {
    "tau2_gpt41_sierra": "tau2 llm_agent",
    "tau2_gpt41sft_sierra": "tau2 llm_agent",
    "tau2_sonnet45_aide": "tau2 llm_agent",
    "tau2_ironshell": "tau2 llm_agent",
    "tau2_grok": "tau2 grok fork",
    "tau2_toolorchestra": "ToolOrchestra",
    "tau2_whissle": "Whissle",
    "mini_swe_agent_gemini3pro": "mini-swe-agent",
    "msa_gpt5fam_cam": "mini-swe-agent",
    "msa2_deepseek_verified": "mini-swe-agent",
    "terminal_bench_claude_code": "Claude Code",
}


@dataclass(slots=True)
class KindRuns:
    """The labelled runs of one kind, and per source how many runs had no outcome (left out) and what could not
    be read."""

    kind: str
    runs: list[LabelledRun]
    unlabelled: dict[str, int] = field(default_factory=dict)
    problems: dict[str, int] = field(default_factory=dict)
    #: Each run's source (the archive it came from), by run id.
    source_of: dict[str, str] = field(default_factory=dict)

    @property
    def harnesses(self) -> list[str]:
        """Each run's harness (:func:`harness_of`), in the order of ``runs``."""
        return [harness_of(self.source_of.get(r.run_id, ""), r) for r in self.runs]


def read_kind(
    kind: str,
    root: Path | None = None,
    *,
    sources: tuple[str, ...] | None = None,
    progress: Callable[[str], None] | None = None,
) -> KindRuns:
    """Every labelled development run of ``kind`` (``sources`` narrows them), task groups joined across sources;
    ``ValueError`` when a run of an agent the README keeps apart is among them."""
    say = progress or (lambda _: None)
    base = data_root() if root is None else root
    out = KindRuns(kind, [])
    for name in sources or DEVELOPMENT_SOURCES[kind]:
        folder = source_folder(f"signal/{name}", base)
        refuse_kept_apart_files([folder])  # by the files' own markers, whatever the readers make of them
        data: Dataset = read_dataset([folder])
        out.runs += data.runs
        out.source_of.update((r.run_id, name) for r in data.runs)
        out.unlabelled[name] = data.unlabelled
        out.problems[name] = len(data.problems)
        say(f"{name}: {len(data.runs)} labelled runs, {data.unlabelled} without an outcome (left out)")
    refuse_kept_apart(out.runs)
    out.runs = grouped(out.runs)
    return out


def harness_of(source: str, run: LabelledRun) -> str:
    """The harness a development run comes from, for leaving whole harnesses out (docs/signal.md): the source's,
    as the data's README and provenance files describe it (:data:`HARNESSES`); the IronShell submission holds two,
    its llm_agent runs (Sierra's harness) and the IronForge agent's (told apart by the harness the file names)."""
    if source == "tau2_ironshell" and "ironforge" in run.harness.lower():
        return IRONFORGE
    return HARNESSES.get(source, run.harness or source)


def held_out(runs: Sequence[LabelledRun], **options: Any) -> HeldOutReport:
    """:func:`~rb_otel.training.held_out.leave_one_agent_out` on development runs, after refusing any run of an
    agent the README keeps apart (``ValueError``: no such run reaches a fit). ``rb-otel train`` on a user's own runs
    has no such rule: a user's OpenHands runs are theirs to fit."""
    refuse_kept_apart(runs)
    return leave_one_agent_out(runs, **options)


def default_decision(report: HeldOutReport, *, min_runs: int = 100) -> tuple[bool, str]:
    """Whether a kind's pilot, held out agent by agent (``report``), may become the kind's default, and why: at
    step 10 its margin over the best size baseline oriented on the training agents is at least
    :data:`SHIP_MARGIN` on the median held-out agent, and below zero on none with ``min_runs`` runs or more."""
    summary = report.summary(early=True)
    median = summary["oriented"]["median_margin"]
    if median is None:
        return False, "no agent of this kind could be held out"
    below = [f"{a.agent} ({a.margin(early=True):+.3f})" for a in report.agents
             if a.runs >= min_runs and not a.margin(early=True) >= 0]  # fmt: skip
    ships = median >= SHIP_MARGIN and not below
    parts = [f"step {EARLY_STEP}: the median held-out agent is {median:+.3f} over the oriented size baselines "
             f"(a default needs {SHIP_MARGIN:+.3f})"]  # fmt: skip
    parts.append(f"below them with {min_runs}+ runs: {', '.join(below)}" if below else
                 f"below them on no agent with {min_runs}+ runs")  # fmt: skip
    return ships, "; ".join(parts)


def default_model(
    kind: str, runs: Sequence[LabelledRun], report: HeldOutReport, *, max_false_stops: float = 0.02, seed: int = 0
) -> PilotModel:
    """A kind's pilot/3: :data:`~rb_otel.training.fit.AVERAGE` fitted on every development run of ``kind`` (the
    procedure ``report`` held out agent by agent; training agents weighted alike), SLOW's threshold chosen on its
    task-grouped out-of-fold scores, and SKIP on only where it held on every held-out agent that can judge it
    (the relative rule, as ``rb-otel train`` writes it; off otherwise). Whether it may *be* the kind's default is
    :func:`default_decision`'s to say."""
    from rb_otel.training.train_model import model_of

    refuse_kept_apart(runs)
    runs = list(runs)
    prior = prior_of(runs)
    data = extract(runs, prior)
    data.run_weight = agent_balanced(runs, agent_unit)
    every = list(range(len(runs)))
    fitted = fit_candidate(data, every, AVERAGE)
    folds = grouped_folds([r.group for r in runs], 5, seed)
    probabilities = data.probabilities(out_of_fold(data, every, folds, AVERAGE))
    successful = [p for p, r in zip(probabilities, runs, strict=True) if not r.failed]
    failing = [p for p, r in zip(probabilities, runs, strict=True) if r.failed]
    fsm = choose_fsm(successful, probabilities, max_false_stops=max_false_stops, failing=failing, z=None)
    relative = None
    if report.skip_holds:
        relative = choose_relative_skip(runs, probabilities, fsm, max_false_stops, unit=agent_unit)
    if relative is not None:
        fsm = {**fsm, "skip_quantile": relative[0], "skip_window": float(relative[1])}
    ships, why = default_decision(report)
    failed = sum(r.failed for r in runs)
    trained = {
        "kind": kind,
        "agents": dict(Counter(agent_unit(r) for r in runs)),
        "runs": len(runs),
        "failed": failed,
        "task_groups": len({r.group for r in runs}),
        "family": AVERAGE.name,
        "members": [c.name for c in AVERAGE.members],
        "text_buckets": fitted.text_buckets,
        "held_out_agents": report.as_dict(),
        "default": {"ships": ships, "why": why},
        "fingerprint": FitFingerprint.of((r.run_id, r.task_keys) for r in runs).as_dict(),
    }
    return model_of(fitted, prior, fsm, PILOT_V3, trained, skip_on=relative is not None,
                    max_false_stops=max_false_stops)  # fmt: skip
