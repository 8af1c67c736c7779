"""Span and trace ids derived from the input, so replaying the same records twice gives the same ids.

Duck-typed against the SDK's ``IdGenerator`` (``generate_span_id`` / ``generate_trace_id``), so library code
never imports the SDK: :meth:`Telemetry.derived_ids` installs one on the SDK tracer it owns.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import itertools
import random
from collections.abc import Iterator
from typing import Any

__all__ = ["DerivedIds"]


class DerivedIds:
    """Ids from a hash chain seeded per block (:meth:`seeded`); the tracer's own generator outside one."""

    def __init__(self, fallback: Any = None) -> None:
        self._fallback = fallback
        self._seed: contextvars.ContextVar[tuple[bytes, Iterator[int]] | None] = contextvars.ContextVar(
            "rb_otel_derived_ids_seed", default=None
        )

    @contextlib.contextmanager
    def seeded(self, seed: bytes) -> Iterator[None]:
        """Inside this block, the n-th id of each kind is a digest of ``seed`` and n (never 0)."""
        token = self._seed.set((seed, itertools.count()))
        try:
            yield
        finally:
            self._seed.reset(token)

    def _next(self, kind: bytes, size: int) -> int | None:
        state = self._seed.get()
        if state is None:
            return None
        seed, counter = state
        value = int.from_bytes(hashlib.sha256(seed + kind + str(next(counter)).encode()).digest()[:size], "big")
        return value or 1

    def is_trace_id_random(self) -> bool:
        """Derived trace ids are not random (the W3C ``random`` trace flag stays unset), as the SDK asks."""
        return False

    def generate_span_id(self) -> int:
        value = self._next(b"span", 8)
        if value is not None:
            return value
        return int(self._fallback.generate_span_id()) if self._fallback is not None else random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        value = self._next(b"trace", 16)
        if value is not None:
            return value
        return int(self._fallback.generate_trace_id()) if self._fallback is not None else random.getrandbits(128) or 1
