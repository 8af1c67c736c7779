"""Token saving, the pure parts (docs/experiments.md, "TokenSavingMiddleware"): tool-output compression, word
classifiers, loop signals.

``TokenSavingMiddleware`` (``rb_otel.integrations.langchain.token_saving``) applies these to an agent's history.
Everything here is a function of its arguments.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, cast

from rb_otel.steering.scoring.heuristic import score_step
from rb_otel.steering.text import STOPWORDS

__all__ = [
    "EARLY_EXIT_TEXT",
    "RatioClassifier",
    "WordClassifier",
    "compress_tool_output",
    "early_exit_fires",
    "heuristic_classifier",
    "keep_words",
    "loop_signals",
    "takes_keep_ratio",
]

#: The nudge ``TokenSavingMiddleware`` adds when the loop signals fire (ReasonBlocks' own default, docs/experiments.md,
#: "TokenSavingMiddleware").
EARLY_EXIT_TEXT = (
    "You appear to be stuck in a loop. Stop investigating and submit your current best answer now using whatever "
    "submission tool your task expects. Do not start another investigation."
)

#: ``(words) -> keep flags``, one per word (True keeps it). A classifier may also accept ``keep_ratio=``.
WordClassifier = Callable[[list[str]], list[bool]]


class RatioClassifier(Protocol):
    """A :data:`WordClassifier` that takes the share of words to keep (how a tier's ratio reaches it)."""

    def __call__(self, words: list[str], *, keep_ratio: float = ...) -> list[bool]: ...


def compress_tool_output(
    content: str, threshold_chars: int = 1800, head_chars: int = 900, tail_chars: int = 700
) -> str:
    """``content`` unchanged when it is at most ``threshold_chars`` long; else its head and tail around a marker:
    ``f"{head}\\n\\n[... {N} chars truncated ...]\\n\\n{tail}"`` with N the characters left out."""
    if len(content) <= threshold_chars:
        return content
    head, tail = content[:head_chars], content[len(content) - tail_chars :] if tail_chars else ""
    omitted = len(content) - len(head) - len(tail)
    return f"{head}\n\n[... {omitted} chars truncated ...]\n\n{tail}"


_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*[./_:(\[][\w./:()\[\]-]*|\d[\d.,:%-]*")


def _word_value(word: str) -> float:
    """How much a word carries, for the heuristic classifier: identifiers, paths and numbers most, stopwords least."""
    bare = word.strip(".,;:!?\"'()[]{}<>").lower()
    if not bare:
        return 0.0
    if _IDENTIFIER.fullmatch(word.strip(".,;:!?\"'")):
        return 3.0
    if bare in STOPWORDS:
        return 0.2
    if any(c.isupper() for c in word[1:]) or "_" in word:
        return 2.5
    return 1.0 + min(len(bare), 12) / 12.0


def heuristic_classifier(keep_ratio: float = 0.5) -> RatioClassifier:
    """A classifier without a model: keeps the ``keep_ratio`` most informative words (identifiers, paths, numbers,
    long content words first; stopwords last), in their original order. Deterministic."""

    def classify(words: list[str], *, keep_ratio: float = keep_ratio) -> list[bool]:
        keep = max(1, round(len(words) * keep_ratio)) if words else 0
        ranked = sorted(range(len(words)), key=lambda i: (-_word_value(words[i]), i))
        kept = set(ranked[:keep])
        return [i in kept for i in range(len(words))]

    return classify


def keep_words(text: str, classifier: WordClassifier, *, keep_ratio: float, window_words: int = 50) -> str:
    """``text`` with only the words ``classifier`` keeps, classified ``window_words`` at a time. A classifier that
    takes ``keep_ratio=`` is given it; one that answers with the wrong number of flags keeps its window whole."""
    words = text.split()
    kept: list[str] = []
    classify: WordClassifier = classifier
    if takes_keep_ratio(classifier):
        classify = functools.partial(cast(RatioClassifier, classifier), keep_ratio=keep_ratio)
    for start in range(0, len(words), window_words):
        window = words[start : start + window_words]
        flags = classify(window)
        if len(flags) != len(window):
            kept.extend(window)
            continue
        kept.extend(w for w, keep in zip(window, flags, strict=True) if keep)
    return " ".join(kept)


def takes_keep_ratio(classifier: WordClassifier) -> bool:
    """Whether ``classifier`` accepts a ``keep_ratio=`` keyword (then a tier's ratio is passed to it)."""
    try:
        parameters = inspect.signature(classifier).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable without a signature: words only
        return False
    return any(p.name == "keep_ratio" or p.kind is p.VAR_KEYWORD for p in parameters)


def loop_signals(steps: Sequence[Mapping[str, Any]], *, window: int = 10) -> dict[str, float]:
    """rb-otel's ``signals_fn`` (ReasonBlocks ships none): three signals in [0, 1] from ``build_steps_from_messages``.

    * ``streak``: the current run of consecutive steps that repeat an earlier (action, input), over ``window``.
    * ``hedge``: the mean ``score_step`` difficulty of the last five thoughts (hedging, errors, repetition).
    * ``diversity``: distinct (action, input) pairs among the last ``window`` steps, over ``window``.

    So the early exit fires on a long exact loop (``streak > 0.7``: 8 repeats in a row) or on hedging while
    sprawling (``hedge > 0.6 and diversity > 0.5``).
    """
    keys = [(str(s.get("action", "")), repr(s.get("action_input", {}))) for s in steps]
    streak = 0
    for i in range(len(keys) - 1, -1, -1):
        if keys[i][0] and keys[i] in keys[:i]:
            streak += 1
        else:
            break
    thoughts = [str(s.get("thought", "")) for s in steps[-5:]]
    hedge = sum(score_step(t) for t in thoughts) / len(thoughts) if thoughts else 0.0
    recent = keys[-window:]
    diversity = len({k for k in recent if k[0]}) / window if recent else 0.0
    return {"streak": min(streak / window, 1.0), "hedge": hedge, "diversity": min(diversity, 1.0)}


def early_exit_fires(signals: Mapping[str, float]) -> bool:
    """ReasonBlocks' rule (docs/experiments.md, "TokenSavingMiddleware"): ``streak > 0.7 or (hedge > 0.6 and diversity
    > 0.5)``; a missing signal counts as 0."""
    streak, hedge, diversity = (float(signals.get(k, 0.0) or 0.0) for k in ("streak", "hedge", "diversity"))
    return streak > 0.7 or (hedge > 0.6 and diversity > 0.5)
