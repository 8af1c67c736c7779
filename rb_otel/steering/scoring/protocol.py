"""The scorer protocol: the step a scorer sees, and the shapes of a scorer and of its per-run state.

Its own module so that scorers (the pilot, user scorers) depend on the protocol, never on the registry that
resolves names to scorers (``scorers.resolve_scorer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["KindAwareScorer", "RunScorer", "Scorer", "ScorerStep"]


@dataclass(frozen=True, slots=True)
class ScorerStep:
    """One step as a scorer sees it.

    ``thought`` includes reasoning/thinking content and reasoning written into a ``think`` tool's arguments;
    ``action``/``action_input`` are the first acting tool call (``None`` for a text-only turn); ``observation``
    is what the agent saw next (tool result, or the user's reply); ``error`` is true when that result was an
    error (a tool error status, a non-zero exit code, a harness format error); ``tokens`` the call's tokens.
    """

    thought: str
    action: str | None = None
    action_input: str | None = None
    observation: str | None = None
    error: bool = False
    tokens: int = 0


class RunScorer(Protocol):
    """The scorer of one run: sees each step once, in order.

    It may also say ``name`` (a str: this run's ``rb.scorer``) and ``labels`` (an int: ``rb.scorer.labels``, the
    labelled runs of its agent its model was fitted on); where it does, they name the run instead of its scorer's
    (the pilot's run carries the learned model it was started with)."""

    def score(self, step: ScorerStep) -> float:
        """The difficulty (or risk) after ``step``, in [0, 1], from this step and the earlier ones only."""
        ...

    def risk(self) -> float | None:
        """The run-level risk so far (``None`` before any step)."""
        ...

    def finish(self) -> None:
        """The run ended; called at most once."""
        ...


@runtime_checkable
class Scorer(Protocol):
    """Shared by every run; ``name`` goes on spans as ``rb.scorer``."""

    name: str

    def start_run(self, agent: str = "", task_id: str = "") -> RunScorer: ...


@runtime_checkable
class KindAwareScorer(Scorer, Protocol):
    """A scorer whose model depends on the kind of agent a run is (``"coding"``, ``"customer_service"``, ``""``
    not known): the pilot with no model given. ``chooses_by_kind`` says whether it does so now; integrations then
    start each run with its kind, and ``rb.scorer`` is :meth:`name_for` the kind and the run's agent key (the pilot
    names an agent's learned model)."""

    chooses_by_kind: bool

    def start_run(self, agent: str = "", task_id: str = "", kind: str = "") -> RunScorer: ...

    def name_for(self, kind: str = "", agent: str = "") -> str: ...
