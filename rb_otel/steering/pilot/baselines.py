"""Per-agent baselines: what a normal run of each agent looks like, learned from its finished runs.

No outcomes are involved. When a run ends the pilot writes a label-free :class:`RunSummary` of it (what it added
up to, the peaks its score sustained, its per-step rates) under its agent's key (:func:`agent_key`); a run that
starts reads its agent's :class:`AgentBaseline`, built from the agent's newest :data:`MAX_RUNS` summaries.

**Task groups weigh the same.** A summary may carry the key of its run's request (``request``: the task id the
run was given, else its first user turn normalised, as a number: :func:`~rb_otel.steering.agent_keys.request_code`).
An agent's distributions then weigh each request alike (each run ``1 / runs of its request``), so an agent that ran
four tasks two hundred times has a normal of its tasks, not of those four; a run compares itself with its own
request's earlier runs as they accumulate (:class:`RequestBaseline`). Runs without a request weigh one each.

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
from bisect import bisect_left, bisect_right
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
    "REQUEST",
    "REQUEST_WEIGHT",
    "TOTALS",
    "AgentBaseline",
    "AgentInfo",
    "AgentRuns",
    "BaselineSource",
    "MemorySummaryStore",
    "RequestBaseline",
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
#: The summary value holding the run's request key (module docstring; absent: no request known).
REQUEST = "request"
#: How many of its request's own earlier runs weigh as much as the agent's whole normal (:class:`RequestBaseline`).
REQUEST_WEIGHT = 3.0


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
    """What a normal run of one agent looks like: the distribution of each of :data:`COLUMNS` over its newest
    :data:`MAX_RUNS` runs and the mean of each of :data:`RATES`, each run weighing ``1 / runs of its request``
    (module docstring; one each when no run names a request, the plain empirical distribution).

    Immutable: a run reads the baseline once when it starts, and :meth:`plus` makes the next one.
    ``AgentBaseline(runs, recent)`` is the definition; :meth:`plus` is the same with one more run.
    """

    __slots__ = (
        "_by_request",
        "_cumulative",
        "_recent",
        "_sorted",
        "error_rate",
        "hedging",
        "log_cps",
        "log_tps",
        "repeat_rate",
        "runs",
    )

    def __init__(self, runs: int = 0, recent: Sequence[RunSummary] = ()) -> None:
        kept = tuple(s for s in recent if not s.says_nothing)[-MAX_RUNS:]
        self.runs = max(int(runs), len(kept))
        self._recent = kept
        self._by_request: dict[float, AgentBaseline] = {}
        per_request: dict[float, int] = {}
        for summary in kept:
            if (code := summary.values.get(REQUEST)) is not None:
                per_request[code] = per_request.get(code, 0) + 1
        weights = [1.0 if (code := s.values.get(REQUEST)) is None else 1.0 / per_request[code] for s in kept]
        self._sorted: dict[str, list[float]] = {}
        self._cumulative: dict[str, list[float]] = {}
        for name in COLUMNS:
            pairs = sorted(zip((s.values.get(name, 0.0) for s in kept), weights, strict=True))
            self._sorted[name] = [v for v, _ in pairs]
            cumulative = [0.0]
            for _, w in pairs:
                cumulative.append(cumulative[-1] + w)
            self._cumulative[name] = cumulative
        for name in RATES:  # over the runs that report it (a summary from an older release may not)
            known = [(s.values[name], w) for s, w in zip(kept, weights, strict=True) if name in s.values]
            total = math.fsum(w for _, w in known)
            setattr(self, name, math.fsum(v * w for v, w in known) / total if known else 0.0)

    def plus(self, summary: RunSummary) -> AgentBaseline:
        """This baseline with ``summary`` added (the oldest kept run dropped beyond :data:`MAX_RUNS`).
        A run with no steps says nothing and leaves the baseline as it is."""
        if summary.says_nothing:
            return self
        return AgentBaseline(self.runs + 1, (*self._recent, summary))

    @property
    def known(self) -> int:
        """How many runs the distributions hold."""
        return len(self._recent)

    @property
    def recent(self) -> tuple[RunSummary, ...]:
        """The kept runs, oldest first."""
        return self._recent

    def share_below(self, name: str, value: float) -> float | None:
        """The weighted share of known runs whose ``name`` was below ``value`` (runs with 0, unknown, left out);
        ``None`` when no run knows it."""
        column, cumulative = self._sorted[name], self._cumulative[name]
        unknown = bisect_left(column, 1e-12) if name in MAY_BE_UNKNOWN else 0
        total = cumulative[-1] - cumulative[unknown]
        if len(column) - unknown <= 0 or total <= 0:
            return None
        return max(cumulative[max(bisect_left(column, value), unknown)] - cumulative[unknown], 0.0) / total

    def quantile(self, name: str, q: float) -> float | None:
        """The weighted ``q`` quantile of ``name`` over the known runs (``None`` before any run)."""
        column, cumulative = self._sorted[name], self._cumulative[name]
        if not column:
            return None
        return column[min(max(bisect_right(cumulative, q * cumulative[-1]) - 1, 0), len(column) - 1)]

    def rate(self, name: str) -> float:
        """The mean of one of :data:`RATES`."""
        return float(getattr(self, name))

    def for_request(self, code: float) -> AgentBaseline:
        """The baseline of this agent's kept runs of one request (``code``: the summaries' :data:`REQUEST`)."""
        found = self._by_request.get(code)
        if found is None:
            found = AgentBaseline(0, tuple(s for s in self._recent if s.values.get(REQUEST) == code))
            self._by_request[code] = found
        return found

    def same_as(self, other: AgentBaseline) -> bool:
        """The same runs count, kept runs, distributions and rates (what a store must give back)."""
        return (
            self.runs == other.runs
            and self._recent == other._recent
            and self._sorted == other._sorted
            and self._cumulative == other._cumulative
            and all(getattr(self, r) == getattr(other, r) for r in RATES)
        )

    def __repr__(self) -> str:
        return f"AgentBaseline(runs={self.runs}, known={self.known})"


class RequestBaseline:
    """The normal a run of one request is compared with: its agent's (:class:`AgentBaseline`, requests weighing
    alike) blended with that request's own earlier runs of the agent, which weigh ``n / (n + REQUEST_WEIGHT)``
    after ``n`` of them. Within one task, a run that is longer than that task's runs usually are is what
    predicts failure; across tasks, length mostly says which task it is (issue 60: grok-3)."""

    __slots__ = ("_agent", "_own", "_w", "known")

    def __init__(self, agent: AgentBaseline, own: AgentBaseline) -> None:
        self._agent = agent
        self._own = own
        self._w = own.known / (own.known + REQUEST_WEIGHT)
        self.known = agent.known

    def share_below(self, name: str, value: float) -> float | None:
        mine, theirs = self._own.share_below(name, value), self._agent.share_below(name, value)
        if mine is None or theirs is None:
            return theirs
        return self._w * mine + (1.0 - self._w) * theirs

    def quantile(self, name: str, q: float) -> float | None:
        mine, theirs = self._own.quantile(name, q), self._agent.quantile(name, q)
        if mine is None or theirs is None:
            return theirs
        return self._w * mine + (1.0 - self._w) * theirs

    def rate(self, name: str) -> float:
        """The blended mean of one of :data:`RATES`."""
        theirs = float(getattr(self._agent, name))
        if not self._own.known:
            return theirs
        return self._w * float(getattr(self._own, name)) + (1.0 - self._w) * theirs


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
