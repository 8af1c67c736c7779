"""The runs of the OpenAI Agents SDK adapters of one ``ReasonBlocks``, keyed by the SDK's trace of each run.

``Runner.run`` makes one SDK trace current for the whole run (a no-op trace when SDK tracing is off), visible in
the hooks and in ``Model.get_response`` alike, even in the tasks the runner starts: so the hooks (which see the
run start and end) and the steered model (which sees each call) find the same rb-otel run without any shared
argument. Several runs grouped under one caller-made ``trace(...)`` are one rb-otel run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rb_otel.integrations.live_calls import LiveCall
from rb_otel.integrations.steered_runs import RunFactory, SteeredRun
from rb_otel.steering.pilot.kinds import tool_names
from rb_otel.telemetry import ToolInvocation
from rb_otel.types import RunFields

__all__ = ["AgentRun", "OpenAIRuns"]

_log = logging.getLogger("rb_otel.integrations.openai_agents")
#: Runs kept at most; the oldest is ended as abandoned beyond it (runs nobody ended: a model without hooks
#: whose runner raised between two calls).
_MAX_RUNS = 1024


@dataclass(eq=False)
class AgentRun:
    """One ``Runner.run``: its steered run, the model call in flight, the tools in flight, the token total."""

    run: SteeredRun
    trace: object  # held so its id (the key) stays its own
    owner: str  # "hooks" or "model": who ends it
    llm: LiveCall | None = None
    tools: dict[str, ToolInvocation] = field(default_factory=dict)
    tokens: int = 0


class OpenAIRuns:
    """Open runs by SDK trace; thread-safe."""

    def __init__(self, factory: RunFactory) -> None:
        self.factory = factory
        self._runs: dict[int, AgentRun] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _trace() -> object | None:
        from agents.tracing import get_current_trace

        return get_current_trace()

    def current(self) -> AgentRun | None:
        """The run of the SDK trace current here, if one is open."""
        trace = self._trace()
        return None if trace is None else self._runs.get(id(trace))

    def open(
        self,
        fields: RunFields,
        *,
        metadata: Mapping[str, Any],
        steer: bool,
        owner: str,
        tools: Iterable[Any] | None = None,
    ) -> AgentRun:
        """The current trace's run, opened (and its span started) if it has none yet; ``tools`` (the agent's
        ``Tool`` objects) say its kind of agent."""
        trace = self._trace()
        key = id(trace) if trace is not None else None
        with self._lock:
            existing = self._runs.get(key) if key is not None else None
            if existing is not None:
                return existing
            names = tool_names(tools) if tools is not None else None
            steered = self.factory.open(fields, metadata=metadata, steer=steer, tools=names)
            run = AgentRun(steered, trace, owner)
            if key is not None:
                self._runs[key] = run
                stale = list(self._runs.values())[: max(len(self._runs) - _MAX_RUNS, 0)]
            else:
                stale = []
        for old in stale:
            self.finish(old, "failure: abandoned")
        steered.session.start()
        return run

    def finish(self, run: AgentRun, outcome: str, *, error: BaseException | None = None) -> None:
        """End ``run`` (once): its open tool spans, its span with ``outcome``."""
        with self._lock:
            if self._runs.get(id(run.trace)) is run:
                del self._runs[id(run.trace)]
        try:
            for tool in run.tools.values():
                tool.interrupt()
            run.tools.clear()
            run.run.session.finish(outcome_status=outcome, error=error)
        except Exception:
            _log.warning("finishing the run failed", exc_info=True)

    def open_runs(self) -> list[AgentRun]:
        with self._lock:
            return list(self._runs.values())
