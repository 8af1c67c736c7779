"""The memos of ``rb_otel.steering.memo`` against their plain definitions: a hit is what a miss computes."""

from __future__ import annotations

import gc

from hypothesis import given
from hypothesis import strategies as st

from rb_otel.steering import clear_caches, text
from rb_otel.steering.memo import BoundedMemo, IdentityMemo, Memo, cache_sizes
from rb_otel.steering.rendering import render_injection, render_pattern
from rb_otel.types import PendingInjection

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=0, max_size=60)


@given(st.lists(words, max_size=200), st.integers(min_value=1, max_value=8))
def test_a_word_memo_always_answers_what_compute_would(seen: list[str], limit: int) -> None:
    memo: Memo[str] = Memo(lambda w: w[::-1], limit, name="test.reverse")
    for word in seen + seen:
        assert memo[word] == word[::-1]
        assert len(memo) <= limit
    assert all(len(k) <= text.MEMO_MAX_WORD_CHARS for k in memo)


@given(st.lists(st.tuples(st.integers(0, 20), st.integers()), max_size=100), st.integers(1, 5))
def test_a_bounded_memo_never_exceeds_its_limit_and_keeps_what_was_put_last(
    puts: list[tuple[int, int]], limit: int
) -> None:
    memo: BoundedMemo[int, int] = BoundedMemo("test.bounded", limit)
    for key, value in puts:
        memo.put(key, value)
        assert memo.get(key) == value
        assert len(memo) <= limit


@given(st.lists(st.integers(0, 9), max_size=120), st.integers(1, 4))
def test_an_identity_memo_hits_only_for_the_same_object(picks: list[int], limit: int) -> None:
    # objects are created and dropped as we go, so ids are reused: a hit must still be for the very object
    memo: IdentityMemo[list[int], int] = IdentityMemo("test.identity", limit)
    live: dict[int, list[int]] = {}
    for pick in picks:
        if pick % 3 == 0:
            live.pop(pick, None)
            gc.collect(0)  # the youngest generation: a full collection per pick is slow in a big test process
        obj = live.setdefault(pick, [pick])
        hit = memo.get(obj, "extra")
        assert hit is None or hit == sum(obj)
        if hit is None:
            memo.put(obj, sum(obj), "extra")
        assert memo.get(obj, "other") in (None, sum(obj))
        assert len(memo) <= limit


def test_clear_caches_empties_every_memo_and_answers_stay_the_same() -> None:
    before = text.stem("timeouts")
    pending = PendingInjection(source="E1", tier="e1", fields={"pattern": "retry"}, pattern_id="p1")
    rendered = render_injection(pending, "claude-sonnet-4-5")
    assert cache_sizes().get("text.stem", 0) > 0 and cache_sizes().get("rendering.patterns", 0) > 0
    clear_caches()
    sizes = cache_sizes()
    assert sizes["text.stem"] == 0 and sizes["rendering.patterns"] == 0
    assert text.stem("timeouts") == before
    assert (
        render_injection(pending, "claude-sonnet-4-5")
        == rendered
        == render_pattern("e1", "claude-sonnet-4-5", {"pattern": "retry"})
    )
