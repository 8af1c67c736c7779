"""Guardrails and the E1 gate, the embedded pattern store and embeddings, rendering and system blocks."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from rb_otel import FSMState
from rb_otel.steering import HashingEmbeddings, InMemoryPatternStore, Pattern, render_pattern
from rb_otel.steering.etraces import RetrievalQuery, load_default_library
from rb_otel.steering.guardrails import MonitorGuardrails, e1_gate_open
from rb_otel.steering.rendering import render_injection, system_blocks
from rb_otel.steering.text import content_words
from rb_otel.types import MonitorEvaluation, PendingInjection

# -- guardrails -----------------------------------------------------------------------------------------------


def test_cap_of_five_per_run() -> None:
    g = MonitorGuardrails()
    allowed = 0
    for step in range(0, 100, 3):
        text = f"text {step}"
        if g.allows(text, step, FSMState.NORMAL):
            g.record(text, step)
            allowed += 1
    assert allowed == 5


@pytest.mark.parametrize(
    ("state", "cooldown"), [(FSMState.FAST, 5), (FSMState.NORMAL, 3), (FSMState.SLOW, 2), (FSMState.SKIP, 2)]
)
def test_cooldown_by_state(state: FSMState, cooldown: int) -> None:
    g = MonitorGuardrails()
    g.record("first", 10)
    assert not g.allows("second", 10 + cooldown - 1, state)
    assert g.allows("second", 10 + cooldown, state)


def test_duplicate_text_is_not_queued_twice_in_a_row() -> None:
    g = MonitorGuardrails()
    g.record("same", 1)
    assert not g.allows("same", 50, FSMState.SLOW)
    assert g.allows("other", 50, FSMState.SLOW)


def ev(fired: tuple[str, ...] = (), composite: float = 0.0) -> MonitorEvaluation:
    return MonitorEvaluation(fired=fired, composite=composite)


def test_e1_gate() -> None:
    assert e1_gate_open([], monitors_configured=False)
    assert not e1_gate_open([ev()], monitors_configured=True)
    assert e1_gate_open([ev(("semantic_loop",))], monitors_configured=True)
    assert not e1_gate_open([ev(composite=0.15)], monitors_configured=True)  # strict
    assert e1_gate_open([ev(composite=0.1501)], monitors_configured=True)
    assert e1_gate_open([ev(("x",)), ev(), ev()], monitors_configured=True)  # two back
    assert not e1_gate_open([ev(("x",)), ev(), ev(), ev()], monitors_configured=True)  # three back: too old


# -- pattern store ---------------------------------------------------------------------------------------------


def test_shipped_library_has_e3_rules_and_e2_patterns_per_v1_failure_type() -> None:
    patterns = load_default_library()
    assert sum(p.tier == "e3" for p in patterns) >= 5
    e2_types = {p.failure_type for p in patterns if p.tier == "e2"}
    assert {
        "semantic_loop",
        "verification_skip",
        "claim_contradiction",
        "cyclic_compression",
        "late_sprawl",
        "silent_topic_drift",
    } <= e2_types


def test_e3_scroll_returns_standing_rules_in_order_up_to_top_k() -> None:
    store = InMemoryPatternStore(load_default_library())
    got = store.retrieve(RetrievalQuery(tier="e3", top_k=32))
    assert [t.pattern_id for t in got] == [p.pattern_id for p in load_default_library() if p.tier == "e3"]
    assert len(store.retrieve(RetrievalQuery(tier="e3", top_k=2))) == 2


def test_similarity_search_ranks_the_closest_pattern_first_and_gates() -> None:
    store = InMemoryPatternStore(
        [
            Pattern("e1", {"title": "cookie expiry", "guidance": "session cookie expiry KeyError in auth"}, "p1"),
            Pattern("e1", {"title": "database pool", "guidance": "connection pool exhausted under load"}, "p2"),
        ]
    )
    got = store.retrieve(RetrievalQuery(tier="e1", context="KeyError when the session cookie expiry passes", top_k=2))
    assert got and got[0].pattern_id == "p1"
    assert all(t.pattern_id != "p2" for t in got)  # below the gate
    assert store.retrieve(RetrievalQuery(tier="e1", context="completely unrelated gardening tips")) == []


def test_failure_type_filter() -> None:
    store = InMemoryPatternStore(load_default_library())
    got = store.retrieve(
        RetrievalQuery(
            tier="e2",
            context="I keep repeating the same search with reworded input",
            top_k=2,
            failure_type="semantic_loop",
        )
    )
    assert got and all(t.failure_type == "semantic_loop" for t in got)


def test_any_langchain_embeddings_object_plugs_in() -> None:
    store = InMemoryPatternStore(
        [Pattern("e1", {"guidance": "alpha"}, "a")],
        embeddings=DeterministicFakeEmbedding(size=32),
        min_similarity={"e1": -1.0},
    )
    assert [t.pattern_id for t in store.retrieve(RetrievalQuery(tier="e1", context="alpha"))] == ["a"]


def test_hashing_embeddings_are_deterministic_normalised_and_similar_for_paraphrases() -> None:
    emb = HashingEmbeddings()
    a, b = emb.embed_query("session timeout in auth"), emb.embed_query("session timeouts in auth")
    assert a == emb.embed_query("session timeout in auth")
    assert sum(x * x for x in a) == pytest.approx(1.0)
    assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.5
    assert emb.embed_documents(["", "x"])[0] == [0.0] * emb.dimensions


@pytest.mark.parametrize(("kwargs", "message"), [({"tier": "e9"}, "tier"), ({"tier": "e1", "top_k": 0}, "top_k")])
def test_bad_queries_are_rejected(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetrievalQuery(**kwargs)  # type: ignore[arg-type]


def test_pattern_validation() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        Pattern("e1", {})


# -- rendering ------------------------------------------------------------------------------------------------


def test_render_pattern_markdown_for_most_models_with_stable_field_order() -> None:
    text = render_pattern(
        "e2", "openai:gpt-4o", {"unlock": "do X", "zeta": "z", "situation": "S", "dead_ends": ["a", "b"]}
    )
    assert text.splitlines()[0] == "**Known failure pattern**"
    assert text.index("situation") < text.index("dead ends") < text.index("unlock") < text.index("zeta")
    assert "\n  - a" in text


@pytest.mark.parametrize("model", ["anthropic:claude-sonnet-4-5", "claude-3-haiku"])
def test_render_pattern_uses_tags_for_claude(model: str) -> None:
    text = render_pattern("e3", model, {"title": "T", "guidance": "G"})
    assert text.startswith('<e3_pattern heading="Standing rule">') and "<guidance>G</guidance>" in text


def test_render_is_deterministic() -> None:
    fields = {"b": 1, "a": [1, 2], "title": "t"}
    assert render_pattern("e1", "m", fields) == render_pattern("e1", "m", dict(reversed(fields.items())))


def test_render_injection_reuses_a_stored_pattern_only_while_its_fields_are_equal() -> None:
    fields = {"title": "Check before you edit", "guidance": "Open the file first."}
    first = PendingInjection(source="E3Injection", tier="e3", fields=dict(fields), pattern_id="cache-test")
    assert render_injection(first, "openai:gpt-4o") == render_pattern("e3", "openai:gpt-4o", fields)
    assert render_injection(first, "claude-3-haiku") == render_pattern("e3", "claude-3-haiku", fields)
    changed = PendingInjection(
        source="E3Injection", tier="e3", fields={**fields, "guidance": "Run the tests."}, pattern_id="cache-test"
    )
    assert "Run the tests." in render_injection(changed, "openai:gpt-4o")  # same id, new fields: rendered again
    assert render_injection(PendingInjection(source="x", text="plain"), "m") == "plain"


def test_content_words_are_stemmed_word_runs_without_stop_words() -> None:
    words = content_words("The `src/auth.py` timeouts: it's checking AuthError again, naïve-approach.")
    assert {"src", "auth", "timeout", "check", "autherror", "naïve", "approach"} <= words
    assert not words & {"the", "it", "again", "py", "s"}  # stop words and runs under 3 characters are dropped
    # a long text is read as its first 2,000 and last 1,999 characters (text_view): the needle at the end counts
    assert content_words("x" * 10_000 + " needle") == frozenset({"x" * 2000, "x" * 1992, "needle"})


def test_system_blocks() -> None:
    base = [{"type": "text", "text": "You are helpful."}]
    blocks = system_blocks(base, "guidance")
    assert blocks[0] == {"type": "text", "text": "You are helpful.", "cache_control": {"type": "ephemeral"}}
    assert blocks[1] == {"type": "text", "text": "[REASONBLOCKS]\nguidance"}
    assert system_blocks(base, "") == [blocks[0]]
    assert system_blocks([], "g") == [{"type": "text", "text": "[REASONBLOCKS]\ng"}]
    assert system_blocks([], "") == []
    assert "cache_control" not in system_blocks(base, "g", cache_control=False)[0]
    assert base == [{"type": "text", "text": "You are helpful."}]  # the caller's blocks are not mutated


# -- Qdrant backend (local mode, a real Qdrant engine in-process) -----------------------------------------------


def test_qdrant_store_behind_the_same_protocol(tmp_path: object) -> None:
    pytest.importorskip("qdrant_client", reason="the qdrant extra is not installed")
    from rb_otel.backends.qdrant import QdrantPatternStore

    embedded = InMemoryPatternStore(load_default_library())
    store = QdrantPatternStore(path=str(tmp_path))
    store.add(load_default_library())
    scroll = store.retrieve(RetrievalQuery(tier="e3", top_k=32))
    assert [t.pattern_id for t in scroll] == [
        t.pattern_id for t in embedded.retrieve(RetrievalQuery(tier="e3", top_k=32))
    ]
    query = RetrievalQuery(
        tier="e2", context="I keep repeating the same search with reworded input", top_k=2, failure_type="semantic_loop"
    )
    got = store.retrieve(query)
    assert got and all(t.failure_type == "semantic_loop" for t in got)
    assert [t.pattern_id for t in got] == [t.pattern_id for t in embedded.retrieve(query)]
    assert got[0].similarity == pytest.approx(embedded.retrieve(query)[0].similarity, abs=1e-4)


def test_qdrant_store_works_in_the_pipeline() -> None:
    pytest.importorskip("qdrant_client", reason="the qdrant extra is not installed")
    from rb_otel import ReasonBlocks
    from rb_otel.backends.qdrant import QdrantPatternStore

    store = QdrantPatternStore()
    store.add(load_default_library())
    session = ReasonBlocks(pattern_store=store).new_session()
    decision = session.begin_step(thought=None)
    assert set(decision.entry.injection_sources) == {"E3Injection"}
