"""A real HTTP server on 127.0.0.1 that plays rb-api, well or badly (per path, programmable)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

EVALUATION = {
    "inject": True,
    "intervention_text": "Stop repeating the search; read the file it found.",
    "fired": ["semantic_loop"],
    "scores": {"semantic_loop": 0.8, "verification_skip": 0.1},
    "composite": 0.21,
    "failure_type": "semantic_loop",
    "intervention_source": "e2",
}
TRACES = {
    "traces": [
        {
            "tier": "e2",
            "pattern_id": "p-1",
            "similarity": 0.77,
            "fields": {"situation": "looping searches", "unlock": "open the file"},
        }
    ]
}


class FakeRbApi(BaseHTTPRequestHandler):
    modes: ClassVar[dict[str, list[str]]] = {}
    requests: ClassVar[list[dict[str, Any]]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.lock:
            self.requests.append({"path": self.path, "headers": dict(self.headers), "body": json.loads(body or b"{}")})
            queue = self.modes.get(self.path) or self.modes.get("*") or ["ok"]
            mode = queue.pop(0) if len(queue) > 1 else queue[0]
        if mode.startswith("slow:"):
            time.sleep(float(mode.split(":")[1]))
            mode = "ok"
        if mode == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.close()
            return
        if mode == "400":
            return self._send(400, b'{"detail": "bad request"}')
        if mode == "500":
            return self._send(500, b'{"detail": "boom"}')
        if mode.startswith("429"):
            return self._send(
                429, b'{"detail": "slow down"}', {"Retry-After": mode.split(":")[1] if ":" in mode else "0"}
            )
        if mode == "malformed":
            return self._send(200, b'{"inject": tru')
        if mode == "wrong_shape":
            return self._send(200, b'{"fired": "semantic_loop", "traces": 7}')
        if mode == "huge":
            return self._send(200, b'{"pad": "' + b"x" * (3 << 20) + b'"}')
        if self.path.endswith("/monitors/evaluate"):
            return self._send(200, json.dumps(EVALUATION).encode())
        if self.path.endswith("/traces/retrieve"):
            return self._send(200, json.dumps(TRACES).encode())
        return self._send(200, b"{}")

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up: fine
            self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def fake_rbapi(**modes: list[str]) -> Iterator[str]:
    """Serve on 127.0.0.1; ``modes`` maps a path (or ``"*"``) to a queue of behaviours (the last one repeats)."""
    FakeRbApi.modes = {k.replace("__", "/"): list(v) for k, v in modes.items()}
    FakeRbApi.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeRbApi)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
