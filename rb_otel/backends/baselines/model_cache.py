"""``ModelCache``: a worker's view of the learned models in a store, kept fresh by a background thread.

The pilot asks for an agent's model when a run starts (:meth:`ModelCache.get`), never on a step. The answer is
this process's snapshot; a snapshot older than ``refresh_s`` (30 s: a new model reaches every worker within a
minute) is re-read by a daemon thread, and the run uses what is there meanwhile. An agent the process has not
asked about yet is read by that thread while the run start waits at most ``start_timeout`` (200 ms, as for
baselines); after it the run starts with the default pilot, the next run has the answer, and no run start waits
on that read again until it ends (a read that hangs costs one run start, as for baselines). A store that fails
changes nothing: the snapshot stays as it was (no model: the default pilot), the thread retries with a backoff
(0.25 s doubling to 30 s), and no run start waits on it until it answers again. Reading and parsing a model happen
on the thread, so the worker's step path and its run starts never do either.

Listeners (:meth:`ModelCache.add_listener`) are told of each new record the thread reads, once per record and
process (the facade counts them as ``rb.models.loaded``: the backends never import OpenTelemetry).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from rb_otel.backends.baselines.models import ModelStore, StoredModel

__all__ = ["REFRESH_S", "ModelCache"]

_log = logging.getLogger("rb_otel.baselines")

#: How old an agent's snapshot may get before the thread re-reads it (seconds).
REFRESH_S = 30.0
_READ_TIMEOUT = 2.0  # one background read
_BACKOFF = (0.25, 30.0)


class ModelCache:
    """Each agent's learned model (a :class:`StoredModel`, or ``None``: it has none), from ``store``."""

    def __init__(
        self, store: ModelStore, *, refresh_s: float = REFRESH_S, start_timeout: float = 0.2, warn: bool = True
    ) -> None:
        """``warn=False``: the store's outages and recoveries are logged at debug only, for a cache whose store a
        :class:`~rb_otel.backends.baselines.cache.BaselineCache` shares and announces already (one failure of
        one store, one warning)."""
        if not refresh_s > 0 or not start_timeout >= 0:
            raise ValueError("refresh_s must be positive and start_timeout not negative")
        self.store = store
        self.refresh_s = float(refresh_s)
        self.start_timeout = float(start_timeout)
        self._announce = logging.WARNING if warn else logging.DEBUG
        self.errors = 0  # failed reads, this process
        self._snapshot: dict[str, tuple[StoredModel | None, float]] = {}
        self._wanted: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._down = False
        self._outwaited = False  # a run start gave up on the thread's read: none waits until the read ends
        self._closed = False
        self._worker: threading.Thread | None = None
        self._pid = os.getpid()
        self._listeners: list[Callable[[StoredModel], None]] = []

    def add_listener(self, listener: Callable[[StoredModel], None]) -> None:
        """Tell ``listener(record)`` of each new model record read (an agent's first, or one fitted again), on the
        cache's thread, once per record; a listener that raises is logged and changes nothing."""
        with self._lock:
            self._listeners.append(listener)

    def get(self, agent: str) -> StoredModel | None:
        """``agent``'s model for a run starting now; never raises, never reads the store on this thread."""
        with self._lock:
            found = self._snapshot.get(agent)
            if found is not None:
                if time.monotonic() - found[1] >= self.refresh_s:
                    self._want(agent)
                return found[0]
            self._want(agent)
            if self._down or self._outwaited or self.start_timeout <= 0:
                return None
            deadline = time.monotonic() + self.start_timeout
            while agent not in self._snapshot and not self._down:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._outwaited = True  # a read that hangs costs one run start, not one per new agent
                    return None
                self._wake.wait(left)
            found = self._snapshot.get(agent)
            return None if found is None else found[0]

    def close(self) -> None:
        """Stop the thread (it is a daemon: a process that never calls this exits all the same)."""
        with self._lock:
            self._closed = True
            self._wake.notify_all()

    # -- internals -----------------------------------------------------------------------------------------

    def _want(self, agent: str) -> None:
        """Ask the thread to read ``agent`` (lock held)."""
        if self._closed:
            return
        self._wanted.add(agent)
        if os.getpid() != self._pid:  # a forked worker: the parent's thread is not here
            self._pid, self._worker = os.getpid(), None
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="rb-otel-models", daemon=True)
            self._worker.start()
        self._wake.notify_all()

    def _work(self) -> None:
        backoff = 0.0
        while True:
            with self._lock:
                while not self._wanted and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                agents = sorted(self._wanted)
                self._wanted.clear()
            read: dict[str, StoredModel | None] = {}
            failure: BaseException | None = None
            for agent in agents:
                try:
                    read[agent] = self.store.model(agent, timeout=_READ_TIMEOUT)
                except Exception as exc:  # a store that fails changes nothing: the snapshot stays
                    failure = exc
                    break
            now = time.monotonic()
            loaded: list[StoredModel] = []
            with self._lock:
                self._outwaited = False
                for agent, record in read.items():
                    old = self._snapshot.get(agent)
                    if old is None or _changed(old[0], record):
                        _log.info("models %s: agent %r now scored by %s", self.store.url, agent,
                                  record.name if record is not None else "its default pilot")  # fmt: skip
                        if record is not None:
                            loaded.append(record)
                    self._snapshot[agent] = (record, now)
                if failure is not None:
                    self._wanted.update(a for a in agents if a not in read)
                    if not self._down:
                        _log.log(self._announce, "models %s: the store failed (%s); runs keep the models they have",
                                 self.store.url, type(failure).__name__)  # fmt: skip
                    self._down = True
                    self.errors += 1
                elif self._down:
                    self._down = False
                    _log.log(self._announce, "models %s: the store answers again", self.store.url)
                self._wake.notify_all()
            self._tell(loaded)
            if failure is None:
                backoff = 0.0
                continue
            backoff = min(max(backoff * 2, _BACKOFF[0]), _BACKOFF[1])
            with self._lock:
                self._wake.wait_for(lambda: self._closed, timeout=backoff)

    def _tell(self, loaded: list[StoredModel]) -> None:
        """The listeners hear of the records just read (outside the lock: a run start never waits on them)."""
        if not loaded:
            return
        with self._lock:
            listeners = list(self._listeners)
        for record in loaded:
            for listener in listeners:
                try:
                    listener(record)
                except Exception:  # a listener (telemetry) must not stop the models reaching the runs
                    _log.warning("models %s: a listener failed on agent %r's model", self.store.url, record.agent,
                                 exc_info=True)  # fmt: skip


def _changed(old: StoredModel | None, new: StoredModel | None) -> bool:
    if old is None or new is None:
        return old is not new
    return (old.labels, old.fitted_at) != (new.labels, new.fitted_at)
