"""Per-agent baselines: what a normal run of each agent looks like, learned online from its finished runs.

No outcomes are involved: a baseline holds the distribution of what runs add up to (:data:`TOTALS`) and the
peaks their scores sustained, and running means of per-step rates. The pilot scores a run against its agent's
baseline (:mod:`rb_otel.steering.pilot`); :class:`BaselineStore` keeps them bounded and, optionally, on disk.
"""

from __future__ import annotations

import json
import os
import threading
from bisect import bisect_left, insort
from collections import OrderedDict, deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "MAX_RUNS", "MAY_BE_UNKNOWN", "RATES", "TOTALS", "AgentBaseline", "BaselineStore"]

#: The persisted file's format.
FORMAT = "rb-otel baselines/1"
MAX_RUNS = 400  # runs kept per agent for the distributions (the newest)
#: What a run adds up (the pilot's ``overrun_*`` features compare them with the agent's earlier runs).
TOTALS: tuple[str, ...] = ("steps", "chars", "context", "hedges", "errors")
#: The distributions kept: the totals and the peaks a run's score sustained over the FSM's SLOW and SKIP windows.
COLUMNS = (*TOTALS, "peak_slow", "peak_skip")
#: Per-step rates kept as running means.
RATES = ("log_cps", "error_rate", "repeat_rate", "hedging")
MAY_BE_UNKNOWN = frozenset({"context"})  # 0 tokens: the harness reports none


class AgentBaseline:
    """What a normal run of one agent looks like, from its finished runs (no outcomes needed).

    For each of :data:`TOTALS` (a run's steps, characters written, largest call in tokens, hedging words and
    errors) and the peaks it sustained over the FSM windows, the values of the newest :data:`MAX_RUNS` runs are
    kept sorted, for their empirical distribution; per-step rates as running means. Not thread-safe by itself:
    :class:`BaselineStore` guards it.
    """

    __slots__ = ("_order", "_sorted", "error_rate", "hedging", "log_cps", "repeat_rate", "runs")

    def __init__(self) -> None:
        self.runs = 0
        self._sorted: dict[str, list[float]] = {name: [] for name in COLUMNS}
        self._order: deque[tuple[float, ...]] = deque()
        self.log_cps = 0.0
        self.error_rate = 0.0
        self.repeat_rate = 0.0
        self.hedging = 0.0

    def add(self, totals: Mapping[str, float], rates: Mapping[str, float]) -> None:
        """Fold one finished run in: ``totals`` keyed by :data:`COLUMNS`, ``rates`` by ``log_cps``,
        ``error_rate``, ``repeat_rate``, ``hedging``. A run with no steps says nothing and is ignored."""
        if totals["steps"] <= 0:
            return
        self.runs += 1
        self._insert(tuple(float(totals[name]) for name in COLUMNS))
        if len(self._order) > MAX_RUNS:
            oldest = self._order.popleft()
            for name, value in zip(COLUMNS, oldest, strict=True):
                column = self._sorted[name]
                del column[bisect_left(column, value)]
        weight = 1.0 / min(self.runs, MAX_RUNS)
        for name in RATES:
            value = getattr(self, name)
            setattr(self, name, value + (rates[name] - value) * weight)

    def _insert(self, run: tuple[float, ...]) -> None:
        self._order.append(run)
        for name, value in zip(COLUMNS, run, strict=True):
            insort(self._sorted[name], value)

    @property
    def known(self) -> int:
        """How many runs the distributions hold."""
        return len(self._order)

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

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "columns": list(COLUMNS),
            "recent": [list(x) for x in self._order],
            **{name: getattr(self, name) for name in RATES},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentBaseline:
        if list(data["columns"]) != list(COLUMNS):
            raise ValueError(f"columns {data['columns']} are not this version's {list(COLUMNS)}")
        baseline = cls()
        baseline.runs = int(data["runs"])
        for run in data["recent"][-MAX_RUNS:]:
            baseline._insert(tuple(float(v) for v in run))
        for name in RATES:
            setattr(baseline, name, float(data[name]))
        return baseline


class BaselineStore:
    """Baselines by agent key, the least recently used dropped beyond ``max_agents``; optionally persisted.

    ``path``: a JSON file read at construction (when it exists) and rewritten atomically every ``save_every``
    finished runs and by :meth:`save`. The key is ``agent`` (name and model); label-free, so nothing about
    outcomes is ever stored.
    """

    def __init__(self, path: str | Path | None = None, *, max_agents: int = 256, save_every: int = 1) -> None:
        self.path = None if path is None else Path(path)
        self.max_agents = max_agents
        self.save_every = max(int(save_every), 1)
        self._agents: OrderedDict[str, AgentBaseline] = OrderedDict()
        self._lock = threading.Lock()
        self._unsaved = 0
        if self.path is not None and self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                for key, value in data["agents"].items():
                    self._agents[str(key)] = AgentBaseline.from_dict(value)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{self.path}: not a pilot baseline file ({exc})") from None

    def __len__(self) -> int:
        return len(self._agents)

    def get(self, agent: str) -> AgentBaseline:
        with self._lock:
            baseline = self._agents.get(agent)
            if baseline is None:
                baseline = self._agents[agent] = AgentBaseline()
                while len(self._agents) > self.max_agents:
                    self._agents.popitem(last=False)
            else:
                self._agents.move_to_end(agent)
            return baseline

    def add(self, baseline: AgentBaseline, totals: Mapping[str, float], rates: Mapping[str, float]) -> None:
        with self._lock:
            baseline.add(totals, rates)
            self._unsaved += 1
            due = self.path is not None and self._unsaved >= self.save_every
        if due:
            self.save()

    def save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            data = {"version": FORMAT, "agents": {k: v.as_dict() for k, v in self._agents.items()}}
            self._unsaved = 0
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.path)
