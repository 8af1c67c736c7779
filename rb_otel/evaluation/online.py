"""``rb-otel evaluate SOURCE --online``: steering measured the way a deployment lives it, prequentially.

The runs are replayed in file order, each agent on its own (its baselines and its model are its own):

* a run is scored by the model its agent had when it started: the default pilot of its kind until its labels
  orient its size (:mod:`~rb_otel.training.oriented_size`, from 50 labels) or a fit is trusted, then that model
  (what a worker picks up from the store), with its SLOW/SKIP;
* its outcome reaches the learner only after the run has ended (the next run sees it, none before);
* the learner refits on ``rb-otel train --watch``'s schedule (:func:`~rb_otel.training.watch.refit_due`, the same
  code) by the same fit (:func:`~rb_otel.training.watch.fit_agent`), and a fit that publishes nothing (neither
  trusted nor a clear size) withdraws the agent's model, as the watcher does.

Each run gives one :class:`OnlineRun` (one JSON object of ``--json``). The figures (:func:`online_figures`) take
the runs that started after 50, 100 and 200 labelled runs of their agent and compare the risk at step 10 and at
the last step with the same-prefix size baselines (characters written so far, prompt tokens so far, and at the
last step the steps too), each oriented on the runs labelled before the cut only; SKIP is counted from the first
run its agent's model had earned it (false stops with their Wilson upper bound, z = 1). Data with no time order
(the shared development sets) is replayed in a fixed shuffled order per agent: ``seed`` (none: file order).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.baselines.models import StoredModel
from rb_otel.evaluation.metrics import auroc, wilson_upper
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.pilot import MemorySummaryStore, PilotModel, PilotRun
from rb_otel.training.dataset import LabelledRun
from rb_otel.training.thresholds import fsm_states
from rb_otel.training.watch import AgentFit, fit_agent, refit_due

__all__ = ["CUTS", "EARLY", "OnlineRun", "online_figures", "ordered", "replay_agent", "replay_online"]

#: The labelled runs after which the figures are taken.
CUTS = (50, 100, 200)
#: The early step of the figures.
EARLY = 10
_K = EARLY - 1  # its index
#: SKIP is "held" when it stops at least this share of the later failing runs ...
SKIP_STOPS = 0.10
#: ... and the Wilson upper bound (z = 1) of its false stops is at most this.
SKIP_FALSE_STOPS = 0.02


@dataclass(slots=True)
class OnlineRun:
    """One replayed run: who scored it and how (the ``--json`` object), with the sizes the figures compare."""

    run_id: str
    agent: str
    failed: bool
    labels_before: int
    model: str
    risk: list[float]
    skip_step: int | None  # 1-based: the step of the first SKIP
    skip_on: bool  # the model that scored it had SKIP earned (a learned model's own record)
    chars: list[int] = field(default_factory=list)  # characters written so far, per step
    prompt: list[int] = field(default_factory=list)  # the largest prompt so far in tokens, per step

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "outcome": "failure" if self.failed else "success",
            "labels_before": self.labels_before,
            "model": self.model,
            "steps": len(self.risk),
            "risk": [round(r, 6) for r in self.risk],
            "skip_step": self.skip_step,
            "skip_on": self.skip_on,
        }


def ordered(runs: Sequence[LabelledRun], seed: int | None) -> dict[str, list[LabelledRun]]:
    """Each agent's runs: in file order (``seed`` ``None``), or in a fixed shuffled order (the agent's key and
    ``seed`` choose it, so one agent's order does not depend on which others are read)."""
    by_agent: dict[str, list[LabelledRun]] = {}
    for run in runs:
        by_agent.setdefault(run.agent, []).append(run)
    if seed is not None:
        for agent, its in by_agent.items():
            order = np.random.default_rng([seed, zlib.crc32(agent.encode())]).permutation(len(its))
            by_agent[agent] = [its[i] for i in order]
    return by_agent


def replay_agent(
    runs: Sequence[LabelledRun],
    *,
    fit: Callable[..., AgentFit] = fit_agent,
    fit_options: dict[str, Any] | None = None,
    say: Callable[[str], None] | None = None,
) -> list[OnlineRun]:
    """One agent's runs, in the order given, through the prequential loop (module docstring)."""
    baselines = BaselineCache(MemorySummaryStore())
    learned: StoredModel | None = None
    last: int | None = None
    labelled: list[LabelledRun] = []
    out = []
    defaults: dict[str, PilotModel] = {}  # the default of each kind, read once
    for run in runs:
        default = defaults.get(run.kind) or defaults.setdefault(run.kind, PilotModel.default_for(run.kind))
        model = learned.pilot if learned is not None and learned.pilot is not None else default
        scorer = PilotRun(model, baselines, run.agent)
        risk = [scorer.score(step) for step in run.steps]
        states = fsm_states(DifficultyFSM(**scorer.fsm_thresholds()), risk)
        scorer.finish()
        written = np.cumsum([len(s.thought or "") + len(s.action_input or "") for s in run.steps]).tolist()
        out.append(OnlineRun(
            run.run_id, run.agent, run.failed, len(labelled), learned.name if learned is not None else model.version,
            risk, next((i + 1 for i, s in enumerate(states) if s == "SKIP"), None),
            learned is not None and learned.skip, [int(c) for c in written], list(run.prompt_tokens),
        ))  # fmt: skip
        labelled.append(run)  # its outcome reaches the learner once it has ended
        if refit_due(len(labelled), last):
            result = fit(list(labelled), agent=run.agent, **(fit_options or {}))
            last = len(labelled)
            learned = result.record() if result.publishes else None
            if say is not None:
                say(result.line())
    return out


def replay_online(
    runs: Sequence[LabelledRun],
    *,
    seed: int | None = None,
    fit: Callable[..., AgentFit] = fit_agent,
    fit_options: dict[str, Any] | None = None,
    say: Callable[[str], None] | None = None,
) -> list[OnlineRun]:
    """Every agent's runs through :func:`replay_agent` (in the order :func:`ordered` gives), agent after agent."""
    out: list[OnlineRun] = []
    for agent, its in sorted(ordered(runs, seed).items()):
        if say is not None:
            say(f"{agent}: replaying {len(its)} runs")
        out += replay_agent(its, fit=fit, fit_options=fit_options, say=say)
    return out


def _oriented(
    before: Sequence[OnlineRun], after: Sequence[OnlineRun], value: Callable[[OnlineRun], float]
) -> tuple[float, int]:
    """The AUROC on ``after`` of a size ``value``, in the direction the runs labelled before (``before``) say."""
    a = auroc([r.failed for r in before], [value(r) for r in before]) if before else float("nan")
    sign = -1 if not math.isnan(a) and a < 0.5 else 1
    return auroc([r.failed for r in after], [sign * value(r) for r in after]), sign


def _compare(
    before: Sequence[OnlineRun],
    after: Sequence[OnlineRun],
    score: Callable[[OnlineRun], float],
    baselines: dict[str, Callable[[OnlineRun], float]],
) -> dict[str, Any]:
    fit = auroc([r.failed for r in after], [score(r) for r in after])
    sizes = {}
    for name, value in baselines.items():
        if name == "prompt tokens" and not any(value(r) for r in after):
            continue  # a harness that reports no tokens
        figure, sign = _oriented(before, after, value)
        sizes[name] = {"auroc": figure, "direction": sign}
    known = [s["auroc"] for s in sizes.values() if not math.isnan(s["auroc"])]
    best = max(known) if known else float("nan")
    return {"runs": len(after), "failed": sum(r.failed for r in after), "pilot": fit, "size": sizes,
            "best_size": best, "margin": fit - best}  # fmt: skip


def _skip_figures(records: Sequence[OnlineRun]) -> dict[str, Any]:
    """SKIP from the first run scored by a model that had earned it: later failing runs stopped, later successful
    runs stopped (false stops) with the Wilson upper bound (z = 1)."""
    start = next((i for i, r in enumerate(records) if r.skip_on), None)
    if start is None:
        return {"earned": False}
    later = records[start:]
    stopped = [r.skip_on and r.skip_step is not None for r in later]
    failing = sum(r.failed for r in later)
    successful = len(later) - failing
    caught = sum(s for s, r in zip(stopped, later, strict=True) if r.failed)
    false = sum(s for s, r in zip(stopped, later, strict=True) if not r.failed)
    bound = wilson_upper(false, successful)
    share = caught / failing if failing else float("nan")
    return {"earned": True, "from_run": start + 1, "labels_when_earned": later[0].labels_before,
            "failing": failing, "successful": successful, "stopped_failing": share,
            "false_stops": false / successful if successful else float("nan"), "false_stop_bound": bound,
            "held": bool(failing and share >= SKIP_STOPS and bound <= SKIP_FALSE_STOPS),
            "still_on_at_the_end": later[-1].skip_on}  # fmt: skip


def online_figures(records: Sequence[OnlineRun], *, cuts: Sequence[int] = CUTS) -> dict[str, Any]:
    """Per agent, per cut: the figures of the runs that started after ``cut`` labelled runs (module docstring)."""
    by_agent: dict[str, list[OnlineRun]] = {}
    for r in records:
        by_agent.setdefault(r.agent, []).append(r)
    out: dict[str, Any] = {}
    for agent, its in sorted(by_agent.items()):
        per: dict[str, Any] = {"runs": len(its), "failed": sum(r.failed for r in its)}
        for cut in cuts:
            before = [r for r in its if r.labels_before < cut]
            after = [r for r in its if r.labels_before >= cut]
            if len({r.failed for r in after}) < 2:
                continue
            early = [r for r in after if len(r.risk) >= EARLY]
            early_before = [r for r in before if len(r.risk) >= EARLY]
            row: dict[str, Any] = {
                "last": _compare(before, after, lambda r: r.risk[-1], {
                    "characters": lambda r: r.chars[-1], "steps": lambda r: len(r.risk),
                    "prompt tokens": lambda r: r.prompt[-1]}),
                "learned": sum(r.model.startswith("pilot/agent:") for r in after) / len(after),
                "oriented": sum(r.model.startswith("pilot/agent-size:") for r in after) / len(after),
            }  # fmt: skip
            if len({r.failed for r in early}) == 2:
                row[f"step_{EARLY}"] = _compare(early_before, early, lambda r: r.risk[_K], {
                    "characters": lambda r: r.chars[_K], "prompt tokens": lambda r: r.prompt[_K]})  # fmt: skip
            per[f"after_{cut}"] = row
        per["skip"] = _skip_figures(its)
        out[agent] = per
    return out


def figure_lines(figures: dict[str, Any]) -> list[str]:
    """The figures as the table ``rb-otel evaluate --online`` prints."""
    lines = [f"{'agent':<44}{'after':>6}{'runs':>6}  {'step 10: pilot / size':<24}{'last: pilot / size':<22}"
             "fit / oriented size"]  # fmt: skip
    for agent, per in figures.items():
        for key, row in per.items():
            if not key.startswith("after_"):
                continue
            early = row.get(f"step_{EARLY}")
            e = f"{early['pilot']:.3f} / {early['best_size']:.3f}" if early else "n/a"
            last = row["last"]
            lines.append(f"{agent[:43]:<44}{key[6:]:>6}{last['runs']:>6}  {e:<24}"
                         f"{last['pilot']:.3f} / {last['best_size']:.3f}      {row['learned']:.0%} / "
                         f"{row.get('oriented', 0.0):.0%}")  # fmt: skip
        skip = per["skip"]
        if skip["earned"]:
            lines.append(f"  SKIP earned at {skip['labels_when_earned']} labels: stopped "
                         f"{skip['stopped_failing']:.1%} of {skip['failing']} later failing runs, "
                         f"{skip['false_stops']:.1%} of {skip['successful']} "
                         f"successful (bound {skip['false_stop_bound']:.1%}); held: {skip['held']}")  # fmt: skip
        else:
            lines.append("  SKIP never earned")
    return lines


def online_command(
    paths: Sequence[str], *, labels: str | None, out: str | None, seed: int | None, read_options: dict[str, Any],
    quiet: bool = False,
) -> int:  # fmt: skip
    """``rb-otel evaluate --online``: replay, write ``out`` (one JSON object per run; ``-``: stdout, then no
    table), print the figures; 2 and one line on stderr for a source that cannot be read."""
    import json
    import sys

    from rb_otel.analysis import SourceError
    from rb_otel.files import write_atomically
    from rb_otel.importers import RecordError
    from rb_otel.training.dataset import read_dataset
    from rb_otel.training.watch import labels_of

    def say(line: str) -> None:
        if not quiet:
            print(line, file=sys.stderr, flush=True)

    try:
        dataset = read_dataset(paths, labels=labels_of(paths, labels), **read_options)
    except (RecordError, SourceError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not dataset.runs:
        print(f"error: {', '.join(paths)}: no labelled runs to replay ({dataset.unlabelled} without an outcome)",
              file=sys.stderr)  # fmt: skip
        return 2
    records = replay_online(dataset.runs, seed=seed, say=say)
    figures = online_figures(records)
    text = "".join(json.dumps(r.as_dict(), separators=(",", ":")) + "\n" for r in records)
    if out == "-":
        sys.stdout.write(text)
        return 0
    if out is not None:
        write_atomically(Path(out), text)
    order = "file order" if seed is None else f"each agent's runs shuffled with seed {seed}"
    print(f"prequential replay of {len(records)} runs ({order}); sizes oriented on the runs labelled before each cut")
    for line in figure_lines(figures):
        print(line)
    return 0
