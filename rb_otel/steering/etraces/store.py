"""Pattern stores: the ``PatternStore`` protocol and the embedded in-process vector index (docs/steering.md,
"E-traces").

The embedded store keeps one normalised matrix per tier and answers a query with one matrix-vector product,
so a library of 1,000 patterns costs tens of microseconds per query. Similarity gates are per tier; the server
gates of ReasonBlocks (E1 0.8, E2 0.7) are calibrated for OpenAI embeddings, so the embedded store's defaults
are calibrated for :class:`HashingEmbeddings` instead and can be changed with ``min_similarity=``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rb_otel.steering.calls import RemoteCallObserver
from rb_otel.steering.etraces.embeddings import EmbeddingsLike, HashingEmbeddings
from rb_otel.types import ETrace

__all__ = [
    "DEFAULT_MIN_SIMILARITY",
    "InMemoryPatternStore",
    "Pattern",
    "PatternStore",
    "RetrievalQuery",
    "load_default_library",
]

TIERS = ("e1", "e2", "e3")
DEFAULT_MIN_SIMILARITY: Mapping[str, float] = {"e1": 0.30, "e2": 0.12, "e3": 0.0}


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    """A ``/traces/retrieve`` request (docs/steering.md, "E-traces"): ``context`` is ``""`` for the E3 scroll-all."""

    tier: str
    context: str = ""
    top_k: int = 5
    model: str = ""
    failure_type: str | None = None
    step: int = 0
    deadline: float | None = None
    observer: RemoteCallObserver | None = None

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise ValueError(f"tier must be one of {TIERS}, got {self.tier!r}")
        if not 1 <= self.top_k <= 50:
            raise ValueError(f"top_k must be within 1..50, got {self.top_k}")


@runtime_checkable
class PatternStore(Protocol):
    """Retrieves steering patterns. Called on the agent's thread at most once per tier per run.

    May raise; the caller treats a failure as an empty result and logs it.
    """

    def retrieve(self, query: RetrievalQuery) -> list[ETrace]: ...


@dataclass(frozen=True, slots=True)
class Pattern:
    """One stored pattern. ``text`` (what is embedded) defaults to the joined ``fields`` values."""

    tier: str
    fields: Mapping[str, Any]
    pattern_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    failure_type: str | None = None
    model_family: str = ""
    gate_threshold: float = 0.0
    source_trace_id: str | None = None
    text: str = ""

    def __post_init__(self) -> None:
        if self.tier not in TIERS:
            raise ValueError(f"pattern tier must be one of {TIERS}, got {self.tier!r}")
        if not isinstance(self.fields, Mapping) or not self.fields:
            raise ValueError("pattern fields must be a non-empty mapping")

    @property
    def embedding_text(self) -> str:
        return self.text or " ".join(_flatten(v) for v in self.fields.values())


def _flatten(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return " ".join(_flatten(v) for v in value.values())
    if isinstance(value, Iterable):
        return " ".join(_flatten(v) for v in value)
    return str(value)


class _TierIndex:
    """One tier's patterns plus the arrays a query needs (rebuilt lazily after an ``add``)."""

    def __init__(self) -> None:
        self.patterns: list[Pattern] = []
        self.matrix: npt.NDArray[np.float32] | None = None
        self.gates: npt.NDArray[np.float64] = np.zeros(0)
        self.failure_types: npt.NDArray[np.object_] = np.zeros(0, dtype=object)


class InMemoryPatternStore:
    """An embedded vector index over :class:`Pattern` objects; thread-safe; the offline default store.

    ``embeddings`` is any LangChain ``Embeddings`` (or :class:`HashingEmbeddings`, the default).
    """

    def __init__(
        self,
        patterns: Iterable[Pattern] = (),
        *,
        embeddings: EmbeddingsLike | None = None,
        min_similarity: Mapping[str, float] | None = None,
    ) -> None:
        self.embeddings: EmbeddingsLike = embeddings or HashingEmbeddings()
        self.min_similarity = {**DEFAULT_MIN_SIMILARITY, **(min_similarity or {})}
        self._tiers = {tier: _TierIndex() for tier in TIERS}
        self._lock = threading.Lock()
        self.add(patterns)

    def __len__(self) -> int:
        return sum(len(t.patterns) for t in self._tiers.values())

    def add(self, patterns: Iterable[Pattern]) -> None:
        """Add patterns; they are embedded lazily, on the next query of their tier."""
        with self._lock:
            for pattern in patterns:
                index = self._tiers[pattern.tier]
                index.patterns.append(pattern)
                index.matrix = None

    def add_e1_pattern(self, fields: Mapping[str, Any], **kwargs: Any) -> Pattern:
        """Add an instance-level (E1) pattern, e.g. a lesson distilled from one of your own runs."""
        pattern = Pattern(tier="e1", fields=dict(fields), **kwargs)
        self.add([pattern])
        return pattern

    def _embed(self, text: str) -> npt.NDArray[np.float64]:
        if isinstance(self.embeddings, HashingEmbeddings):
            return self.embeddings.vector(text)
        vec = np.asarray(self.embeddings.embed_query(text), dtype=np.float64)
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def _build(self, index: _TierIndex) -> npt.NDArray[np.float32]:
        matrix = index.matrix
        if matrix is None:
            with self._lock:
                if index.matrix is None:
                    index.gates = np.array([p.gate_threshold for p in index.patterns], dtype=np.float64)
                    index.failure_types = np.array([p.failure_type for p in index.patterns], dtype=object)
                    # float32 halves the memory traffic of the one matrix-vector product per query
                    index.matrix = np.vstack([self._embed(p.embedding_text) for p in index.patterns]).astype(np.float32)
                matrix = index.matrix
        return matrix

    def retrieve(self, query: RetrievalQuery) -> list[ETrace]:
        """Top ``query.top_k`` patterns of the tier; E3 (or an empty context) lists them in stored order."""
        index = self._tiers[query.tier]
        patterns = index.patterns
        if not patterns:
            return []
        if query.tier == "e3" or not query.context:
            chosen = [p for p in patterns if _matches(p, query.failure_type)][: query.top_k]
            return [_to_etrace(p, 0.0) for p in chosen]
        sims = self._build(index) @ self._embed(query.context).astype(np.float32)
        valid = sims >= np.maximum(index.gates, self.min_similarity.get(query.tier, 0.0))
        if query.failure_type is not None:
            valid &= index.failure_types == query.failure_type
        hits = np.flatnonzero(valid)
        if len(hits) > query.top_k:  # partial selection first: O(n) instead of sorting every hit
            hits = hits[np.argpartition(-sims[hits], query.top_k - 1)[: query.top_k]]
        best = hits[np.argsort(-sims[hits], kind="stable")]
        return [_to_etrace(patterns[i], float(sims[i])) for i in best]


def _matches(pattern: Pattern, failure_type: str | None) -> bool:
    return failure_type is None or pattern.failure_type == failure_type


def _to_etrace(pattern: Pattern, similarity: float) -> ETrace:
    return ETrace(
        tier=pattern.tier,
        similarity=round(similarity, 6),
        pattern_id=pattern.pattern_id,
        fields=dict(pattern.fields),
        failure_type=pattern.failure_type,
        model_family=pattern.model_family,
        source_trace_id=pattern.source_trace_id,
    )


def load_default_library() -> list[Pattern]:
    """The patterns shipped with rb_otel: standing E3 rules and E2 patterns per failure type."""
    raw = json.loads(resources.files("rb_otel.steering.etraces").joinpath("library.json").read_text("utf-8"))
    return [
        Pattern(
            tier=item["tier"],
            fields=item["fields"],
            pattern_id=item["pattern_id"],
            failure_type=item.get("failure_type"),
            model_family=item.get("model_family", ""),
        )
        for item in raw["patterns"]
    ]
