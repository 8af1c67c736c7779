"""Every memo rb_otel keeps, in one place: bounded, named, and cleared by :func:`clear_caches`.

Hot paths remember what they computed (a word's stem, a model's identity, a rendered pattern, a run's monitor
features) because recomputing costs more than looking up. Each memo here has a plain definition beside it (the
function it remembers) and is checked against it by property tests, so a hit is always what a miss would
compute. Three shapes:

* :class:`Memo`: word -> value, computed on a miss (``memo[word]``), for per-word work at C speed.
* :class:`BoundedMemo`: hashable key -> value, filled by the caller.
* :class:`IdentityMemo`: value computed from an object, keyed by the object's identity (plus hashable extras).
  The entry holds the object, so its ``id`` cannot be reused while the entry lives, and a hit is checked with
  ``is``.

All are bounded (a full memo starts afresh, or drops its oldest entry), safe to share between threads (a race
at worst computes a value twice), and registered by name: :func:`cache_sizes` reports them, :func:`clear_caches`
empties them (tests, long-lived processes after a configuration change).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["MEMO_MAX_WORD_CHARS", "BoundedMemo", "IdentityMemo", "Memo", "cache_sizes", "clear_caches"]

K = TypeVar("K", bound=Hashable)
Obj = TypeVar("Obj")
V = TypeVar("V")

#: Words longer than this are computed every time, never kept: a memo must not pin a pasted blob in memory.
MEMO_MAX_WORD_CHARS = 48

#: Every live memo by id (a ``Memo`` is a dict, so unhashable: a WeakSet cannot hold it). Never keeps one alive.
_LIVE: weakref.WeakValueDictionary[int, Memo[object] | BoundedMemo[Hashable, object] | IdentityMemo[object, object]]
_LIVE = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


def _register(memo: Memo[V] | BoundedMemo[K, V] | IdentityMemo[Obj, V]) -> None:
    with _LIVE_LOCK:
        _LIVE[id(memo)] = memo  # type: ignore[assignment]


def clear_caches() -> None:
    """Empty every memo in the process (their values are recomputed on next use; nothing else changes)."""
    with _LIVE_LOCK:
        memos = list(_LIVE.values())
    for memo in memos:
        memo.clear()


def cache_sizes() -> dict[str, int]:
    """Entries held per memo name (memos of one name, e.g. one per monitor backend, are summed)."""
    with _LIVE_LOCK:
        memos = list(_LIVE.values())
    sizes: dict[str, int] = {}
    for memo in memos:
        sizes[memo.name] = sizes.get(memo.name, 0) + len(memo)
    return sizes


class Memo(dict[str, V]):
    """A word -> value table that computes a missing value with ``compute``; bounded in entries and key size.

    ``map(memo.__getitem__, words)`` runs at C speed for every word seen before (most words of an agent's
    thoughts are). At most ``limit`` words of at most :data:`MEMO_MAX_WORD_CHARS` characters are kept, and a full
    memo starts afresh, so it follows a drifting vocabulary. ``memo[word] == compute(word)`` always.
    """

    __slots__ = ("__weakref__", "_compute", "_limit", "name")

    def __init__(self, compute: Callable[[str], V], limit: int = 16_384, *, name: str = "") -> None:
        super().__init__()
        self._compute = compute
        self._limit = limit
        self.name = name or getattr(compute, "__qualname__", "memo")
        _register(self)

    def __missing__(self, word: str) -> V:
        value = self._compute(word)
        if len(word) <= MEMO_MAX_WORD_CHARS:
            if len(self) >= self._limit:
                self.clear()
            self[word] = value
        return value


class BoundedMemo(Generic[K, V]):
    """Hashable key -> value, at most ``limit`` entries; ``put`` into a full memo starts it afresh."""

    __slots__ = ("__weakref__", "_entries", "_limit", "name")

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self._limit = limit
        self._entries: dict[K, V] = {}
        _register(self)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def put(self, key: K, value: V) -> V:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = value
        return value

    def clear(self) -> None:
        self._entries.clear()


class IdentityMemo(Generic[Obj, V]):
    """A value per object (and hashable ``extra`` key parts), keyed by ``id`` and checked with ``is``.

    For objects that are unhashable or costly to hash and that repeat by identity (a chat model instance, the
    agent's system message, a run's step list). At most ``limit`` entries; the oldest is dropped first.
    """

    __slots__ = ("__weakref__", "_entries", "_limit", "_lock", "name")

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self._limit = limit
        self._entries: dict[tuple[int, Hashable], tuple[Obj, V]] = {}
        self._lock = threading.Lock()
        _register(self)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, obj: Obj, extra: Hashable = None) -> V | None:
        """The value remembered for this very object (and ``extra``), else ``None``."""
        hit = self._entries.get((id(obj), extra))
        if hit is not None and hit[0] is obj:
            return hit[1]
        return None

    def put(self, obj: Obj, value: V, extra: Hashable = None) -> V:
        with self._lock:
            self._entries[(id(obj), extra)] = (obj, value)
            while len(self._entries) > self._limit:
                del self._entries[next(iter(self._entries))]
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
