"""The export spool (opt-in): spans a process could not hand over when it ended are kept on disk as OTLP/JSON, and
sent by the next process configured with the same spool.

Turned on by ``RB_OTEL_EXPORT_SPOOL=DIR`` or ``configure(spool=DIR)`` (the argument first), for spans that go to an
OTLP endpoint (the exporter :func:`~rb_otel.telemetry.setup.configure` counts):

* **What is kept.** On the process's way out (SIGTERM with the handler, a worker's exit: :mod:`rb_otel.process_exit`;
  or :meth:`~rb_otel.telemetry.setup.Providers.shutdown`), what the batch processor still holds is exported as
  before; when the endpoint is away (the retries of :mod:`rb_otel.telemetry.retry` are failing, or the try fails),
  each batch is written to the spool instead of dropped, and counted as ``spooled`` by
  :class:`~rb_otel.telemetry.export.CountingSpanExporter`. A try still under way after half the exit's time (over
  gRPC, one try against a Collector that does not answer lasts the whole export timeout) is not waited for: the
  batch being tried and the processor's queue are written at once. Delivery is at least once: a try that succeeds
  after its batch was written is counted in ``duplicated``, and the next start sends those spans again. A batch
  given up on while the process runs (past the retry budget) is dropped as before: the spool is for a process's
  end.
* **The files.** One file a batch, ``DIR/spans-<time ns>-<pid>-<n>.json``: OTLP/JSON lines, one
  ``ExportTraceServiceRequest`` a line (:func:`~rb_otel.telemetry.otlp_json.json_line`, the Collector ``file``
  exporter's format, which the Collector's ``otlpjsonfile`` receiver reads with ``include: [DIR/spans-*.json]``).
  Mode 0600, in a folder made 0700; written to a temporary file beside it (its name ends ``.tmp``) and renamed, so
  a reader never sees half a file. What is written is what the spans hold (their attributes as content capture
  allowed them, the resource, the scope): never an exporter's headers.
* **Bounded.** The folder holds at most :data:`DEFAULT_MAX_BYTES` (``RB_OTEL_EXPORT_SPOOL_MAX_BYTES`` to change
  it), every file in it counted. What would go past it is not written: the **newest** spans are dropped (what is on
  disk is older and waits its turn), counted in :attr:`Spool.dropped` and in the exporter's ``dropped``, and
  logged with the cap.
* **Sent at the next start.** ``configure()`` with the same spool starts a :class:`SpoolSender` thread: the files,
  oldest first, each claimed by a rename (concurrent processes never send one file twice), sent through an OTLP
  exporter of the same settings and deleted only once the export succeeded. While the endpoint is still away it
  retries (backoff 0.5 s doubling to 5 s) for the retry budget (``RB_OTEL_EXPORT_RETRY_S``, 300 s), then leaves
  the rest for the next start. Nothing waits for it: a run starts at once.
* **A file that does not read** (not JSON, not a trace request, not UTF-8) is named in one warning with its
  problem and renamed to ``<name>.corrupt`` beside the others: kept aside, never sent, never deleted.

Point a Collector's ``otlpjsonfile`` receiver at the folder only where no process starts again with it: both
would send the same files.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from rb_otel import process_exit
from rb_otel.files import publish, temporary_beside
from rb_otel.telemetry.export import CountingSpanExporter
from rb_otel.telemetry.otlp_json import json_line
from rb_otel.telemetry.otlp_json_spans import MalformedSpans, spans_of_lines
from rb_otel.telemetry.retry import FIRST_BACKOFF_S, MAX_BACKOFF_S, RetryingSpanExporter

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_BYTES_ENV",
    "SPOOL_ENV",
    "Spool",
    "SpoolAtExit",
    "SpoolSender",
    "spool_folder",
]

_log = logging.getLogger("rb_otel.telemetry")

#: The variable naming the spool's folder (``configure(spool=...)`` wins over it).
SPOOL_ENV = "RB_OTEL_EXPORT_SPOOL"
#: The variable that changes the spool's cap (bytes).
MAX_BYTES_ENV = "RB_OTEL_EXPORT_SPOOL_MAX_BYTES"
#: What the spool's folder may hold (bytes, every file in it): 64 MiB, about 20,000 spans.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: A sender's claim on a file: ``<name>.sending-<pid>``; taken back when that process is gone or after this long.
_CLAIM = ".sending-"
STALE_CLAIM_S = 120.0
#: The share of a closing's time the exporter is given to finish what it holds (a try under way, then the queue)
#: before the spool takes it all without waiting: half, so the files are written well within the exit's 2 s.
HAND_OVER_SHARE = 0.5


def spool_folder(argument: str | Path | None) -> Path | None:
    """The spool's folder: ``argument``, else ``RB_OTEL_EXPORT_SPOOL``, else ``None`` (no spool)."""
    if argument is not None:
        return Path(argument)
    raw = os.environ.get(SPOOL_ENV, "").strip()
    return Path(raw) if raw else None


def _max_bytes() -> int:
    raw = os.environ.get(MAX_BYTES_ENV, "").strip()
    if raw.isdigit():  # a whole number of bytes, 0 or more
        return int(raw)
    if raw:
        _log.warning("%s=%r is not a whole number of bytes; using %d", MAX_BYTES_ENV, raw, DEFAULT_MAX_BYTES)
    return DEFAULT_MAX_BYTES


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # not ours to signal: it exists
        return True
    return True


class Spool:
    """The spool's folder: files written (:meth:`keep`), claimed, sent and set aside (see the module docstring).
    ``max_bytes`` (default: ``RB_OTEL_EXPORT_SPOOL_MAX_BYTES``, else :data:`DEFAULT_MAX_BYTES`) bounds the folder."""

    def __init__(self, folder: str | Path, *, max_bytes: int | None = None) -> None:
        self.folder = Path(folder)
        self.max_bytes = _max_bytes() if max_bytes is None else max_bytes
        self.kept = 0  # spans written, this process
        self.dropped = 0  # spans not written (the cap, or a write that failed), this process
        self._numbers = itertools.count()
        self._lock = threading.Lock()

    def keep(self, spans: Sequence[ReadableSpan]) -> int:
        """Write ``spans`` (oldest first) to one new file, as many as fit under the cap; how many were written.
        Never raises: a write that fails is logged, and its spans count as dropped."""
        batch = list(spans)
        if not batch:
            return 0
        try:
            with self._lock:
                written = self._write(batch)
        except OSError as exc:
            _log.warning("export spool %s: %s; %d spans dropped", self.folder, exc, len(batch))
            written = 0
        with self._lock:
            self.kept += written
            self.dropped += len(batch) - written
        if written < len(batch):
            _log.warning(
                "export spool %s is full (its cap: %d bytes, %s): %d spans dropped (the newest), %d in all so far",
                self.folder, self.max_bytes, MAX_BYTES_ENV, len(batch) - written, self.dropped,
            )  # fmt: skip
        return written

    def _used(self) -> int:
        try:
            with os.scandir(self.folder) as entries:
                return sum(e.stat(follow_symlinks=False).st_size for e in entries if e.is_file(follow_symlinks=False))
        except FileNotFoundError:
            return 0

    def _write(self, batch: list[ReadableSpan]) -> int:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        room = self.max_bytes - self._used()
        count = len(batch)
        data = b""
        while count > 0:  # the oldest that fit: fewer spans, in proportion to what was too much
            data = (json_line(encode_spans(batch[:count])) + "\n").encode()
            if len(data) <= room:
                break
            count = min(count - 1, count * max(room, 0) // len(data))
        if count <= 0:
            return 0
        path = self.folder / f"spans-{time.time_ns():020d}-{os.getpid()}-{next(self._numbers)}.json"
        tmp = temporary_beside(path)
        descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(data)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
        publish(tmp, path)
        return count

    def pending(self) -> list[Path]:
        """The files waiting to be sent, oldest first (claims of a sender that is gone are taken back first)."""
        for claimed in self.folder.glob(f"spans-*.json{_CLAIM}*"):
            pid = claimed.name.rpartition(_CLAIM)[2]
            try:
                stale = time.time() - claimed.stat().st_ctime > STALE_CLAIM_S
            except OSError:
                continue
            if pid.isdigit() and int(pid) != os.getpid() and (stale or not _alive(int(pid))):
                self.release(claimed)
        return sorted(self.folder.glob("spans-*.json"))

    def claim(self, path: Path) -> Path | None:
        """Take ``path`` for this process (a rename: one process wins); ``None`` when another took it first."""
        claimed = path.with_name(f"{path.name}{_CLAIM}{os.getpid()}")
        try:
            os.rename(path, claimed)
        except FileNotFoundError:
            return None
        return claimed

    def release(self, claimed: Path) -> None:
        """Give a claimed file back (it is sent later, by this process or the next)."""
        try:
            os.rename(claimed, claimed.with_name(claimed.name.rpartition(_CLAIM)[0]))
        except OSError:
            _log.debug("export spool: could not give back %s", claimed, exc_info=True)

    def set_aside(self, claimed: Path, problem: str) -> Path:
        """Rename a claimed file that does not read to ``<name>.corrupt`` (kept, never sent) and say so in one
        line; the new path."""
        name = claimed.name.rpartition(_CLAIM)[0]
        aside = claimed.with_name(f"{name}.corrupt")
        try:
            os.rename(claimed, aside)
        except OSError as exc:
            _log.warning("export spool: %s: %s; could not set it aside (%s)", claimed.parent / name, problem, exc)
            return claimed
        _log.warning("export spool: %s: %s; not sent, kept aside as %s", claimed.parent / name, problem, aside.name)
        return aside


class SpoolSender:
    """Sends what an earlier process kept in ``spool`` through ``make_exporter()`` (made only when there are files),
    on a daemon thread started by :meth:`start` (see the module docstring): ``sent`` spans, ``files`` sent,
    ``set_aside`` files that did not read. Retries for ``budget_s`` seconds while the endpoint refuses."""

    def __init__(self, spool: Spool, make_exporter: Callable[[], SpanExporter | None], *, budget_s: float) -> None:
        self.spool = spool
        self.make_exporter = make_exporter
        self.budget_s = budget_s
        self.sent = 0
        self.files = 0
        self.set_aside = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rb-otel-spool", daemon=True)

    def start(self) -> SpoolSender:
        self._thread.start()
        return self

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the sender to finish; whether it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self, timeout: float = 0.0) -> None:
        """Stop sending (a claimed file is given back when its export returns), waiting up to ``timeout`` s."""
        self._stop.set()
        if self._thread.is_alive() and timeout > 0:
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            if self.spool.folder.is_dir() and self.spool.pending():
                self._send_all()
        except Exception:
            _log.warning("export spool %s: sending failed", self.spool.folder, exc_info=True)

    def _send_all(self) -> None:
        exporter = self.make_exporter()
        if exporter is None:
            return
        give_up_at = time.monotonic() + self.budget_s
        backoff = FIRST_BACKOFF_S
        try:
            while not self._stop.is_set():
                files = self.spool.pending()
                if not files or all(self._send(path, exporter) for path in files):
                    if not self.spool.pending():
                        break
                    continue
                if time.monotonic() + backoff > give_up_at:
                    _log.warning("export spool %s: the endpoint is still away after %.0f s; %d files left for the "
                                 "next start", self.spool.folder, self.budget_s, len(self.spool.pending()))  # fmt: skip
                    break
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        finally:
            exporter.shutdown()
        if self.files:
            _log.info("export spool %s: %d spans sent from %d files", self.spool.folder, self.sent, self.files)

    def _send(self, path: Path, exporter: SpanExporter) -> bool:
        """Send one file: ``False`` when the endpoint refused it (it is given back), else ``True`` (sent and
        deleted, taken by another process, or set aside)."""
        if self._stop.is_set():
            return False
        claimed = self.spool.claim(path)
        if claimed is None:
            return True
        try:
            spans = spans_of_lines(claimed.read_text(encoding="utf-8"))
        except (MalformedSpans, UnicodeDecodeError) as exc:
            problem = str(exc) if isinstance(exc, MalformedSpans) else f"not UTF-8 text (byte {exc.start})"
            self.spool.set_aside(claimed, problem)
            self.set_aside += 1
            return True
        except OSError:
            self.spool.release(claimed)
            raise
        try:
            result = exporter.export(spans)
        except Exception:
            _log.debug("export spool: the exporter raised", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.spool.release(claimed)
            return False
        claimed.unlink(missing_ok=True)
        self.sent += len(spans)
        self.files += 1
        return True


@dataclass(eq=False)
class SpoolAtExit(SpanProcessor):
    """Hands what a batch processor holds to the spool on the process's way out (see the module docstring).

    A span processor (its other methods do nothing) placed before ``processor`` in its tracer provider: a flush
    during the exit callbacks (the telemetry's exit flush comes right after runs in flight are ended) does
    :meth:`close` first, before the holding processor's own flush would give up on a failing endpoint. Also an
    exit callback of its own, for providers no ``ReasonBlocks`` flushes, and called by ``Providers.shutdown``."""

    spool: Spool
    processor: BatchSpanProcessor
    counting: CountingSpanExporter
    retrying: RetryingSpanExporter | None
    sender: SpoolSender | None = None
    _closed: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        ref = weakref.ref(self)

        def on_the_way_out(deadline: float, _terminating: bool) -> None:
            at_exit = ref()
            if at_exit is not None:
                at_exit.close(deadline)

        process_exit.on_exit(on_the_way_out)

    def close(self, timeout: float) -> None:
        """Once: stop the sender, stop the retries, and export what the processor holds, keeping in the spool what
        the endpoint does not take (at once when the retries were already failing). Bounded: what is not done in
        half of ``timeout`` (a try still under way) is kept as it is, the batch being tried and the queue, without
        waiting for the try (:meth:`_hand_over`)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self.sender is not None:
            self.sender.stop()
        failing = self.retrying is not None and self.retrying.failing
        self.counting.closing(self.spool, failing=failing)
        if self.retrying is not None:
            self.retrying.stop()  # the batch it holds comes back now, and is kept
        # The SDK's own flush, not the holding processor's (which returns at once while the endpoint fails), on a
        # thread of its own: it waits for a try under way, and one against an endpoint that does not answer (a
        # Collector down behind gRPC) lasts the whole export timeout, past the exit's 2 s.
        millis = max(int(timeout * 1000), 1)
        flush = threading.Thread(
            target=BatchSpanProcessor.force_flush,
            args=(self.processor, millis),
            name="rb-otel-spool-flush",
            daemon=True,
        )
        flush.start()
        flush.join(timeout * HAND_OVER_SHARE)
        if flush.is_alive():
            self._hand_over()
        if self.spool.kept:
            _log.warning("export spool %s: %d spans kept (the endpoint was away); the next start with this spool "
                         "sends them", self.spool.folder, self.spool.kept)  # fmt: skip

    def _hand_over(self) -> None:
        """Keep the batch being tried and the processor's queue in the spool now, without waiting for the try
        (:meth:`CountingSpanExporter.hand_over`); the processor's worker takes no further batch from its queue."""
        batches = getattr(self.processor, "_batch_processor", None)  # the SDK's queue: no public way to reach it
        queue = getattr(batches, "_queue", None)
        if batches is not None:
            batches._shutdown_timeout_exceeded = True  # its worker pops no more batches once the try returns
        if queue is None:
            _log.warning("export spool %s: the batch processor's queue cannot be reached (an SDK change); only the "
                         "batch being tried is kept", self.spool.folder)  # fmt: skip

        def oldest_first() -> list[ReadableSpan]:
            spans = []
            while queue:
                try:
                    spans.append(queue.pop())  # the oldest are at the right, as the SDK's worker takes them
                except IndexError:
                    break
            return spans

        kept = self.counting.hand_over(oldest_first)
        _log.info("export spool %s: an export try was still under way; %d spans kept without waiting for it",
                  self.spool.folder, kept)  # fmt: skip

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if process_exit.ending():
            self.close(timeout_millis / 1000)
        return True
