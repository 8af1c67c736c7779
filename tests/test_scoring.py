"""score_step: the four signals, the sigmoid, the documented lexicon, range and determinism."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel import ReasonBlocks
from rb_otel.steering.scoring import ERROR_TERMS, HEDGE_TERMS, score_signals, score_step


def expected(h: float, length: float, e: float, n: float) -> float:
    raw = 0.30 * h + 0.25 * length + 0.25 * e + 0.20 * n
    return 1 / (1 + math.exp(-6 * (raw - 0.5)))


def test_empty_thought_scores_one_half() -> None:
    assert score_step("") == 0.5


def test_reasonblocks_exposes_score_step_as_staticmethod() -> None:
    assert ReasonBlocks.score_step("") == 0.5
    assert ReasonBlocks.score_step("maybe") == score_step("maybe")


@pytest.mark.parametrize("word", ["maybe", "not sure", "hmm", "reconsider"])
def test_documented_hedge_words_are_in_the_lexicon(word: str) -> None:
    assert word in HEDGE_TERMS
    hedge, _, _, _ = score_signals(f"{word} we look at it")
    assert hedge > 0


@pytest.mark.parametrize("word", ["error", "exception", "traceback", "failed"])
def test_documented_error_words_are_in_the_lexicon(word: str) -> None:
    assert word in ERROR_TERMS
    _, _, error, _ = score_signals(f"the build {word} again today")
    assert error > 0


def test_long_thought_of_hedges_errors_and_paths_scores_above_0_85() -> None:
    words = ["maybe", "not sure", "hmm", "reconsider", "error", "exception", "traceback", "failed"]
    paths = [f"src/pkg{i}/module{i}.py" for i in range(12)]
    text = " ".join(words[i % len(words)] if i % 3 else paths[i % len(paths)] for i in range(240))
    assert score_step(text) > 0.85


def test_signals_follow_the_documented_normalisation() -> None:
    # 10 words, 1 hedge ("maybe"), 1 error word ("failed"), 2 entities (a path and a dotted name).
    text = "maybe the parser failed in src/parse.py near config.load call now"
    hedge, length, error, entities = score_signals(text)
    assert hedge == pytest.approx(1.0)  # 1 / 10 * 10
    assert error == pytest.approx(1.0)
    assert length == pytest.approx(10 / 500)
    assert entities == pytest.approx(2 / 10)
    assert score_step(text) == pytest.approx(expected(hedge, length, error, entities))


def test_error_class_names_count_as_error_language() -> None:
    _, _, error, _ = score_signals("it raised ValidationError and " + "word " * 40)
    assert error == pytest.approx(min(1 / 44 * 10, 1.0))


def test_phrase_counts_once() -> None:
    hedge_phrase, *_ = score_signals("not sure " + "x " * 98)
    hedge_word, *_ = score_signals("maybe " + "x " * 99)
    assert hedge_phrase == pytest.approx(hedge_word)


def test_quoted_strings_and_apostrophes() -> None:
    _, _, _, with_quote = score_signals('the key "session_id" is missing')
    _, _, _, apostrophes = score_signals("I'm sure it's fine and don't worry")
    assert with_quote == pytest.approx(0.1)
    assert apostrophes == 0.0


def test_plain_short_text_is_easy_and_confused_text_is_hard() -> None:
    assert score_step("Reading the next file.") < 0.2
    confused = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again."
    assert score_step(confused) > 0.6


def test_non_string_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="expects a str"):
        score_step(None)  # type: ignore[arg-type]


def test_huge_text_is_scored() -> None:
    text = ("maybe the error is in src/x.py " * 350_000)[:10_000_000]
    assert 0.85 < score_step(text) <= 1.0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=2000))
def test_score_is_in_range_and_deterministic(text: str) -> None:
    score = score_step(text)
    assert 0.0 < score < 1.0
    assert score == score_step(text)
    assert all(0.0 <= s <= 1.0 for s in score_signals(text))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["maybe", "error", "src/a.py", "the", "plain", "word"]), min_size=1, max_size=80))
def test_score_matches_the_formula_on_its_signals(words: list[str]) -> None:
    text = " ".join(words)
    assert score_step(text) == pytest.approx(expected(*score_signals(text)))


def _reference_hits(words: list[str]) -> tuple[int, int]:
    """A plain left-to-right transcription of the lexicon rules, to check the optimised counter against."""
    from rb_otel.steering import scoring

    hedge = error = 0
    i = 0
    while i < len(words):
        matched = False
        for terms, kind in ((scoring.ERROR_TERMS, "e"), (scoring.HEDGE_TERMS, "h")):
            for term in sorted((t.split() for t in terms if len(t.split()) > 1), key=len, reverse=True):
                if words[i : i + len(term)] == term:
                    hedge, error = (hedge + 1, error) if kind == "h" else (hedge, error + 1)
                    i += len(term)
                    matched = True
                    break
            if matched:
                break
        if matched:
            continue
        w = words[i]
        if w in HEDGE_TERMS:
            hedge += 1
        elif w in ERROR_TERMS or w.endswith(("error", "errors", "exception", "exceptions")):
            error += 1
        i += 1
    return hedge, error


VOCAB = [
    "not",
    "sure",
    "maybe",
    "or",
    "i",
    "guess",
    "think",
    "try",
    "again",
    "let",
    "me",
    "timed",
    "out",
    "stack",
    "trace",
    "keyerror",
    "error",
    "the",
    "could",
    "be",
    "on",
    "second",
    "thought",
    "does",
    "work",
    "found",
    "exit",
    "code",
    "hmm",
    "fine",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(VOCAB), max_size=60))
def test_optimised_counter_matches_the_reference(words: list[str]) -> None:
    from rb_otel.steering.scoring.heuristic import _count_hits

    assert _count_hits(words) == _reference_hits(words)


def test_shared_tokenisation_cache_is_safe_across_threads() -> None:
    """Many threads scoring different thoughts at once get the same words as one thread does."""
    import sys
    import threading

    from rb_otel.steering.text import content_words, tokens

    texts = [f"Thread {i}: the KeyError in src/mod_{i}.py maybe comes from parse_{i}()" for i in range(16)]
    expected = {t: (tokens(t).words, content_words(t)) for t in texts}
    mismatches: list[str] = []

    def work(text: str) -> None:
        for _ in range(300):
            words = tokens(text).words
            if words != expected[text][0] or content_words(text) != expected[text][1]:
                mismatches.append(text)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible, so a torn read would show
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in texts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert mismatches == []


def test_signal_edges_that_a_mutation_would_move() -> None:
    from rb_otel.steering.scoring import score_signals

    assert score_signals("maybe")[0] == 1.0  # one word, one hedge: density 10/1, capped
    assert score_signals("maybe " + "word " * 19)[0] == pytest.approx(0.5)  # 1 hit in 20 words: 10/20
    assert score_signals("keyerror")[2] == 1.0 and score_signals("fine")[2] == 0.0  # class name, not a lexicon word
    # quoted strings count with only one kind of quote present, and add to the path count
    assert score_signals("see 'alpha beta' here")[3] == pytest.approx(0.1)
    assert score_signals("see `alpha beta` here")[3] == pytest.approx(0.1)
    assert score_signals("in src/a.py see 'alpha beta'")[3] == pytest.approx(0.2)  # a path + a quote
    # a matched phrase consumes its words; the scan goes on after it
    assert score_signals("not sure maybe " + "w " * 16)[0] == pytest.approx(2 * 10 / 20)


def test_caps_the_scan_and_the_type_error() -> None:
    from rb_otel.steering.scoring import score_signals

    assert score_signals("word " * 1000)[1] == 1.0  # length saturates at 500 words
    assert score_signals(" ".join(f"src/f{i}.py" for i in range(30)))[3] == 1.0  # entities saturate at 10
    # a candidate inside a matched phrase is skipped and the scan goes on: "try" inside "let me try again"
    assert score_signals("let me try again maybe " + "w " * 15)[0] == pytest.approx(2 * 10 / 20)
    with pytest.raises(TypeError, match="got int"):
        score_step(3)  # type: ignore[arg-type]
