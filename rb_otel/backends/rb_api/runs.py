"""An optional exporter of run events to rb-api's run endpoints, on a background worker.

``run_start`` -> ``POST /v1/monitor/runs``, each step -> ``POST /v1/monitor/runs/{id}/steps``, ``run_finish`` ->
``POST /v1/monitor/runs/{id}/finish``. The queue is bounded: when it is full new events are dropped and counted,
so the agent never waits. ``close(timeout)`` drains what it can in that time.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Mapping
from typing import Any

from rb_otel.backends.rb_api.client import RbApiClient, RemoteError
from rb_otel.steering.emitters import StepEmitter
from rb_otel.types import StepLogEntry

__all__ = ["RbApiRunExporter"]

_log = logging.getLogger("rb_otel.backends.rb_api")
_STOP = object()


class RbApiRunExporter:
    """Shared by every run of one ``ReasonBlocks``; :meth:`for_run` gives a per-run ``StepEmitter``."""

    def __init__(self, client: RbApiClient, *, max_queue: int = 10_000, send_timeout_s: float = 10.0) -> None:
        self.client = client
        self.dropped = 0
        self.sent = 0
        self.failed = 0
        self._send_timeout = send_timeout_s
        self._queue: queue.Queue[Any] = queue.Queue(max_queue)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _ensure_worker(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._work, name="rb-otel-rbapi", daemon=True)
                    self._thread.start()

    def submit(self, path: str, payload: Mapping[str, Any]) -> None:
        """Queue one POST; never blocks (a full queue drops the event and counts it)."""
        if self._closed:
            return
        self._ensure_worker()
        try:
            self._queue.put_nowait((path, dict(payload)))
        except queue.Full:
            self.dropped += 1
            if self.dropped in (1, 100, 10_000):
                _log.warning("rb-api run export queue full; %d events dropped so far", self.dropped)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is _STOP:
                    return
                path, payload = item
                try:
                    self.client.post(path, payload, deadline=time.monotonic() + self._send_timeout)
                    self.sent += 1
                except RemoteError as exc:
                    self.failed += 1
                    _log.debug("rb-api run export failed: %s", exc.kind)
            finally:
                self._queue.task_done()

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting events and wait up to ``timeout`` seconds for the queue to drain."""
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return
        thread.join(timeout)

    def for_run(self) -> RunEvents:
        return RunEvents(self)


class RunEvents(StepEmitter):
    """The ``StepEmitter`` face of :class:`RbApiRunExporter` for one run."""

    def __init__(self, exporter: RbApiRunExporter) -> None:
        self._exporter = exporter

    def run_start(self, run_id: str, metadata: Mapping[str, Any]) -> None:
        payload: dict[str, Any] = {"run_id": run_id}
        payload.update({k: v for k, v in metadata.items() if isinstance(v, str | int | float | bool)})
        if isinstance(metadata.get("metadata"), Mapping):
            payload["metadata"] = dict(metadata["metadata"])
        self._exporter.submit("/v1/monitor/runs", payload)

    def step(self, run_id: str, entry: StepLogEntry, **_: Any) -> None:  # the entry carries what rb-api keeps
        self._exporter.submit(f"/v1/monitor/runs/{run_id}/steps", {"step_index": entry.step, **entry.as_dict()})

    def run_finish(
        self, run_id: str, outcome: str, *, risk: float | None = None, error: BaseException | None = None
    ) -> None:
        self._exporter.submit(f"/v1/monitor/runs/{run_id}/finish", {"outcome": outcome})

    def close(self, timeout: float = 5.0) -> None:
        """Per-run close does nothing: the shared worker is closed by its owner."""
