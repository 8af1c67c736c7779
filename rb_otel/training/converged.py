"""Converged coding runs, label-free: what a run spends after its work is done, and a rule that would stop it
there (docs/signal.md, "Converged coding runs").

* **After the last change**: the share of a run's tokens spent after its last change to the workspace (the
  ``since_change`` rule's *change*). For a successful run that is what finishing cost once the fix was in.
* **The candidate rule** (:func:`converged_stop`): once a *passing check* (a test run or a run of code,
  :func:`~rb_otel.steering.pilot.progress.runs_check`, exit code 0) follows the last change, stop after ``k``
  more steps with no change. What it saves: the tokens of the steps after the stop. What it risks: the run
  changes the workspace after the stop point, so the patch it would have ended with differs from the one it has
  at the stop (:func:`patch_changes_after`).
* **k chosen on the other agents** (:func:`converged_rule_by_agent`): each coding agent held out in turn, ``k`` is
  the smallest of :data:`K_CHOICES` whose risk stays within the budget on every training agent (and that stops at
  least :data:`MIN_STOPS` of their runs: a rule that stops nothing shows no risk), then applied to the held-out
  agent; the opt-in ``on_converged="stop"`` ships only when the risk is within
  :data:`RISK_BUDGET` on every agent held out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rb_otel.steering.pilot.progress import (
    call_writes,
    command_segments,
    json_arguments,
    return_code,
    runs_check,
)
from rb_otel.training.dataset import LabelledRun, agent_unit

__all__ = [
    "K_CHOICES",
    "MIN_STOPS",
    "RISK_BUDGET",
    "ConvergedFigures",
    "converged_rule_by_agent",
    "converged_stop",
    "patch_changes_after",
    "tokens_after_last_change",
]

#: The steps without a change after a passing check the rule may wait (the most eager first).
K_CHOICES = (2, 3, 5, 8, 13, 21)
#: The share of stopped runs whose patch would still have changed that the opt-in rule may risk.
RISK_BUDGET = 0.005
#: A ``k`` is judged on the training agents only when it stops at least this many of their runs.
MIN_STOPS = 20


def _changes(run: LabelledRun) -> list[bool]:
    return [s.action is not None and call_writes(s.action, s.action_input or "") for s in run.steps]


def tokens_after_last_change(run: LabelledRun) -> float | None:
    """The share of a run's tokens spent after its last change to the workspace; ``None`` for a run that never
    changed anything or reports no tokens."""
    changed = [i for i, c in enumerate(_changes(run)) if c]
    total = sum(run.tokens)
    if not changed or total <= 0:
        return None
    return sum(run.tokens[changed[-1] + 1 :]) / total


def converged_stop(run: LabelledRun, k: int) -> int | None:
    """The index of the last step the run would take under the rule (module docstring), or ``None`` when it never
    fires: ``k`` steps after a passing check that follows the run's latest change (so the run has changed something:
    a check before any change is the agent looking, not verifying), with no change among them."""
    quiet: int | None = None  # steps since a passing check with no change since the last change
    changed = False
    for i, step in enumerate(run.steps):
        if step.action is not None and call_writes(step.action, step.action_input or ""):
            quiet, changed = None, True
            continue
        if quiet is not None:
            quiet += 1
        elif (
            changed
            and step.action is not None
            and runs_check(step.action, step.action_input or "")
            and return_code(step.observation or "") == 0
        ):
            quiet = 0
        if quiet is not None and quiet >= k:
            return i
    return None


_TARGET = re.compile(r"(?<![0-9&<])>>?\s*['\"]?([\w./~$-]+)")
_EDITING_PROGRAMS = frozenset({"sed", "perl", "tee", "touch", "truncate", "patch"})


def written_paths(action: str, arguments: str) -> tuple[set[str], set[str]]:
    """``(written, removed)``: the files a change writes and the files it removes, as far as its command says (a
    redirect's target, ``sed -i``'s files, ``tee``/``touch``'s, ``rm``'s; an editor call's ``path``); a change
    whose targets cannot be read writes ``{"?"}``, which no scratch rule can excuse. A command that writes ``git
    diff``'s output writes the patch out and changes nothing of the workspace's."""
    parsed = json_arguments(arguments)
    if parsed is not None and isinstance(parsed.get("path"), str) and not isinstance(parsed.get("command"), str):
        return {str(parsed["path"])}, set()
    if parsed is not None and isinstance(parsed.get("path"), str) and " " not in str(parsed.get("command", "")):
        return {str(parsed["path"])}, set()
    command = str(parsed.get("command", "")) if parsed else arguments
    segments = command_segments(command)
    if any(w[0] == "git" and len(w) > 1 and w[1] in {"diff", "format-patch"} for w in segments):
        return set(), set()  # writing the patch out (mini-swe-agent 2's submission), not changing the workspace
    head = command.split("\n", 1)[0] if "<<" in command else command
    written = {m.group(1) for m in _TARGET.finditer(head) if m.group(1) != "/dev/null"}
    removed: set[str] = set()
    for words in segments:
        program = words[0].rsplit("/", 1)[-1]
        files = [w.strip("'\"") for w in words[1:] if not w.startswith("-")]
        if program == "rm":
            removed.update(files)
        elif program in _EDITING_PROGRAMS:
            if program in {"sed", "perl"} and "-e" not in words:
                files = files[1:]  # the first operand is the script
            written.update(f for f in files if "/" in f or "." in f)
        elif program in {"mv", "cp"} and files:
            written.add(files[-1])
            if program == "mv":
                removed.update(files[:-1])
    return (written or ({"?"} if not removed else set())), removed


def patch_changes_after(run: LabelledRun, stop: int) -> bool:
    """Whether the patch the run ends with differs from the one it had after step ``stop``: a change after the stop
    to a file that is not *scratch* (a file the run itself wrote and then removed, such as a reproduction script,
    which its final patch does not hold either way)."""
    changes = [(i, written_paths(s.action or "", s.action_input or "")) for i, s in enumerate(run.steps)
               if s.action is not None and call_writes(s.action, s.action_input or "")]  # fmt: skip
    removed_later = {path for _, (_, removed) in changes for path in removed}
    scratch = {path for _, (written, _) in changes for path in written if path in removed_later}
    for i, (written, removed) in changes:
        if i <= stop:
            continue
        if (written - scratch) or (removed - scratch):
            return True
    return False


@dataclass(frozen=True, slots=True)
class ConvergedFigures:
    """One coding agent: the spend after the last change, and the rule with ``k`` chosen on the other agents."""

    agent: str
    successful: int
    after_last_change_mean: float
    after_last_change_median: float
    k: int | None  # None: no k kept the risk within the budget on the training agents
    stopped: int
    risky: int  # stopped runs that would still have changed their patch
    tokens_saved: float  # share of the agent's tokens the stops would not have spent
    #: The rule at every k on this agent's own runs (label-free facts, not a choice): (k, stopped, risky, saved).
    by_k: tuple[tuple[int, int, int, float], ...] = ()

    @property
    def risk(self) -> float:
        return self.risky / self.stopped if self.stopped else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "successful_runs": self.successful,
            "tokens_after_last_change": {"mean": self.after_last_change_mean, "median": self.after_last_change_median},
            "k": self.k,
            "runs_stopped": self.stopped,
            "stopped_runs_whose_patch_changes_later": self.risky,
            "risk": self.risk,
            "tokens_saved": self.tokens_saved,
            "by_k": [{"k": k, "runs_stopped": s, "risky": r, "tokens_saved": v} for k, s, r, v in self.by_k],
        }


def _apply(runs: Sequence[LabelledRun], k: int) -> tuple[int, int, float]:
    stops = [(r, converged_stop(r, k)) for r in runs]
    stopped = [(r, s) for r, s in stops if s is not None]
    risky = sum(patch_changes_after(r, s) for r, s in stopped)
    total = sum(sum(r.tokens) for r in runs)
    saved = sum(sum(r.tokens[s + 1 :]) for r, s in stopped)
    return len(stopped), risky, (saved / total if total else 0.0)


def _choose_k(by_agent: dict[str, list[LabelledRun]], budget: float) -> int | None:
    for k in K_CHOICES:
        applied = [_apply(runs, k) for runs in by_agent.values()]
        if sum(stopped for stopped, _, _ in applied) < MIN_STOPS:
            continue  # a k that stops (almost) nothing on the training agents says nothing of its risk
        if all(risky <= budget * stopped for stopped, risky, _ in applied):
            return k
    return None


def converged_rule_by_agent(
    runs: Sequence[LabelledRun], *, budget: float = RISK_BUDGET, unit: Callable[[LabelledRun], str] = agent_unit
) -> list[ConvergedFigures]:
    """The module docstring's figures for every agent of ``runs``, each with ``k`` chosen on the others."""
    by_agent: dict[str, list[LabelledRun]] = {}
    for run in runs:
        by_agent.setdefault(unit(run), []).append(run)
    out = []
    for agent, held in sorted(by_agent.items()):
        shares = [s for r in held if not r.failed and (s := tokens_after_last_change(r)) is not None]
        k = _choose_k({a: rs for a, rs in by_agent.items() if a != agent}, budget)
        stopped, risky, saved = _apply(held, k) if k is not None else (0, 0, 0.0)
        out.append(
            ConvergedFigures(
                agent=agent,
                successful=sum(not r.failed for r in held),
                after_last_change_mean=float(np.mean(shares)) if shares else float("nan"),
                after_last_change_median=float(np.median(shares)) if shares else float("nan"),
                k=k,
                stopped=stopped,
                risky=risky,
                tokens_saved=saved,
                by_k=tuple((k_, *_apply(held, k_)) for k_ in K_CHOICES),
            )
        )
    return out
