"""The seam through which remote steering calls become visible in telemetry, without the core importing it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Protocol, cast, runtime_checkable

__all__ = ["OP_ETRACES_RETRIEVE", "OP_MONITORS_EVALUATE", "CallNote", "RemoteCallObserver", "as_observer", "observe"]

OP_MONITORS_EVALUATE = "monitors.evaluate"
OP_ETRACES_RETRIEVE = "etraces.retrieve"


class CallNote:
    """Filled in by the caller while the call runs: how many patterns came back, or the error kind."""

    __slots__ = ("count", "error")

    def __init__(self) -> None:
        self.count: int | None = None
        self.error: str | None = None


@runtime_checkable
class RemoteCallObserver(Protocol):
    """Implemented by telemetry (one span per remote call). Must not raise."""

    def remote_call(
        self, operation: str, *, step: int, tier: str | None, server: str
    ) -> AbstractContextManager[CallNote]: ...


def as_observer(value: object) -> RemoteCallObserver | None:
    """``value`` when it implements :class:`RemoteCallObserver`, else ``None``.

    The same test ``isinstance(value, RemoteCallObserver)`` makes (the method is there), without the ~10 us a
    runtime-checkable Protocol check costs: sessions are made per run and this runs each time.
    """
    return cast(RemoteCallObserver, value) if callable(getattr(value, "remote_call", None)) else None


@contextlib.contextmanager
def observe(
    observer: RemoteCallObserver | None, operation: str, *, step: int, tier: str | None, server: str
) -> Iterator[CallNote]:
    """``observer.remote_call(...)`` when there is an observer, else a plain note."""
    if observer is None:
        yield CallNote()
        return
    with observer.remote_call(operation, step=step, tier=tier, server=server) as note:
        yield note
