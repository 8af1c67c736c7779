"""The steering core's fast paths (memoised word tests, C-speed ``map``/``filter``, tuned regexes, early exits)
give exactly what the plain definitions give. Each test states the definition as a straightforward reference."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.steering import fsm, text
from rb_otel.steering.monitors import features, v1
from rb_otel.steering.monitors.features import StepFeatures
from rb_otel.steering.scoring import heuristic as scoring

# Letters, digits, "_", the stripped punctuation, path and quote characters, whitespace, and non-ASCII letters and
# digits whose lower-casing or \w-ness is unusual ("İ" lowers to two characters, "²" is a digit, "\u00a0" a space).
ALPHABET = "abcdeiostxyz_019 \n\t\u00a0./-'\"`,;:!?()[]{}<>*=éİ²ß"
texts = st.text(alphabet=ALPHABET, max_size=200)


def _reference_words(raw: str) -> list[str]:
    return [w for t in raw.lower().split() if (w := t.strip(text.PUNCTUATION))]


def _reference_content_words(raw: str) -> frozenset[str]:
    found = set(re.findall(r"\w{3,}", raw[: text.MAX_TEXT_CHARS].lower())) - text.STOPWORDS
    return frozenset(text._strip_suffix(w) for w in found)


@settings(max_examples=500, deadline=None)
@given(texts)
def test_tokens_are_the_stripped_whitespace_words(raw: str) -> None:
    assert text.tokens(raw + "").words == _reference_words(raw)  # + "" : a fresh object, never a cache hit


@settings(max_examples=500, deadline=None)
@given(texts, st.booleans())
def test_content_words_from_tokens_or_from_scratch_match_the_definition(raw: str, tokenised_first: bool) -> None:
    if tokenised_first:
        text.tokens(raw)  # content_words then reuses the scorer's words
    assert text.content_words(raw) == _reference_content_words(raw)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_quoted_strings_regex_matches_the_plain_pattern(raw: str) -> None:
    plain = r"\"[^\"\n]{1,200}\"|(?<!\w)'[^'\n]{1,200}'(?!\w)|`[^`\n]{1,200}`"
    assert scoring._QUOTED.findall(raw) == re.findall(plain, raw)


CLAIM_PLAIN = r"\b([a-z_][\w.]{2,}) (?:is|are|was|were)( not|n't)? (?:in |the |a |an |at )*([a-z_][\w.]{2,})"
claim_parts = st.sampled_from(
    ["is", "are", "was", "were", "not", "n't", "the", "in", "foo", "x.y", "_a", "3a", " ", ".", "(", "é", "²", "\t"]
)


@settings(max_examples=800, deadline=None)
@given(st.lists(claim_parts), st.sampled_from([" ", ""]))
def test_claims_are_the_plain_patterns_matches(parts: list[str], sep: str) -> None:
    raw = sep.join(parts) + " " + "".join(parts)  # dense in verbs: overlapping and adjacent candidate claims
    assert features._claim_matches(raw) == re.findall(CLAIM_PLAIN, raw)


@settings(max_examples=300, deadline=None)
@given(texts)
def test_claims_in_any_text_are_the_plain_patterns_matches(raw: str) -> None:
    assert features._claim_matches(raw) == re.findall(CLAIM_PLAIN, raw)


def test_claims_in_real_thoughts() -> None:
    thought = "the handler is not the cause; numpy_handler.py is fine and pixel_data was missing."
    assert features._claims(thought) == {
        ("handler", "cause", True),
        ("numpy_handler.py", "fine", False),
        ("pixel_data", "missing", False),  # a trailing "." is not part of the predicate
    }


@settings(max_examples=300, deadline=None)
@given(texts)
def test_entities_and_paths_match_their_definitions(raw: str) -> None:
    lowered = raw.lower()
    words = _reference_words(raw)
    dotted = re.compile(r"[a-z_][\w-]*(?:\.\w+)+")
    expected_entities = sum(
        1 for w in words if ("/" in w and len(w) > 1) or ("/" not in w and "." in w and dotted.fullmatch(w))
    )
    quotes = len(scoring._QUOTED.findall(lowered)) if any(q in lowered for q in "\"'`") else 0
    assert scoring._count_entities(words, lowered) == expected_entities + quotes

    stripped = [w for t in lowered.split() if (w := t.strip("\"'`.,;:!?()[]{}<>"))]
    expected_paths = {w for w in stripped if ("/" in w and len(w) > 1) or ("." in w and dotted.fullmatch(w))}
    assert features._paths(lowered) == expected_paths


def test_memo_computes_misses_once_and_stays_bounded() -> None:
    calls: list[str] = []

    def shout(word: str) -> str:
        calls.append(word)
        return word.upper()

    memo = text.Memo(shout, limit=3)
    assert [memo[k] for k in ("a", "a", "b")] == ["A", "A", "B"]
    assert calls == ["a", "b"]  # the second "a" was a hit
    for i in range(100):
        assert memo[f"w{i}"] == f"W{i}"
        assert len(memo) <= 3
    blob = "x" * (text.MEMO_MAX_WORD_CHARS + 1)
    assert memo[blob] == blob.upper() and blob not in memo  # long words are computed, never kept
    assert memo.get("never seen") is None  # .get never computes


def test_a_huge_token_is_scored_without_being_kept() -> None:
    blob = "y" * 1_000_000  # a pasted blob with no whitespace: one huge token
    assert 0.0 < scoring.score_step(f"see {blob} error") < 1.0
    tables = (text._STRIPPED, text._TOKEN_STEMS, text._STEMS, scoring._CANDIDATES, scoring._ENTITY_WORDS)
    assert all(len(key) <= text.MEMO_MAX_WORD_CHARS for table in tables for key in table)


def _feature(
    action: str, paths: frozenset[str] = frozenset(), flags: frozenset[str] = frozenset(), **words: frozenset[str]
) -> StepFeatures:
    return StepFeatures(
        action=action,
        thought_words=words.get("thought", frozenset()),
        input_words=words.get("input", frozenset()),
        paths=paths,
        declares_done="done" in flags,
        recaps=False,
        announces_switch=False,
        retractions=0,
        claims=frozenset(),
        is_edit="edit" in flags,
        is_test="test" in flags,
        is_read="read" in flags,
        is_submit="submit" in flags,
        is_error=False,
    )


small_sets = st.frozensets(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"]), max_size=4)
steps = st.builds(
    lambda action, paths, thought, inp: _feature(action, paths, thought=thought, input=inp),
    st.sampled_from(["", "open", "edit", "python", "grep", "ls"]),
    st.frozensets(st.sampled_from(["a.py", "b/c", "d.txt", "e/f.py"]), max_size=2),
    small_sets,
    small_sets,
)


def _reference_late_sprawl(window: list[StepFeatures]) -> float:
    acting = [f for f in window if f.action]
    if len(acting) < 9:
        return 0.0
    cut = len(acting) * 2 // 3
    new_tools = {f.action for f in acting[cut:]} - {f.action for f in acting[:cut]}
    new_paths = set().union(*(f.paths for f in acting[cut:])) - set().union(*(f.paths for f in acting[:cut]))
    return min((len(new_tools) + len(new_paths) / 2.0) / 3.0, 1.0)


def _reference_cyclic_compression(window: list[StepFeatures]) -> float:
    recent = window[-6:]
    cycles = sum(1 for f in recent if f.recaps)
    for i, current in enumerate(recent):
        if len(current.thought_words) >= 5 and any(
            (e.action, e.input_words) == (current.action, current.input_words)
            and len(current.thought_words & e.thought_words) / len(current.thought_words | e.thought_words) >= 0.6
            for e in recent[max(0, i - 5) : i]
        ):
            cycles += 1
    return min(cycles / 3.0, 1.0)


wide_sets = st.frozensets(st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h", "i"]), max_size=8)
run_steps = st.builds(
    lambda action, paths, thought, inp, recaps: dataclasses.replace(
        _feature(action, paths, thought=thought, input=inp), recaps=recaps
    ),
    st.sampled_from(["", "open", "edit", "python"]),
    st.frozensets(st.sampled_from(["a.py", "b/c", "d.txt"]), max_size=2),
    wide_sets,
    st.sampled_from([frozenset(), frozenset("a"), frozenset("ab")]),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(run_steps, min_size=1, max_size=40))
def test_linked_scorers_match_their_whole_window_definitions_at_every_step(run: list[StepFeatures]) -> None:
    # The scorers read links to earlier steps (set once per step); the definitions compare the window's steps
    # pairwise. Every step's window is a suffix of the linked run, as the backend passes it.
    features.linked(run)
    for end in range(1, len(run) + 1):
        window = run[max(0, end - 24) : end]
        assert v1.late_sprawl(window, frozenset()) == _reference_late_sprawl(window)
        assert v1.cyclic_compression(window, frozenset()) == _reference_cyclic_compression(window)


@settings(max_examples=400, deadline=None)
@given(st.lists(steps, min_size=1, max_size=24), small_sets)
def test_late_sprawl_and_topic_drift_match_their_definitions(window: list[StepFeatures], task: frozenset[str]) -> None:
    assert v1.late_sprawl(features.linked(window), task) == _reference_late_sprawl(window)

    drift = 0.0
    anchor = task or (window[0].thought_words | window[1].thought_words if len(window) > 1 else frozenset())
    if len(window) >= 6 and len(anchor) >= 3:
        recent = set().union(*(f.thought_words | f.input_words for f in window[-3:]))
        overlap = len(anchor & recent) / min(len(anchor), 8)
        drift = 0.0 if overlap >= 0.25 else 1.0 - overlap / 0.25
    assert v1.silent_topic_drift(window, task) == drift


flagged = st.builds(
    lambda flags: _feature("x", flags=flags),
    st.frozensets(st.sampled_from(["edit", "test", "read", "submit", "done"]), max_size=3),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(flagged, min_size=1, max_size=24))
def test_verification_skip_matches_its_forward_definition(window: list[StepFeatures]) -> None:
    last_edit = -1
    for i, f in enumerate(window):
        if f.is_edit:
            last_edit = i
        elif last_edit >= 0 and (f.is_test or f.is_read):
            last_edit = -1
    expected = 0.0
    if last_edit >= 0:
        if window[-1].is_submit or window[-1].declares_done:
            expected = 0.9
        elif len(window) - 1 - last_edit >= 4:
            expected = 0.3
    assert v1.verification_skip(window, frozenset()) == expected


scores = st.lists(st.one_of(st.floats(0, 1), st.just(math.nan)), max_size=12)


@settings(max_examples=500, deadline=None)
@given(scores, st.integers(1, 6), st.floats(0, 1))
def test_fsm_trailing_windows_match_their_definition_for_lists_tuples_and_deques(
    history: list[float], window: int, threshold: float
) -> None:
    n = len(history)
    below = n >= window and all(history[i] < threshold for i in range(n - window, n))
    above = n >= window and all(history[i] > threshold for i in range(n - window, n))
    for seq in (history, tuple(history), deque(history)):
        assert fsm._trailing_all_below(seq, window, threshold) == below
        assert fsm._trailing_all_above(seq, window, threshold) == above


def _input_text_by_loads(action_input: str) -> str:
    """``features._input_text`` as first written, with ``json.loads``."""
    if action_input.startswith("{"):
        try:
            parsed = json.loads(action_input)
        except ValueError:
            return action_input
        if isinstance(parsed, dict):
            return " ".join(features._value_text(v) for v in parsed.values())
    return action_input


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400)
@given(
    st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=4),
    st.sampled_from(["", " ", "\n\t ", " x", "}", ",", "{", " {}", "\u3000"]),
    st.integers(min_value=0, max_value=40),
)
def test_tool_input_text_matches_json_loads(args: dict[str, object], tail: str, cut: int) -> None:
    document = json.dumps(args, sort_keys=True, ensure_ascii=False) + tail
    for candidate in (document, document[: max(len(document) - cut, 1)], document.lower()):
        assert features._input_text(candidate) == _input_text_by_loads(candidate)


@given(st.text(max_size=30).map(lambda t: "{" + t))
def test_tool_input_text_matches_json_loads_on_any_brace_text(candidate: str) -> None:
    assert features._input_text(candidate) == _input_text_by_loads(candidate)


DONE_PLAIN = (
    r"\b(?:done|fixed|complete[d]?|finished|resolved|should (?:now )?work|final answer|task is complete|"
    r"submit(?:ting)?|all set)\b"
)
phrase_texts = st.lists(
    st.sampled_from(["done", "done.", "(fixed)", "should", "now", "work", "work,", "all", "set", "final", "answer",
                     "completed", "x", "done-ish", "re-read", "step", "back", "once", "again", "as", "i", "said"]),
    max_size=12,
).map(" ".join)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(phrase_texts)
def test_declared_done_is_a_match_of_the_plain_pattern(raw: str) -> None:
    tokens = text.tokens(raw + "")
    found = features._DONE.found(frozenset(tokens.words), tokens.lowered)
    if found:  # never a declaration the plain pattern would not find
        assert re.search(DONE_PLAIN, tokens.lowered)
    # and every whole-token word or phrase is found (only a word glued to another by "-" or "/" may be missed)
    if re.search(DONE_PLAIN, tokens.lowered) and "-" not in raw:
        assert found


@pytest.mark.parametrize(
    ("thought", "done", "recap"),
    [
        ("I'm done.", True, False),
        ("The fix should now work, let me check all files", True, False),
        ("Should I check all of the other files?", False, False),
        ("All set: submitting", True, False),
        ("Let me step back and re-read the issue", False, True),
        ("One step at a time; back to the handler", False, False),  # the gate opens, the regex says no
        ("As I said, the cache is stale", False, True),
        ("Going over the code once more", False, False),
    ],
)
def test_done_and_recap_phrases(thought: str, done: bool, recap: bool) -> None:
    tokens = text.tokens(thought)
    present = frozenset(tokens.words)
    assert features._DONE.found(present, tokens.lowered) is done
    assert features._RECAP.found(present, tokens.lowered) is recap


@pytest.mark.parametrize(
    ("thought", "switch"),
    [
        ("Instead, let me grep for the handler.", True),
        ("Switching to the numpy handler", True),
        ("Moving on to the tests", True),
        ("Time for a different approach: bisect", True),
        ("The cursor is moving; the plan is on track", False),  # gate words present, no phrase
        ("A change of plan", True),
    ],
)
def test_announced_switch_phrases(thought: str, switch: bool) -> None:
    tokens = text.tokens(thought)
    assert features._SWITCH.found(frozenset(tokens.words), tokens.lowered) is switch
