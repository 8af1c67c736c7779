"""A dependency-free, deterministic embedding: signed feature hashing of stemmed word uni- and bigrams.

It implements the two methods of LangChain's ``Embeddings`` interface (``embed_documents``, ``embed_query``), so
any real LangChain embedding model can replace it in a pattern store, and it downloads nothing.
"""

from __future__ import annotations

import itertools
import re
import zlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from rb_otel.steering.memo import BoundedMemo
from rb_otel.steering.text import MAX_TEXT_CHARS, STOPWORDS, stem

__all__ = ["EmbeddingsLike", "HashingEmbeddings"]

_WORD = re.compile(r"[a-z0-9_]+")
_MAX_CACHED_FEATURES = 65_536


@runtime_checkable
class EmbeddingsLike(Protocol):
    """The subset of ``langchain_core.embeddings.Embeddings`` the pattern stores use."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class HashingEmbeddings:
    """Signed hashing of stemmed unigrams and bigrams into ``dimensions`` buckets, L2-normalised.

    Texts with no words embed to the zero vector. Deterministic across processes (CRC-32, not ``hash()``).
    """

    def __init__(self, dimensions: int = 256) -> None:
        if dimensions < 16:
            raise ValueError(f"dimensions must be at least 16, got {dimensions}")
        self.dimensions = dimensions
        self._features: BoundedMemo[str, tuple[int, float]] = BoundedMemo("embeddings.features", _MAX_CACHED_FEATURES)

    def __repr__(self) -> str:
        return f"HashingEmbeddings(dimensions={self.dimensions})"

    def _bucket(self, feature: str) -> tuple[int, float]:
        hit = self._features.get(feature)
        if hit is None:
            h = zlib.crc32(feature.encode("utf-8"))
            hit = self._features.put(feature, (h % self.dimensions, 1.0 if h & 0x80000000 else -1.0))
        return hit

    def vector(self, text: str) -> npt.NDArray[np.float64]:
        """The embedding of ``text`` as a numpy array (what the embedded store uses directly)."""
        words = [stem(w) for w in _WORD.findall(text[:MAX_TEXT_CHARS].lower()) if w not in STOPWORDS]
        features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        if not features:
            return np.zeros(self.dimensions)
        buckets = [self._bucket(f) for f in features]
        vec = np.bincount([b[0] for b in buckets], weights=[b[1] for b in buckets], minlength=self.dimensions).astype(
            np.float64
        )
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self.vector(text)]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]
