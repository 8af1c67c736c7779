"""E-traces: pattern stores, embeddings and the shipped pattern library."""

from rb_otel.steering.etraces.embeddings import EmbeddingsLike, HashingEmbeddings
from rb_otel.steering.etraces.store import (
    DEFAULT_MIN_SIMILARITY,
    InMemoryPatternStore,
    Pattern,
    PatternStore,
    RetrievalQuery,
    load_default_library,
)

__all__ = [
    "DEFAULT_MIN_SIMILARITY",
    "EmbeddingsLike",
    "HashingEmbeddings",
    "InMemoryPatternStore",
    "Pattern",
    "PatternStore",
    "RetrievalQuery",
    "load_default_library",
]
