"""Small, deterministic text helpers shared by the local monitors and the embedded pattern store."""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Tokens", "content_words", "jaccard", "stem", "tokens"]

_CONTENT_WORD = re.compile(r"\w{3,}")
#: Monitors read at most this much of one text, so a 10 MB thought costs the same as a long one.
MAX_TEXT_CHARS = 4000

STOPWORDS = frozenset(
    (
        "a an the and or but if then else of to in on at by for with from into onto as is are was were be "
        "been being it its this that these those there here i me my we our you your he she they them their "
        "what which who whom do does did done doing have has had having not no so too very can could should "
        "would will shall may might must just also than about over under again further once all any both each "
        "few more most other some such only own same let lets now use using used get got make made file line"
    ).split()
)

_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "ly", "s")


_STEMS: dict[str, str] = {}
_MAX_STEMS = 100_000


def stem(word: str) -> str:
    """A crude suffix stripper: enough to make "timeouts"/"timeout" and "checking"/"checked" agree."""
    hit = _STEMS.get(word)
    if hit is not None:
        return hit
    result = word
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            result = word[: -len(suffix)]
            break
    if len(_STEMS) < _MAX_STEMS:  # bounded: vocabularies are open-ended
        _STEMS[word] = result
    return result


#: Punctuation stripped from both ends of a whitespace-separated token.
PUNCTUATION = "\"'`.,;:!?()[]{}<>*"


class Tokens(NamedTuple):
    """A text lower-cased, and its whitespace-separated words with surrounding punctuation stripped."""

    lowered: str
    words: list[str]


class _LastTokens:
    # The scorer and the monitors read the same thought one after the other: tokenise it once. Keyed by the
    # identity of the string, so a hit is exact. Text and tokens live in ONE tuple: reading or replacing one
    # attribute is atomic under the GIL, reading two would not be (another thread could swap in between).
    __slots__ = ("entry",)

    def __init__(self) -> None:
        self.entry: tuple[str | None, Tokens] = (None, Tokens("", []))


_LAST = _LastTokens()


def tokens(text: str) -> Tokens:
    """Tokenise ``text`` (cached for the most recent string object)."""
    cached_text, cached = _LAST.entry
    if cached_text is text:
        return cached
    lowered = text.lower()
    result = Tokens(lowered, [w for t in lowered.split() if (w := t.strip(PUNCTUATION))])
    _LAST.entry = (text, result)
    return result


def content_words(text: str) -> frozenset[str]:
    """Stemmed, lower-cased words of at least 3 characters that are not stop words.

    Words are runs of letters, digits and ``_``, so ``src/auth.py`` gives ``src``, ``auth``; one regex pass and
    set operations, which run at C speed.
    """
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS]
    cached_text, cached = _LAST.entry
    lowered = cached.lowered if cached_text is text else text.lower()  # the scorer usually lowered it already
    found = set(_CONTENT_WORD.findall(lowered))
    found -= STOPWORDS
    get = _STEMS.get
    return frozenset([get(word) or stem(word) for word in found])


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b|, and 0.0 when both are empty."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)
