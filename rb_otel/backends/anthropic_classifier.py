"""``make_anthropic_classifier``: a word classifier for perplexity compression, asking a cheap Anthropic model.

A prompt-only imitation of LLMLingua-2 (docs/experiments.md, "TokenSavingMiddleware"): the model is given the words as
a JSON array and answers with
one 0/1 flag per word, keeping about the target share. On **any** failure (an HTTP error, a timeout, a rate
limit, an answer that is not a list of the right length) the words go to
:func:`rb_otel.steering.token_saving.heuristic_classifier` instead, so compression never stops the agent. The
client is any object with ``messages.create(...)`` shaped like the Anthropic SDK's (sync).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rb_otel.steering.token_saving import RatioClassifier, heuristic_classifier

__all__ = ["make_anthropic_classifier"]

_log = logging.getLogger("rb_otel.backends")

_SYSTEM = (
    "You compress text for another language model. You get a JSON array of words. Answer with only a JSON array "
    "of the same length holding 1 (keep) or 0 (drop) for each word, keeping about {ratio:.0%} of the words: keep "
    "names, identifiers, paths, numbers, errors and the words that carry meaning; drop filler."
)


def _flags(response: Any, expected: int) -> list[bool]:
    """The keep flags in a Messages API response; ``ValueError`` when it holds none of the right length."""
    text = "".join(getattr(block, "text", "") for block in getattr(response, "content", None) or [])
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end < start:
        raise ValueError("the answer holds no JSON array")
    flags = json.loads(text[start : end + 1])
    if not isinstance(flags, list) or len(flags) != expected or not all(f in (0, 1, True, False) for f in flags):
        raise ValueError(f"expected {expected} flags of 0 or 1")
    return [bool(f) for f in flags]


def make_anthropic_classifier(
    client: Any, model: str = "claude-haiku-4-5-20251001", target_keep_ratio: float = 0.5
) -> RatioClassifier:
    """A :data:`~rb_otel.steering.token_saving.WordClassifier` backed by ``client`` (``anthropic.Anthropic``);
    ``TokenSavingMiddleware`` passes each tier's ``keep_ratio``, else ``target_keep_ratio`` applies."""
    if not 0.0 < target_keep_ratio <= 1.0:
        raise ValueError(f"target_keep_ratio must be in (0, 1], got {target_keep_ratio!r}")
    fallback = heuristic_classifier(target_keep_ratio)

    def classify(words: list[str], *, keep_ratio: float = target_keep_ratio) -> list[bool]:
        if not words:
            return []
        try:
            response = client.messages.create(
                model=model,
                max_tokens=max(16, 3 * len(words)),
                system=_SYSTEM.format(ratio=keep_ratio),
                messages=[{"role": "user", "content": json.dumps(words)}],
            )
            return _flags(response, len(words))
        except Exception as exc:  # any failure: the heuristic keeps compression going
            _log.warning("word classifier fell back to the heuristic (%s)", type(exc).__name__)
            return fallback(words, keep_ratio=keep_ratio)

    return classify
