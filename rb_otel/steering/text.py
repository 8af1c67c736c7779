"""Small, deterministic text helpers shared by the local monitors and the embedded pattern store."""

from __future__ import annotations

import re
from itertools import chain
from typing import Generic, NamedTuple, TypeVar

from rb_otel.steering.memo import MEMO_MAX_WORD_CHARS, Memo

__all__ = [
    "MEMO_MAX_WORD_CHARS",
    "Memo",
    "Tokens",
    "bounded_view",
    "content_words",
    "jaccard",
    "names_a_path",
    "stem",
    "text_view",
    "tokens",
]

_CONTENT_WORD = re.compile(r"\w{3,}")
_T = TypeVar("_T")
#: Monitors read at most this much of one text, so a 10 MB thought costs the same as a long one.
MAX_TEXT_CHARS = 4000
#: What the heuristic scorer and the monitors read of a longer thought: its first and last characters, joined by a
#: newline (``MAX_TEXT_CHARS`` in all): the start states the plan, the end the decision the step acts on.
TEXT_VIEW = (2000, MAX_TEXT_CHARS - 2001)


def bounded_view(text: str, head: int, tail: int) -> str:
    """``text`` when it has at most ``head + tail`` characters, else its first ``head`` and last ``tail``
    characters joined by a newline: what a scorer reads of a long text, so its cost has a bound and the end of a
    long output (where test summaries and errors are) is still seen."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]}\n{text[len(text) - tail :]}" if tail else text[:head]


class _Last(Generic[_T]):
    """The result for the most recent input string, keyed by the string's identity, so a hit is exact. Input and
    result live in ONE tuple: reading or replacing one attribute is atomic under the GIL, reading two would not
    be (another thread could swap in between)."""

    __slots__ = ("entry",)

    def __init__(self, empty: _T) -> None:
        self.entry: tuple[str | None, _T] = (None, empty)


# The scorer and the monitors read the view of the same thought one after the other: the same string object back,
# so the tokens of it are cached too (``tokens`` is keyed by identity).
_LAST_VIEW: _Last[str] = _Last("")


def text_view(text: str) -> str:
    """:func:`bounded_view` of ``text`` by :data:`TEXT_VIEW`: ``text`` itself when it has at most
    ``MAX_TEXT_CHARS`` characters, else its first 2,000 and last 1,999 (the same object for the same input
    object, called twice in a row)."""
    if len(text) <= MAX_TEXT_CHARS:
        return text
    cached_text, cached = _LAST_VIEW.entry
    if cached_text is text:
        return cached
    view = bounded_view(text, *TEXT_VIEW)
    _LAST_VIEW.entry = (text, view)
    return view


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


def _strip_suffix(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


_STEMS: Memo[str] = Memo(_strip_suffix, name="text.stem")


def stem(word: str) -> str:
    """A crude suffix stripper: enough to make "timeouts"/"timeout" and "checking"/"checked" agree."""
    return _STEMS[word]


#: Punctuation stripped from both ends of a whitespace-separated token.
PUNCTUATION = "\"'`.,;:!?()[]{}<>*"


class Tokens(NamedTuple):
    """A text lower-cased, and its whitespace-separated words with surrounding punctuation stripped."""

    lowered: str
    words: list[str]


# The scorer and the monitors read the same thought one after the other: tokenise it once.
_LAST: _Last[Tokens] = _Last(Tokens("", []))


def _strip_punctuation(token: str) -> str:
    return token.strip(PUNCTUATION)


_STRIPPED: Memo[str] = Memo(_strip_punctuation, name="text.strip_punctuation")


def _split(lowered: str) -> list[str]:
    return list(filter(None, map(_STRIPPED.__getitem__, lowered.split())))


def tokens(text: str) -> Tokens:
    """Tokenise ``text`` (cached for the most recent string object)."""
    cached_text, cached = _LAST.entry
    if cached_text is text:
        return cached
    lowered = text.lower()
    result = Tokens(lowered, _split(lowered))
    _LAST.entry = (text, result)
    return result


def _token_stems(token: str) -> tuple[str, ...]:
    # A token holds whole ``\w`` runs (whitespace is never one, and the stripped punctuation is not ``\w``), so
    # the union over a text's tokens is exactly the content words of the text.
    return tuple(_STEMS[w] for w in _CONTENT_WORD.findall(token) if w not in STOPWORDS)


#: token -> the stems of its content words (``()`` for a stop word or a short word).
_TOKEN_STEMS: Memo[tuple[str, ...]] = Memo(_token_stems, name="text.token_stems")


def content_words(text: str) -> frozenset[str]:
    """Stemmed, lower-cased words of at least 3 characters that are not stop words.

    Words are runs of letters, digits and ``_``, so ``src/auth.py`` gives ``src``, ``auth``.
    """
    text = text_view(text)
    cached_text, cached = _LAST.entry
    words = cached.words if cached_text is text else _split(text.lower())  # the scorer usually tokenised it
    return frozenset(chain.from_iterable(map(_TOKEN_STEMS.__getitem__, words)))


_DOTTED = re.compile(r"[a-z_][\w-]*(?:\.\w+)+")


def names_a_path(word: str) -> bool:
    """A word with a slash (``src/a``, not ``/`` alone) or a dotted name starting with a letter (``auth.py``,
    ``os.path.join``; ``3.14`` is not one): what the scorer counts as an entity and the monitors as a path."""
    return ("/" in word and len(word) > 1) or ("." in word and _DOTTED.fullmatch(word) is not None)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a & b| / |a | b|, and 0.0 when both are empty."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)
