"""A real HTTP server on 127.0.0.1 that answers like the Anthropic Messages API and the OpenAI Responses / Chat
Completions APIs, scripted turn by turn, for tests that drive the real SDK clients.

A reply is chosen by a ``responder(path, body) -> Reply`` (so concurrent conversations each get their own
script, e.g. by counting the assistant turns in the request), or taken in order from per-path queues. Every
request is recorded (path, headers, JSON body). Faults: any status with headers (``429`` + ``retry-after``), a
malformed body, a slow answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One HTTP answer: ``body`` (JSON) or ``raw`` bytes, after ``delay`` seconds."""

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    delay: float = 0.0


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any


class ScriptedModelAPI:
    """``with ScriptedModelAPI() as api:`` serves on ``api.url`` until the block ends (then stops, bounded)."""

    def __init__(self, responder: Callable[[str, Any], Reply] | None = None) -> None:
        self.responder = responder
        self.queues: dict[str, deque[Reply]] = {}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(data) if data else None
                except ValueError:
                    body = data.decode("utf-8", "replace")
                path = self.path.split("?")[0]
                reply = api._reply(Request(path, {k.lower(): v for k, v in self.headers.items()}, body))
                if reply.delay:
                    time.sleep(reply.delay)
                payload = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    if "content-type" not in {k.lower() for k in reply.headers}:
                        self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the client gave up (a timeout test): nothing to answer
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, path: str, reply: Reply) -> None:
        """Queue ``reply`` for the next request to ``path`` (used when no responder is set)."""
        with self._lock:
            self.queues.setdefault(path, deque()).append(reply)

    def requests_to(self, path: str) -> list[Request]:
        return [r for r in self.requests if r.path == path]

    def _reply(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            queue = self.queues.get(request.path)
            if queue:
                return queue.popleft()
        if self.responder is not None:
            return self.responder(request.path, request.body)
        return Reply({"error": {"type": "script_exhausted", "message": f"no reply scripted for {request.path}"}}, 500)

    def __enter__(self) -> ScriptedModelAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


# -- Anthropic Messages ---------------------------------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def message(content: list[dict[str, Any]], *, model: str = "claude-test-1", **usage: int) -> Reply:
    """A Messages API reply: ``stop_reason`` is ``tool_use`` when ``content`` asks for a tool."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return Reply(
        {
            "id": f"msg_{abs(hash(json.dumps(content))) % 10**8}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 10, **usage},
        }
    )


def anthropic_error(status: int, kind: str, **headers: str) -> Reply:
    return Reply({"type": "error", "error": {"type": kind, "message": f"scripted {status}"}}, status, dict(headers))


def assistant_turns(body: Any) -> int:
    """How many assistant turns an Anthropic (or Chat Completions) request already holds."""
    return sum(1 for m in (body or {}).get("messages", ()) if isinstance(m, dict) and m.get("role") == "assistant")


def by_turn(replies: list[Reply]) -> Callable[[str, Any], Reply]:
    """A responder answering each conversation with ``replies[number of assistant turns so far]``."""

    def respond(path: str, body: Any) -> Reply:
        return replies[min(assistant_turns(body), len(replies) - 1)]

    return respond


def sse(chunks: list[Any]) -> Reply:
    """A server-sent-events stream of JSON ``chunks`` ending with ``[DONE]`` (OpenAI's streaming format)."""
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return Reply(raw=body.encode(), headers={"content-type": "text/event-stream"})


def spans_text(spans: Iterator[Any] | list[Any]) -> str:
    """Everything a list of finished spans says: names, attributes, events (to search for secrets)."""
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        for event in span.events:
            parts.append(event.name + json.dumps(dict(event.attributes or {}), default=str))
    return "\n".join(parts)
