"""``BaselineCache``: the pilot's view of a :class:`~rb_otel.steering.pilot.baselines.SummaryStore`, off the step's path
(the runtime side of the core's :class:`~rb_otel.steering.pilot.baselines.BaselineSource`: threads, exit hooks, fork
handling and the environment are here, not in the core).

A run reads its agent's baseline once, when it starts (:meth:`BaselineCache.get`), and hands its summary over
once, when it ends (:meth:`BaselineCache.record`); ``begin_step``/``end_step`` never touch the store.

With the in-memory store both are a dict operation. With a shared store (SQLite, Redis):

* ``get`` answers from a per-process snapshot; an agent the process has not read yet is read from the store
  once, waiting at most ``start_timeout`` (200 ms); a snapshot older than ``refresh_s`` is refreshed in the
  background, and the run uses what is there meanwhile;
* ``record`` folds the run into the snapshot at once (this process sees its own runs immediately) and queues it
  for a background writer (a bounded queue: when full, the oldest summary is dropped and counted);
* what is queued is written by :meth:`flush` / :meth:`close` (``ReasonBlocks.close()``), at normal exit, when a
  ``multiprocessing`` / ``ProcessPoolExecutor`` worker exits and on SIGTERM (``rb_otel.process_exit``), all
  of them together bounded by :data:`~rb_otel.process_exit.EXIT_TIMEOUT_S` (2 s);
* a store that fails (unreachable, hung, locked, corrupt) fails open: runs go on with the snapshot (else the
  prior), every failure counted (``on_event``). After one failure the store is *down*: no run start waits on it
  until the background writer's next read answers (the writer backs off 0.25 s doubling to 5 s, and new runs
  do not cut its wait short), so an outage costs one run start at most. One warning when it goes down and one
  when it is back (a store that keeps flapping warns at most once a minute).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path

from rb_otel import process_exit
from rb_otel.backends.baselines.environment import BASELINES_ENV, store_from_environment
from rb_otel.backends.baselines.errors import SummaryStoreError
from rb_otel.backends.baselines.opening import open_summary_store
from rb_otel.steering.pilot.baselines import (
    EMPTY_BASELINE,
    MAX_AGENTS,
    AgentBaseline,
    MemorySummaryStore,
    RunSummary,
    SummaryStore,
)
from rb_otel.urls import scrub

__all__ = ["BASELINES_ENV", "BaselineCache", "BaselineEvent"]

_log = logging.getLogger("rb_otel.baselines")


#: ``on_event(kind, count)`` kinds: a failed read or write, summaries dropped from a full queue.
BaselineEvent = str
READ_ERROR: BaselineEvent = "read"
WRITE_ERROR: BaselineEvent = "write"
DROPPED: BaselineEvent = "dropped"

_BATCH = 256  # summaries written per transaction
_BACKOFF = (0.25, 5.0)  # the writer's first and longest wait after a failure (seconds)
_WARN_EVERY = 60.0  # a store that flaps (down, back, down) warns of a new outage at most this often (seconds)


class BaselineCache:
    """Per-agent baselines for the pilot, kept in a summary store (see the module docstring).

    ``store``: a :class:`SummaryStore`, a URL (``memory://``, ``sqlite:///path.db`` or a plain path, ``redis://``)
    or ``None`` (``RB_OTEL_PILOT_BASELINES``, else ``RB_OTEL_STORE``, else in memory: ``environment.py``). A bad
    URL raises :class:`~rb_otel.backends.baselines.errors.SummaryStoreError` here, at construction (naming the
    variable when it came from one); nothing after that raises.
    ``on_event(kind, count)`` is told of every failure and drop (the facade counts them as
    ``rb.baselines.errors`` / ``rb.baselines.dropped``); more listeners with :meth:`add_listener`.
    """

    def __init__(
        self,
        store: SummaryStore | str | Path | None = None,
        *,
        start_timeout: float = 0.2,
        refresh_s: float = 5.0,
        queue_size: int = 4096,
        max_agents: int = MAX_AGENTS,
        on_event: Callable[[BaselineEvent, int], None] | None = None,
    ) -> None:
        found = store_from_environment() if store is None else None  # environment.py: which variable wins
        if found is not None:
            store = found[1]
        self._given = str(store) if isinstance(store, str | Path) else ""  # what messages are scrubbed of
        if store is None:
            store = MemorySummaryStore(max_agents=max_agents)
        elif not isinstance(store, SummaryStore):
            try:
                store = open_summary_store(store, max_agents=max_agents)
            except SummaryStoreError as exc:  # a value from the environment: say which variable it came from
                raise SummaryStoreError(f"{found[0]}: {exc}") if found is not None else exc from None
        if not start_timeout > 0 or not refresh_s > 0 or queue_size < 1:
            raise ValueError("start_timeout and refresh_s must be positive and queue_size at least 1")
        self.summaries: SummaryStore = store
        self.url = store.url
        self.start_timeout = float(start_timeout)
        self.refresh_s = float(refresh_s)
        self.max_agents = max_agents
        self.errors = 0  # failed reads and writes, this process
        self.dropped = 0  # summaries dropped from a full queue
        self._listeners: list[Callable[[BaselineEvent, int], None]] = [on_event] if on_event else []
        self._memory = store if isinstance(store, MemorySummaryStore) else None
        self._snapshot: OrderedDict[str, tuple[AgentBaseline, float]] = OrderedDict()
        self._queue: deque[tuple[str, RunSummary]] = deque()
        self._queue_size = int(queue_size)
        self._stale: set[str] = set()
        self._writing = 0  # summaries taken by the writer, not yet written
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._down = False  # a call failed: run starts do not wait on the store until a background read answers
        self._retry_at = 0.0  # monotonic: the writer's next try while the store is down
        self._retry_now = False  # a flush asked for one try before the backoff is over
        self._warned_down = False  # this outage was warned about (so its end is too)
        self._last_warning = -_WARN_EVERY
        self._probe: str | None = None  # the agent the writer reads to learn whether the store answers again
        self._closed = False
        self._worker: threading.Thread | None = None
        self._pid = os.getpid()
        if self._memory is None:
            _EXIT.add(self)

    def __repr__(self) -> str:
        return f"BaselineCache({self.url!r})"

    def __len__(self) -> int:
        """How many agents this process has a baseline of."""
        return len(self._memory) if self._memory is not None else len(self._snapshot)

    @property
    def pending(self) -> int:
        """Run summaries recorded and not yet in the store (queued, or being written): what a ``kill -9`` now
        would lose."""
        with self._lock:
            return len(self._queue) + self._writing

    def add_listener(self, listener: Callable[[BaselineEvent, int], None]) -> None:
        """Also tell ``listener(kind, count)`` of failures and drops (it must not raise; it is guarded)."""
        self._listeners.append(listener)

    # -- the pilot's two calls -------------------------------------------------------------------------

    def get(self, agent: str) -> AgentBaseline:
        """The agent's baseline for a run starting now. Never raises; waits at most ``start_timeout``."""
        if self._memory is not None:
            return self._memory.baseline(agent)
        now = time.monotonic()
        with self._lock:
            found = self._snapshot.get(agent)
            if found is not None:
                self._snapshot.move_to_end(agent)
                if now - found[1] >= self.refresh_s:
                    self._request_refresh(agent)
                return found[0]
            down = self._down
            if down:
                self._request_refresh(agent)
        if down:
            return EMPTY_BASELINE
        return self._load_now(agent)

    def record(self, agent: str, summary: RunSummary) -> None:
        """A run of ``agent`` finished: fold it in (at once here, in the background for the store). Never raises."""
        if self._memory is not None:
            self._memory.append([(agent, summary)])
            return
        process_exit.watch_process()
        dropped = 0
        with self._lock:
            self._check_fork()
            found = self._snapshot.get(agent)
            if found is not None:
                self._snapshot[agent] = (found[0].plus(summary), found[1])
            if len(self._queue) >= self._queue_size:
                self._queue.popleft()
                dropped = 1
            self._queue.append((agent, summary))
            self._start_worker()
            self._wake.notify_all()
        if dropped:
            self.dropped += dropped
            self._tell(DROPPED, dropped)

    # -- flushing ------------------------------------------------------------------------------------------

    def flush(self, timeout: float = 5.0) -> bool:
        """Write what is queued, waiting at most ``timeout`` seconds; ``False`` (and a warning saying how many
        summaries are still waiting) when it could not."""
        if self._memory is not None:
            return True
        deadline = time.monotonic() + timeout
        with self._lock:
            self._check_fork()
            if self._queue and (self._worker is None or not self._worker.is_alive()):
                self._start_worker()
            self._retry_now = True  # one try now, even in a backoff
            self._wake.notify_all()
            while self._queue or self._writing:
                left = deadline - time.monotonic()
                if left <= 0:
                    waiting = len(self._queue) + self._writing
                    _log.warning(
                        "baselines %s: %d run summaries not written after %.1f s; giving up on them",
                        self.url,
                        waiting,
                        timeout,
                    )
                    return False
                self._wake.wait(min(left, 0.05))
        return True

    def save(self) -> None:
        """What a persisted store's ``save()`` always did: write what is pending (now :meth:`flush`)."""
        self.flush()

    def close(self, timeout: float = 5.0) -> None:
        """Flush (bounded by ``timeout``), stop the writer and close the store; later records are kept in memory
        only."""
        if self._closed:
            return
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        with self._lock:
            self._closed = True
            self._wake.notify_all()
            worker = self._worker
        if worker is not None:  # one bound for all of it: a write hung on the store is left to its daemon thread
            worker.join(timeout=max(deadline - time.monotonic(), 0.0))
        _EXIT.discard(self)
        try:
            self.summaries.close()
        except Exception:  # closing must not raise into a shutdown
            _log.debug("baselines %s: close failed", self.url, exc_info=True)

    # -- internals -----------------------------------------------------------------------------------------

    def _load_now(self, agent: str) -> AgentBaseline:
        """Read one agent at run start, within ``start_timeout``; fail open to the prior's empty baseline."""
        try:
            runs = self.summaries.recent(agent, timeout=self.start_timeout)
        except Exception as exc:
            self._failed(READ_ERROR, exc)
            with self._lock:
                self._request_refresh(agent)
            return EMPTY_BASELINE
        baseline = AgentBaseline(runs.runs, runs.recent)
        with self._lock:
            baseline = self._with_queued(agent, baseline)
            self._put(agent, baseline)
        return baseline

    def _with_queued(self, agent: str, baseline: AgentBaseline) -> AgentBaseline:
        """``baseline`` read from the store, plus this process's runs of ``agent`` not written yet (lock held)."""
        for key, summary in self._queue:
            if key == agent:
                baseline = baseline.plus(summary)
        return baseline

    def _put(self, agent: str, baseline: AgentBaseline) -> None:
        self._snapshot[agent] = (baseline, time.monotonic())
        self._snapshot.move_to_end(agent)
        while len(self._snapshot) > self.max_agents:
            self._snapshot.popitem(last=False)

    def _request_refresh(self, agent: str) -> None:
        """Ask the writer to re-read ``agent`` (lock held)."""
        if self._closed:
            return
        self._stale.add(agent)
        self._probe = agent
        self._start_worker()
        self._wake.notify_all()

    def _start_worker(self) -> None:
        """Start the background writer if it is not running (lock held)."""
        if self._closed or (self._worker is not None and self._worker.is_alive()):
            return
        self._worker = threading.Thread(target=self._work, name="rb-otel-baselines", daemon=True)
        self._worker.start()

    def _check_fork(self) -> None:
        """In a forked child, forget the parent's queue and writer (the parent writes its own runs; lock held)."""
        if os.getpid() != self._pid:
            self._pid = os.getpid()
            self._queue.clear()
            self._writing = 0
            self._worker = None

    def _work(self) -> None:
        backoff = 0.0
        while True:
            with self._lock:
                self._wait_for_work()
                if self._closed and not self._queue:
                    return
                self._retry_now = False
                batch = [self._queue.popleft() for _ in range(min(len(self._queue), _BATCH))]
                self._writing = len(batch)
                stale = list(self._stale)
                self._stale.clear()
                if self._down and not stale and self._probe is not None:
                    stale = [self._probe]  # while down, every try reads too: only an answer ends the outage
            written = self._write(batch)
            refreshed = written and self._refresh(stale)
            ok = written and refreshed
            lost = 0
            with self._lock:
                self._writing = 0
                if not written:
                    # Back to the front of the queue to be retried; what no longer fits is the oldest: dropped.
                    lost = max(len(batch) - (self._queue_size - len(self._queue)), 0)
                    self._queue.extendleft(reversed(batch[lost:]))
                if not refreshed:
                    self._stale.update(stale)
                if ok:
                    backoff = 0.0
                else:
                    backoff = min(max(backoff * 2, _BACKOFF[0]), _BACKOFF[1])
                    self._retry_at = time.monotonic() + backoff
                self._wake.notify_all()
            if lost:
                self.dropped += lost
                self._tell(DROPPED, lost)
            if not ok and self._closed:
                return  # closing while the store is down: flush() has reported what is left

    def _wait_for_work(self) -> None:
        """Until there is something to write or read and the backoff is over (a flush cuts it short once; new
        runs do not). Lock held."""
        while not self._closed:
            if not (self._queue or self._stale):
                self._wake.wait()
                continue
            left = self._retry_at - time.monotonic()
            if left <= 0 or self._retry_now:
                return
            self._wake.wait(left)

    def _write(self, batch: list[tuple[str, RunSummary]]) -> bool:
        if not batch:
            return True
        try:
            self.summaries.append(batch)
        except Exception as exc:
            self._failed(WRITE_ERROR, exc)
            return False
        return True

    def _refresh(self, agents: list[str]) -> bool:
        for agent in agents:
            try:
                runs = self.summaries.recent(agent, timeout=max(self.start_timeout, 2.0))
            except Exception as exc:
                self._failed(READ_ERROR, exc)
                return False
            with self._lock:
                self._put(agent, self._with_queued(agent, AgentBaseline(runs.runs, runs.recent)))
        if agents:
            self._recovered()
        return True

    def _failed(self, kind: BaselineEvent, exc: BaseException) -> None:
        now = time.monotonic()
        with self._lock:
            warn = not self._down and now - self._last_warning >= _WARN_EVERY
            self._down = True
            self._retry_at = max(self._retry_at, now + _BACKOFF[0])
            if warn:
                self._warned_down = True
                self._last_warning = now
        self.errors += 1
        if warn:
            _log.warning(
                "baselines %s: the store failed (%s: %s); runs go on with the baselines this process has, "
                "and the store is retried in the background",
                self.url,
                type(exc).__name__,
                scrub(str(exc), self._given),
            )
        self._tell(kind, 1)

    def _recovered(self) -> None:
        """A read answered in the background: the outage is over (a write alone does not end it: a corrupt
        store may take writes and fail every read)."""
        with self._lock:
            was, warned = self._down, self._warned_down
            self._down = self._warned_down = False
            self._retry_at = 0.0
        if was and warned:
            _log.warning("baselines %s: the store answers again", self.url)

    def _tell(self, kind: BaselineEvent, count: int) -> None:
        for listener in self._listeners:
            try:
                listener(kind, count)
            except Exception:
                _log.debug("baselines listener failed", exc_info=True)


class _ExitFlush:
    """Writes what every shared store still open has queued when the process goes (a normal exit, a worker's
    exit, SIGTERM: ``rb_otel.process_exit``), all stores within one bound."""

    def __init__(self) -> None:
        self._stores: weakref.WeakSet[BaselineCache] = weakref.WeakSet()
        self._registered = False
        self._lock = threading.Lock()

    def add(self, store: BaselineCache) -> None:
        with self._lock:
            self._stores.add(store)
            if not self._registered:
                atexit.register(self.flush_all)
                process_exit.on_exit(self._on_the_way_out)
                self._registered = True

    def discard(self, store: BaselineCache) -> None:
        with self._lock:
            self._stores.discard(store)

    def _on_the_way_out(self, timeout: float, terminating: bool) -> None:
        self.flush_all(timeout)

    def flush_all(self, timeout: float = process_exit.EXIT_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        for store in list(self._stores):
            try:
                store.close(timeout=max(deadline - time.monotonic(), 0.0))
            except Exception:
                _log.debug("baselines: flush at exit failed", exc_info=True)


_EXIT = _ExitFlush()
