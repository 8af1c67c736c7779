"""The agents the development data's README keeps apart: runs that the shipped pilots are *checked* on and must
never be fitted on (``../shared/data/signal/README.md``, "Kept apart"). A development fit refuses any of them
(:func:`refuse_kept_apart`), so one cannot reach a fit by being put in the wrong folder.

Each rule names the agent as the README does and recognises its runs by harness, model and source, as the
importers read them from the files (:func:`~rb_otel.training.dataset.agent_unit`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rb_otel.training.dataset import LabelledRun

__all__ = ["KEPT_APART", "KeptApart", "kept_apart", "refuse_kept_apart"]


@dataclass(frozen=True, slots=True)
class KeptApart:
    """One kept-apart agent: ``what`` (in the README's words) and the patterns its runs match (all given ones)."""

    what: str
    model: str = ""  # a regular expression on the normalised model
    harness: str = ""  # ... on the harness
    source: str = ""  # ... on the importer's source name

    def matches(self, run: LabelledRun) -> bool:
        checks = ((self.model, run.model), (self.harness, run.harness), (self.source, run.source))
        return all(re.search(pattern, value, re.IGNORECASE) for pattern, value in checks if pattern)


KEPT_APART: tuple[KeptApart, ...] = (
    KeptApart("OpenHands CodeAct with Claude 3.5 Sonnet on SWE-bench Verified", model=r"claude-3[.-]5-sonnet"),
    KeptApart("OpenHands CodeAct (any model)", harness=r"openhands|codeact"),
    KeptApart("aider's SWE-bench Lite runs", harness=r"aider"),
    KeptApart("tau-bench's historical GPT-4o trajectories", source=r"^tau_bench$"),
    KeptApart("tau-bench's historical GPT-4o trajectories", model=r"^gpt-4o(-20\d\d-\d\d-\d\d)?$", harness=r"tau"),
    KeptApart("the tau2-bench leaderboard submission of gpt-oss-120b (a LangGraph agent)", model=r"gpt-oss-120b"),
    KeptApart("the tau2-bench leaderboard submissions of Claude Opus 4.6", model=r"claude-opus-4[.-]6"),
)


def kept_apart(run: LabelledRun) -> str | None:
    """Why ``run`` must stay out of every development fit (the README's words), or ``None``."""
    return next((rule.what for rule in KEPT_APART if rule.matches(run)), None)


def refuse_kept_apart(runs: Iterable[LabelledRun]) -> None:
    """``ValueError`` naming the first runs that the README keeps apart, if any is among ``runs``."""
    found = [(run, why) for run in runs if (why := kept_apart(run)) is not None]
    if found:
        shown = "; ".join(f"{run.run_id} ({run.harness or run.source}, {run.model or 'no model'}: {why})"
                          for run, why in found[:3])  # fmt: skip
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise ValueError(f"{len(found)} run(s) of agents kept apart from every fit: {shown}{more}")
