"""Per-agent baselines: what a normal run of each agent looks like, learned from its finished runs.

No outcomes are involved. When a run ends the pilot writes a label-free :class:`RunSummary` of it (what it added
up to, the peaks its score sustained, its per-step rates) under its agent's key (:func:`agent_key`); a run that
starts reads its agent's :class:`AgentBaseline`, built from the agent's newest :data:`MAX_RUNS` summaries.

Where the summaries live is a :class:`SummaryStore`: recording is an *append*, never a read-modify-write of the
whole state, so concurrent writers cannot lose each other's runs. :class:`MemorySummaryStore` (one process, the
default) is here; SQLite (several processes on one machine) and Redis (several machines) are in
:mod:`rb_otel.backends.baselines`, opened from a URL there. The pilot reaches its baselines through a
:class:`BaselineSource`: the runtime's :class:`~rb_otel.backends.baselines.cache.BaselineCache` keeps a shared
store off the step's path.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from rb_otel.steering.agent_keys import agent_key, normalise_model

__all__ = [
    "COLUMNS",
    "MAX_AGENTS",
    "MAX_RUNS",
    "MAY_BE_UNKNOWN",
    "RATES",
    "RELATIVE_AFTER",
    "TOTALS",
    "AgentBaseline",
    "AgentInfo",
    "AgentRuns",
    "BaselineSource",
    "MemorySummaryStore",
    "RunSummary",
    "SummaryStore",
    "agent_key",
    "normalise_model",
    "summary_now",
]

_log = logging.getLogger("rb_otel.baselines")

MAX_RUNS = 400  # runs kept per agent for the distributions (the newest)
MAX_AGENTS = 256  # agents kept per store; the least recently recorded are dropped beyond it
#: Runs an agent needs before its SLOW/SKIP thresholds are its own (before: the model's fixed preset).
RELATIVE_AFTER = 20
#: What a run adds up (the pilot's ``overrun_*`` features compare them with the agent's earlier runs).
TOTALS: tuple[str, ...] = ("steps", "chars", "context", "hedges", "errors")
#: The distributions kept: the totals and the peaks a run's score sustained over the FSM's SLOW and SKIP windows.
COLUMNS = (*TOTALS, "peak_slow", "peak_skip")
#: Per-step rates, averaged over the kept runs.
RATES = ("log_cps", "error_rate", "repeat_rate", "hedging", "log_tps")
MAY_BE_UNKNOWN = frozenset({"context"})  # 0 tokens: the harness reports none


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one finished run of an agent added up to: named numbers, no outcome, no content.

    ``values`` holds at least :data:`COLUMNS` and :data:`RATES`; a store keeps every name it is given, so a later
    pilot can read more of them. ``finished_at`` is the wall-clock time the run ended (seconds since the epoch).
    ``run_id`` names the finished run (unique per run): a store records a summary with an id at most once, so a
    write that is retried after a timeout (and had in fact been applied) cannot count the run twice; ``""`` (a
    summary of an older release) is never deduplicated.
    """

    finished_at: float
    values: Mapping[str, float]
    run_id: str = ""

    @property
    def says_nothing(self) -> bool:
        """A run with no steps: it tells nothing of what the agent's runs look like, so no store keeps it."""
        return self.values.get("steps", 0.0) <= 0

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"t": self.finished_at, "v": dict(self.values)}
        if self.run_id:
            data["id"] = self.run_id
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        """The inverse of :meth:`as_dict`; ``ValueError`` for anything else."""
        try:
            values = {str(k): float(v) for k, v in data["v"].items()}
            return cls(float(data["t"]), values, str(data.get("id") or ""))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"not a run summary ({exc})") from None


@dataclass(frozen=True, slots=True)
class AgentRuns:
    """An agent's record in a store: how many runs it ever recorded, and the newest :data:`MAX_RUNS` of them,
    oldest first."""

    runs: int
    recent: tuple[RunSummary, ...]


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """One agent of a store, as ``rb-otel baselines`` lists it."""

    agent: str
    runs: int  # every run ever recorded under the key
    kept: int  # the newest ones the distributions use (at most MAX_RUNS)
    newest: float | None  # when the newest run finished (epoch seconds)

    @property
    def relative(self) -> bool:
        """Past the first :data:`RELATIVE_AFTER` runs: its SLOW/SKIP thresholds are its own."""
        return self.kept >= RELATIVE_AFTER

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "runs": self.runs,
            "kept": self.kept,
            "newest": self.newest,
            "relative_thresholds": self.relative,
        }


class AgentBaseline:
    """What a normal run of one agent looks like: the sorted values of each of :data:`COLUMNS` over its newest
    :data:`MAX_RUNS` runs (for their empirical distribution) and the mean of each of :data:`RATES`.

    Immutable: a run reads the baseline once when it starts, and :meth:`plus` makes the next one.
    ``AgentBaseline(runs, recent)`` is the plain definition; :meth:`plus` is its incremental form (the same
    result, tested against it).
    """

    __slots__ = ("_recent", "_sorted", "error_rate", "hedging", "log_cps", "log_tps", "repeat_rate", "runs")

    def __init__(self, runs: int = 0, recent: Sequence[RunSummary] = ()) -> None:
        kept = tuple(s for s in recent if not s.says_nothing)[-MAX_RUNS:]
        self.runs = max(int(runs), len(kept))
        self._recent = kept
        self._sorted = {name: sorted(s.values.get(name, 0.0) for s in kept) for name in COLUMNS}
        self._set_rates()

    def _set_rates(self) -> None:
        for name in RATES:  # over the runs that report it (a summary from an older release may not)
            known = [s.values[name] for s in self._recent if name in s.values]
            setattr(self, name, math.fsum(known) / len(known) if known else 0.0)

    def plus(self, summary: RunSummary) -> AgentBaseline:
        """This baseline with ``summary`` added (the oldest kept run dropped beyond :data:`MAX_RUNS`).
        A run with no steps says nothing and leaves the baseline as it is."""
        if summary.says_nothing:
            return self
        new = AgentBaseline.__new__(AgentBaseline)
        new.runs = self.runs + 1
        recent = (*self._recent, summary)
        dropped = recent[0] if len(recent) > MAX_RUNS else None
        new._recent = recent[1:] if dropped is not None else recent
        new._sorted = {}
        for name in COLUMNS:
            column = list(self._sorted[name])
            insort(column, summary.values.get(name, 0.0))
            if dropped is not None:
                del column[bisect_left(column, dropped.values.get(name, 0.0))]
            new._sorted[name] = column
        new._set_rates()
        return new

    @property
    def known(self) -> int:
        """How many runs the distributions hold."""
        return len(self._recent)

    @property
    def recent(self) -> tuple[RunSummary, ...]:
        """The kept runs, oldest first."""
        return self._recent

    def share_below(self, name: str, value: float) -> float | None:
        """The share of known runs whose ``name`` was below ``value`` (runs with 0, unknown, left out);
        ``None`` when no run knows it."""
        column = self._sorted[name]
        unknown = bisect_left(column, 1e-12) if name in MAY_BE_UNKNOWN else 0
        known = len(column) - unknown
        if known <= 0:
            return None
        return max(bisect_left(column, value) - unknown, 0) / known

    def quantile(self, name: str, q: float) -> float | None:
        """The ``q`` quantile of ``name`` over the known runs (``None`` before any run)."""
        column = self._sorted[name]
        if not column:
            return None
        return column[min(int(q * len(column)), len(column) - 1)]

    def same_as(self, other: AgentBaseline) -> bool:
        """The same runs count, kept runs, distributions and rates (what a store must give back)."""
        return (
            self.runs == other.runs
            and self._recent == other._recent
            and self._sorted == other._sorted
            and all(getattr(self, r) == getattr(other, r) for r in RATES)
        )

    def __repr__(self) -> str:
        return f"AgentBaseline(runs={self.runs}, known={self.known})"


EMPTY_BASELINE = AgentBaseline()


@runtime_checkable
class SummaryStore(Protocol):
    """Where finished runs' summaries are kept, by agent key. Implementations are thread-safe.

    ``append`` adds runs (one transaction where the store has them; a run with no steps is ignored) and keeps
    each agent bounded to its newest :data:`MAX_RUNS` and the store to :data:`MAX_AGENTS` agents (the least
    recently recorded dropped); ``recent`` reads one agent within ``timeout`` seconds. Any call raises
    :class:`~rb_otel.backends.baselines.errors.StoreUnavailable` when the store cannot answer.
    """

    url: str  # for messages and logs, the password elided

    def append(self, runs: Sequence[tuple[str, RunSummary]]) -> None: ...

    def recent(self, agent: str, *, timeout: float | None = None) -> AgentRuns: ...

    def agents(self) -> list[AgentInfo]: ...

    def forget(self, agent: str) -> bool: ...

    def close(self) -> None: ...


@runtime_checkable
class BaselineSource(Protocol):
    """Where a run reads its agent's baseline when it starts, and hands its summary over when it ends (the
    pilot's only contact with the fleet). Neither call blocks for long or raises: a source that cannot reach its
    store answers with what it has."""

    def get(self, agent: str) -> AgentBaseline: ...

    def record(self, agent: str, summary: RunSummary) -> None: ...


class MemorySummaryStore:
    """The in-process store (the default): nothing survives the process, nothing is shared with another.

    It keeps each agent's :class:`AgentBaseline` itself, updated incrementally, so reading one costs a dict
    lookup (``baseline``).
    """

    url = "memory://"

    def __init__(self, *, max_agents: int = MAX_AGENTS) -> None:
        self.max_agents = max_agents
        self._agents: OrderedDict[str, AgentBaseline] = OrderedDict()
        self._lock = threading.Lock()

    def baseline(self, agent: str) -> AgentBaseline:
        """The agent's current baseline (an empty one for an agent with no runs)."""
        found = self._agents.get(agent)
        return EMPTY_BASELINE if found is None else found

    def append(self, runs: Sequence[tuple[str, RunSummary]]) -> None:
        with self._lock:
            for agent, summary in runs:
                if summary.says_nothing:
                    continue
                old = self._agents.get(agent, EMPTY_BASELINE)
                self._agents[agent] = old.plus(summary)
                self._agents.move_to_end(agent)
            while len(self._agents) > self.max_agents:
                self._agents.popitem(last=False)

    def recent(self, agent: str, *, timeout: float | None = None) -> AgentRuns:
        baseline = self.baseline(agent)
        return AgentRuns(baseline.runs, baseline.recent)

    def agents(self) -> list[AgentInfo]:
        with self._lock:
            items = list(self._agents.items())
        return [AgentInfo(agent, b.runs, b.known, b.recent[-1].finished_at if b.recent else None) for agent, b in items]

    def forget(self, agent: str) -> bool:
        with self._lock:
            return self._agents.pop(agent, None) is not None

    def close(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._agents)


def summary_now(values: Mapping[str, float]) -> RunSummary:
    """A summary of a run finishing now."""
    return RunSummary(time.time(), dict(values))
