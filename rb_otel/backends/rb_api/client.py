"""A small, defensive rb-api client over httpx: bounded in time, retries, ``Retry-After``, a circuit breaker.

Contract: :meth:`RbApiClient.post` either returns a JSON object or raises :class:`RemoteError` within the
deadline it is given (never later), with a message that never contains the API key or request headers.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

__all__ = [
    "API_TIMEOUT_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "CircuitBreaker",
    "RbApiClient",
    "RemoteConfig",
    "RemoteError",
]

_log = logging.getLogger("rb_otel.backends.rb_api")

#: Base URL of rb-api when none is passed.
BASE_URL_ENV: Final = "REASONBLOCKS_BASE_URL"
#: HTTP timeout in seconds (default 10.0).
API_TIMEOUT_ENV: Final = "REASONBLOCKS_API_TIMEOUT"
DEFAULT_BASE_URL: Final = "https://rb-api.reasonblocks.com"
#: Responses larger than this are refused (the server's own body cap is 5 MB).
MAX_RESPONSE_BYTES: Final = 1 << 20


class RemoteError(Exception):
    """A failed rb-api call. ``kind`` is a short, bounded label (used as ``error.type``)."""

    def __init__(self, kind: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.retry_after = retry_after


def _env_timeout() -> float:
    raw = os.environ.get(API_TIMEOUT_ENV, "").strip()
    if not raw:
        return 10.0
    try:
        value = float(raw)
    except ValueError:
        _log.warning("%s=%r is not a number; using 10.0", API_TIMEOUT_ENV, raw)
        return 10.0
    return value if value > 0 else 10.0


@dataclass(frozen=True)
class RemoteConfig:
    """Where and how to reach rb-api. ``api_key`` is never shown (``repr`` hides it)."""

    api_key: str = field(repr=False)
    base_url: str = ""
    timeout_s: float = field(default_factory=_env_timeout)
    max_retries: int = 2
    breaker_failures: int = 5
    breaker_cooldown_s: float = 30.0

    def __post_init__(self) -> None:
        if not isinstance(self.api_key, str) or not self.api_key:
            raise ValueError("an rb-api key is required for the remote backends")
        base = (self.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base!r}")
        object.__setattr__(self, "base_url", base)

    @property
    def host(self) -> str:
        return httpx.URL(self.base_url).host


class CircuitBreaker:
    """Opens after ``failures`` consecutive failures and stays open ``cooldown_s``; then one call may probe."""

    def __init__(self, failures: int, cooldown_s: float) -> None:
        self._threshold = failures
        self._cooldown = cooldown_s
        self._failures = 0
        self._opened_at: float | None = None
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        with self._lock:
            if self._opened_at is None:
                return False
            if time.monotonic() - self._opened_at >= self._cooldown:
                self._opened_at = None  # half-open: let the next call probe
                self._failures = self._threshold - 1
                return False
            return True

    def success(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None

    def failure(self) -> None:
        with self._lock:
            self._failures += 1
            if self._failures >= self._threshold and self._opened_at is None:
                self._opened_at = time.monotonic()
                _log.warning("rb-api failing; pausing remote calls for %.0f s", self._cooldown)


class RbApiClient:
    """POSTs JSON to rb-api. Thread-safe; one instance per ``ReasonBlocks``."""

    def __init__(self, config: RemoteConfig, *, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self.breaker = CircuitBreaker(config.breaker_failures, config.breaker_cooldown_s)
        self._http = httpx.Client(
            base_url=config.base_url,
            headers={"Authorization": f"Bearer {config.api_key}", "Content-Type": "application/json"},
            timeout=config.timeout_s,
            transport=transport,
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"RbApiClient(base_url={self.config.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def post(self, path: str, payload: dict[str, Any], *, deadline: float | None = None) -> dict[str, Any]:
        """POST ``payload``; retries 5xx, 429 and connection errors while the deadline (monotonic) allows."""
        if self.breaker.open:
            raise RemoteError("circuit_open", "rb-api calls paused after repeated failures")
        deadline = deadline if deadline is not None else time.monotonic() + self.config.timeout_s
        body = json.dumps(payload, default=str).encode()
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0.005:
                self.breaker.failure()
                raise RemoteError("timeout", "the steering time budget ran out")
            try:
                result = self._once(path, body, min(remaining, self.config.timeout_s))
            except RemoteError as exc:
                retry_after = exc.retry_after
                retryable = exc.kind in ("http_5xx", "http_429", "connection", "timeout")
                if not retryable or attempt >= self.config.max_retries:
                    self.breaker.failure()
                    raise
                pause = retry_after if retry_after is not None else min(0.05 * 2**attempt, 1.0) * random.uniform(0.5, 1)
                if time.monotonic() + pause >= deadline:
                    self.breaker.failure()
                    raise
                time.sleep(pause)
                attempt += 1
                continue
            self.breaker.success()
            return result

    def _once(self, path: str, body: bytes, timeout: float) -> dict[str, Any]:
        try:
            with self._http.stream("POST", path, content=body, timeout=timeout) as response:
                status = response.status_code
                if status == 429:
                    raise RemoteError(
                        "http_429", "rate limited", retry_after=_retry_after(response.headers.get("Retry-After"))
                    )
                if status >= 500:
                    raise RemoteError("http_5xx", f"server error {status}")
                if status >= 400:
                    raise RemoteError(f"http_{status}", f"request refused with {status}")
                chunks = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise RemoteError("too_large", f"response over {MAX_RESPONSE_BYTES} bytes")
                    chunks.append(chunk)
        except httpx.TimeoutException:
            raise RemoteError("timeout", "rb-api did not answer in time") from None
        except httpx.TransportError as exc:
            raise RemoteError("connection", type(exc).__name__) from None
        try:
            data = json.loads(b"".join(chunks))
        except ValueError:
            raise RemoteError("malformed", "the response is not JSON") from None
        if not isinstance(data, dict):
            raise RemoteError("malformed", "the response is not a JSON object")
        return data


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        return None
