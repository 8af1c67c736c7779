"""Combining emitters: one run's events to several sinks (OpenTelemetry and, optionally, rb-api)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from rb_otel.steering.calls import CallNote, as_observer
from rb_otel.types import StepLogEntry

__all__ = ["FanOutEmitter", "StepEmitter", "notify"]

_log = logging.getLogger("rb_otel.steering")


@runtime_checkable
class StepEmitter(Protocol):
    """Receives a run's events. Called synchronously on the agent's thread, so it must not block or throw
    (the session logs and drops any exception it raises). An emitter may also have ``run_risk(run_id, risk)``,
    called with the run-level risk just before ``run_finish``, and ``monitor_scores(run_id, step, scores)``, called
    with a step's monitor scores just before its ``step`` when a monitor fired."""

    def run_start(self, run_id: str, metadata: Mapping[str, Any]) -> None: ...

    def step(
        self,
        run_id: str,
        entry: StepLogEntry,
        *,
        steering_ms: float | None = None,
        composite: float | None = None,
    ) -> None: ...

    def run_finish(self, run_id: str, outcome: str) -> None: ...

    def close(self, timeout: float = 5.0) -> None: ...


def notify(emitter: object, method: str, *args: Any, **kwargs: Any) -> None:
    """Call ``emitter.<method>(*args, **kwargs)`` when the emitter has that method (``None`` has none); what it
    raises is logged and dropped: an emitter never breaks the run it records."""
    hook = getattr(emitter, method, None)
    if hook is None:
        return
    try:
        hook(*args, **kwargs)
    except Exception:
        _log.warning("emitter %s failed in %s; continuing", type(emitter).__name__, method, exc_info=True)


class FanOutEmitter:
    """Sends every event to each emitter in order; one failing emitter never stops the others."""

    def __init__(self, emitters: Sequence[StepEmitter]) -> None:
        self.emitters = list(emitters)

    def _each(self, method: str, *args: Any, **kwargs: Any) -> None:
        for emitter in self.emitters:
            notify(emitter, method, *args, **kwargs)

    def run_start(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        self._each("run_start", run_id, metadata)

    def step(
        self, run_id: str, entry: StepLogEntry, *, steering_ms: float | None = None, composite: float | None = None
    ) -> None:
        self._each("step", run_id, entry, steering_ms=steering_ms, composite=composite)

    def run_risk(self, run_id: str, risk: float) -> None:
        """Optional on emitters: the run's risk, reported just before ``run_finish``."""
        self._each("run_risk", run_id, risk)

    def monitor_scores(self, run_id: str, step: int, scores: Mapping[str, float]) -> None:
        """Optional on emitters: a step's monitor scores, reported just before its ``step``."""
        self._each("monitor_scores", run_id, step, scores)

    def stopped(self, run_id: str, entry: StepLogEntry) -> None:
        """Optional on emitters: the step at which the steering layer stopped the run."""
        self._each("stopped", run_id, entry)

    def run_finish(self, run_id: str, outcome: str) -> None:
        self._each("run_finish", run_id, outcome)

    def close(self, timeout: float = 5.0) -> None:
        self._each("close", timeout)

    def remote_call(
        self, operation: str, *, step: int, tier: str | None, server: str
    ) -> AbstractContextManager[CallNote]:
        for emitter in self.emitters:
            observer = as_observer(emitter)
            if observer is not None:
                return observer.remote_call(operation, step=step, tier=tier, server=server)
        return _plain_note()


@contextlib.contextmanager
def _plain_note() -> Iterator[CallNote]:
    yield CallNote()
