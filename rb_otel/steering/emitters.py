"""The events of a run, as the steering session sends them: the ``StepEmitter`` interface, and emitters that
combine or adapt others.

Every event a run has is declared on :class:`StepEmitter`, with a default that does nothing, and the session calls
each one directly. What a hook needs arrives in its own arguments (a step's monitor scores with the step, the
run's risk with its end), never in an earlier call it has to remember.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from rb_otel.steering.calls import CallNote, as_observer
from rb_otel.types import StepLogEntry

__all__ = ["FanOutEmitter", "SilentEmitter", "StepEmitter", "as_emitter", "emit"]

_log = logging.getLogger("rb_otel.steering")


@runtime_checkable
class StepEmitter(Protocol):
    """Receives a run's events, in this order: ``run_start``, then per step ``step`` (or ``stopped`` for the step
    at which the steering layer ended the run), then ``run_finish``, and ``close`` when the run's owner is done.

    Called synchronously on the agent's thread, so a hook must not block; an exception it raises is logged and
    dropped (an emitter never breaks the run it records). Subclass it and override the hooks you need: the
    others do nothing. An object that only has the methods (no subclass) still works, adapted by
    :func:`as_emitter`.
    """

    def run_start(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        """The run began (its first step is about to be steered)."""
        return None

    def step(
        self,
        run_id: str,
        entry: StepLogEntry,
        *,
        steering_ms: float | None = None,
        composite: float | None = None,
        monitor_scores: Mapping[str, float] | None = None,
    ) -> None:
        """A step ended: ``entry`` is complete. ``steering_ms`` is the time the steering took, ``composite`` the
        monitors' combined score, ``monitor_scores`` each monitor's score when one fired (else ``None``)."""
        return None

    def stopped(self, run_id: str, entry: StepLogEntry) -> None:
        """The steering layer ended the run at ``entry`` instead of making its model call."""
        return None

    def run_finish(
        self, run_id: str, outcome: str, *, risk: float | None = None, error: BaseException | None = None
    ) -> None:
        """The run ended with ``outcome`` (``success``, ``stopped``, ``failure: ...``); ``risk`` is its run-level
        risk when the scorer has one, ``error`` the exception that ended a failed run when there was one."""
        return None

    def close(self, timeout: float = 5.0) -> None:
        """Drain what the emitter holds, within ``timeout`` seconds."""
        return None

    def outcome(self, run_id: str, outcome: str, *, score: float | None = None, reason: str | None = None) -> None:
        """The run's outcome became known (``success``/``failure``, checked), at any time after it started
        (``SteeringSession.record_outcome``)."""
        return None


class SilentEmitter(StepEmitter):
    """Hears every event and does nothing: a session with no emitter."""


def emit(hook: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    """Call an emitter's ``hook``; what it raises is logged and dropped: an emitter never breaks the run."""
    try:
        hook(*args, **kwargs)
    except Exception:
        owner = type(getattr(hook, "__self__", hook)).__name__
        _log.warning("emitter %s failed in %s; continuing", owner, getattr(hook, "__name__", "?"), exc_info=True)


class _MethodsOnly(StepEmitter):
    """An emitter that has the methods but does not subclass :class:`StepEmitter`: its hooks are bound once, the
    ones it lacks do nothing, and ``step`` and ``run_finish`` are called with what such an emitter was written for
    (no ``monitor_scores``, ``risk`` or ``error``)."""

    def __init__(self, emitter: object) -> None:
        self.wrapped = emitter
        self._run_start = _method(getattr(emitter, "run_start", None))
        self._step = _method(getattr(emitter, "step", None))
        self._stopped = _method(getattr(emitter, "stopped", None))
        self._run_finish = _method(getattr(emitter, "run_finish", None))
        self._close = _method(getattr(emitter, "close", None))

    def run_start(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        if self._run_start is not None:
            self._run_start(run_id, metadata)

    def step(
        self,
        run_id: str,
        entry: StepLogEntry,
        *,
        steering_ms: float | None = None,
        composite: float | None = None,
        monitor_scores: Mapping[str, float] | None = None,
    ) -> None:
        if self._step is not None:
            self._step(run_id, entry, steering_ms=steering_ms, composite=composite)

    def stopped(self, run_id: str, entry: StepLogEntry) -> None:
        if self._stopped is not None:
            self._stopped(run_id, entry)

    def run_finish(
        self, run_id: str, outcome: str, *, risk: float | None = None, error: BaseException | None = None
    ) -> None:
        if self._run_finish is not None:
            self._run_finish(run_id, outcome)

    def close(self, timeout: float = 5.0) -> None:
        if self._close is not None:
            self._close(timeout)


def _method(hook: object) -> Callable[..., None] | None:
    return hook if callable(hook) else None


def as_emitter(emitter: object | None) -> StepEmitter:
    """``emitter`` as a :class:`StepEmitter` whose every hook can be called: itself when it subclasses it, a
    :class:`SilentEmitter` for ``None``, else an adaptation of the methods it has (hooks it lacks do nothing)."""
    if emitter is None:
        return SilentEmitter()
    if StepEmitter in type(emitter).__mro__:
        return emitter  # type: ignore[return-value]
    return _MethodsOnly(emitter)


class FanOutEmitter(StepEmitter):
    """Sends every event to each emitter in order; one failing emitter never stops the others."""

    def __init__(self, emitters: Sequence[object]) -> None:
        self.emitters = [as_emitter(e) for e in emitters]
        # the first that observes remote calls (telemetry) gets them: decided here, not per call
        self._observer = next(filter(None, map(as_observer, emitters)), None)

    def run_start(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        for emitter in self.emitters:
            emit(emitter.run_start, run_id, metadata)

    def step(
        self,
        run_id: str,
        entry: StepLogEntry,
        *,
        steering_ms: float | None = None,
        composite: float | None = None,
        monitor_scores: Mapping[str, float] | None = None,
    ) -> None:
        for emitter in self.emitters:
            emit(
                emitter.step, run_id, entry, steering_ms=steering_ms, composite=composite, monitor_scores=monitor_scores
            )

    def stopped(self, run_id: str, entry: StepLogEntry) -> None:
        for emitter in self.emitters:
            emit(emitter.stopped, run_id, entry)

    def run_finish(
        self, run_id: str, outcome: str, *, risk: float | None = None, error: BaseException | None = None
    ) -> None:
        for emitter in self.emitters:
            emit(emitter.run_finish, run_id, outcome, risk=risk, error=error)

    def close(self, timeout: float = 5.0) -> None:
        for emitter in self.emitters:
            emit(emitter.close, timeout)

    def outcome(self, run_id: str, outcome: str, *, score: float | None = None, reason: str | None = None) -> None:
        for emitter in self.emitters:
            emit(emitter.outcome, run_id, outcome, score=score, reason=reason)

    def remote_call(
        self, operation: str, *, step: int, tier: str | None, server: str
    ) -> AbstractContextManager[CallNote]:
        if self._observer is None:
            return _plain_note()
        return self._observer.remote_call(operation, step=step, tier=tier, server=server)


@contextlib.contextmanager
def _plain_note() -> Iterator[CallNote]:
    yield CallNote()
