"""Per-run state of the middleware: one ``AgentRun`` per agent invocation, in a bounded, TTL-swept registry."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rb_otel.integrations.steered_runs import SteeredRun
from rb_otel.types import StepLogEntry

__all__ = ["AgentRun", "RunRegistry"]


@dataclass(slots=True)
class AgentRun(SteeredRun):
    """One invocation: its steering session, its telemetry and how it is being closed."""

    key: str = ""
    in_context_manager: bool = False
    completed: bool = False  # the graph returned cleanly inside `with mw:` (finished by __exit__)
    last_timestamp: float | None = None
    hints: list[str] = field(default_factory=list)  # companion middleware's hints for the next model call
    touched: float = field(default_factory=time.monotonic)
    run_id_in_state: bool = False  # the stateful middleware wrote rb_run_id (once per run: it does not change)
    #: A step whose model call failed, kept open for another attempt in the same model node (a retry or a
    #: fallback middleware calls the handler again): ``(the call, its model node's run, the model it was given)``.
    failed: tuple[Any, uuid.UUID | None, Any] | None = None

    @property
    def step_log(self) -> list[StepLogEntry]:
        return self.session.step_log

    def take_hints(self) -> list[str]:
        """The hints waiting for the next model call, handed over once."""
        hints, self.hints = self.hints, []
        return hints


class RunRegistry:
    """Runs by key. Finished runs move to a bounded history of step logs (``history`` newest runs).

    ``sweep`` closes runs untouched for ``ttl`` seconds (a safety net for runs no hook or callback closed).
    """

    def __init__(self, *, ttl: float = 3600.0, history: int = 256) -> None:
        self.ttl = ttl
        self._history_size = history
        self._active: dict[str, AgentRun] = {}
        self._history: OrderedDict[str, list[StepLogEntry]] = OrderedDict()
        self._latest: AgentRun | None = None
        self._lock = threading.Lock()
        self._last_sweep = time.monotonic()

    def __len__(self) -> int:
        return len(self._active)

    @property
    def latest(self) -> AgentRun | None:
        """The most recently started run."""
        return self._latest

    def add(self, run: AgentRun) -> None:
        with self._lock:
            self._active[run.key] = run
            self._latest = run

    def get(self, key: str | None) -> AgentRun | None:
        if key is None:
            return None
        run = self._active.get(key)
        if run is not None:
            run.touched = time.monotonic()
        return run

    def active(self) -> list[AgentRun]:
        with self._lock:
            return list(self._active.values())

    def retire(self, run: AgentRun) -> None:
        """Forget a finished run, keeping its step log in the bounded history."""
        with self._lock:
            if self._active.get(run.key) is run:
                del self._active[run.key]
            self._history[run.key] = run.step_log
            self._history.move_to_end(run.key)
            while len(self._history) > self._history_size:
                self._history.popitem(last=False)

    def step_log(self, key: str) -> list[StepLogEntry] | None:
        run = self._active.get(key)
        if run is not None:
            return run.step_log
        return self._history.get(key)

    def sweep(self, expire: Callable[[AgentRun], None], *, now: float | None = None, every: float = 30.0) -> int:
        """Call ``expire`` on runs idle longer than ``ttl``; runs at most once per ``every`` seconds."""
        now = time.monotonic() if now is None else now
        if now - self._last_sweep < every:
            return 0
        self._last_sweep = now
        with self._lock:
            stale = [r for r in self._active.values() if now - r.touched > self.ttl]
        for run in stale:
            expire(run)
        return len(stale)
