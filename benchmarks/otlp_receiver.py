"""A real OTLP/HTTP receiver, as its own process, that writes every span it accepts to disk before it answers.

    python benchmarks/otlp_receiver.py OUT_DIR [--port 0]

It prints ``{"port": ...}`` once it listens on 127.0.0.1, then serves:

* ``POST /v1/traces`` (protobuf, gzip or not): every span of the request is appended to ``OUT_DIR/spans.jsonl``
  as one line per request, ``{"t": receive time, "spans": [[trace id, span id, name, rb.run_id or "", end ns],
  ...]}``, flushed before the answer; the answer is 200 only once the line is written. A write that fails (a full
  filesystem: ENOSPC, or EFBIG past a file-size limit) is undone (the file is cut back to where the line began, so
  no half line is left) and answered 503 with ``Retry-After: 1``: retryable, so the sender keeps the data.
* ``POST /v1/metrics`` and ``/v1/logs``: 200, nothing written (the fleet counts spans).
* ``POST /control?mode=ok|503|429|400&retry_after=S``: from now on answer every export with that status (a 429 or 503
  carries ``Retry-After: S`` when ``retry_after`` is given), without writing; ``mode=ok`` serves again.
* ``GET /stats``: ``{"spans": written, "requests": {status: count}, "mode": ..., "refused_at": [times of the
  last 1,000 refused exports]}``.

What a sender does with a refusal is the sender's business: this receiver never keeps a span it did not write.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gzip
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

#: The answers to a refused export: OTLP/HTTP's retryable statuses, and a permanent one.
REFUSALS = {"503": 503, "429": 429, "400": 400}


class _State:
    """What the handler threads share: the output file, the mode, the counts (under one lock)."""

    def __init__(self, out: Path) -> None:
        self.path = out / "spans.jsonl"
        self.file = self.path.open("ab", buffering=0)
        self.lock = threading.Lock()
        self.mode = "ok"
        self.retry_after: str | None = None
        self.spans = 0
        self.requests: dict[str, int] = {}
        self.refused_at: list[float] = []  # when each refused export came (the last 1,000)

    def count(self, status: int) -> None:
        self.requests[str(status)] = self.requests.get(str(status), 0) + 1

    def write(self, line: bytes) -> bool:
        """Append ``line`` whole or not at all: ``False`` when the filesystem refused it (the file is cut back)."""
        start = self.file.seek(0, os.SEEK_END)
        try:
            written = 0
            while written < len(line):
                written += self.file.write(line[written:])
            return True
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
                raise
            self.file.truncate(start)
            return False


def _spans(request: ExportTraceServiceRequest) -> list[list[Any]]:
    rows = []
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                run_id = next((a.value.string_value for a in span.attributes if a.key == "rb.run_id"), "")
                rows.append([span.trace_id.hex(), span.span_id.hex(), span.name, run_id, span.end_time_unix_nano])
    return rows


class Handler(BaseHTTPRequestHandler):
    state: ClassVar[_State]
    protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver serves it

    def _answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/x-protobuf" if status < 300 else "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if urlparse(self.path).path != "/stats":
            self._answer(404)
            return
        state = self.state
        with state.lock:
            body = json.dumps(
                {"spans": state.spans, "requests": state.requests, "mode": state.mode, "refused_at": state.refused_at}
            ).encode()
        self._answer(200, body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        url = urlparse(self.path)
        state = self.state
        if url.path == "/control":
            query = parse_qs(url.query)
            with state.lock:
                state.mode = query.get("mode", ["ok"])[0]
                state.retry_after = query.get("retry_after", [None])[0]
            self._answer(200, b"{}")
            return
        if not url.path.endswith("/v1/traces"):
            self._answer(200)
            return
        with state.lock:
            mode, retry_after = state.mode, state.retry_after
        if mode in REFUSALS:
            status = REFUSALS[mode]
            with state.lock:
                state.count(status)
                state.refused_at = [*state.refused_at[-999:], time.time()]
            self._answer(
                status, b'{"message": "refused on purpose"}', {"Retry-After": retry_after} if retry_after else None
            )
            return
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        rows = _spans(request)
        line = json.dumps({"t": time.time(), "spans": rows}, separators=(",", ":")).encode() + b"\n"
        with state.lock:
            written = state.write(line)
            state.count(200 if written else 503)
            if written:
                state.spans += len(rows)
        if written:
            self._answer(200)
        else:  # the disk is full: retryable, so the sender keeps what it sent
            self._answer(503, b'{"message": "no space left on the receiver"}', {"Retry-After": "1"})

    def log_message(self, *args: Any) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    Handler.state = _State(args.out)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
