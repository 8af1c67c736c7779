"""Secrets never reach exported telemetry: every redaction pattern directly, near misses, and secrets embedded
anywhere in a real agent's thoughts, tool arguments, tool results and prompts with content capture on."""

from __future__ import annotations

import pytest
from conftest import Otel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from rb_otel import ReasonBlocks
from rb_otel.telemetry.content import MAX_CAPTURED_CHARS, ContentPolicy, redact
from rb_otel.testing import ScriptedChatModel, tool_call
from rb_otel.types import THOUGHT_PREVIEW_CHARS

#: (text, the part that must never be exported)
SECRETS = [
    ("Bearer abcdEFGH1234._~+/=-", "abcdEFGH1234"),
    ("bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9"),
    ("Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
    ("sk-abcdefghijkl", "abcdefghijkl"),
    ("sk-proj-abc_def-ghi123456", "ghi123456"),
    ("rk-live1234567890ab", "live1234567890ab"),
    ("pk-test_1234567890", "test_1234567890"),
    ("sk-ant-api03-abcdefghijkl", "api03-abcdefghijkl"),
    ("rb_live_abc123", "rb_live_abc123"),
    ("rb_test_xyz_789-q", "xyz_789-q"),
    ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("ghp_abcdefghijklmnopqrst1234", "abcdefghijklmnopqrst1234"),
    ("gho_abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ("xoxb-1234567890-abc", "1234567890-abc"),
    ("xoxp-abcdefghij", "abcdefghij"),
    ("api_key=abcdef123", "abcdef123"),
    ("api-key: 'abcdef123'", "abcdef123"),
    ('apikey="zzzzzz99"', "zzzzzz99"),
    ("secret=s3cr3tvalue", "s3cr3tvalue"),
    ("token: tok_123456", "tok_123456"),
    ("password=hunter22", "hunter22"),
    ("passwd: qwerty99", "qwerty99"),
    ('"password": "correct-horse"', "correct-horse"),
]

NEAR_MISSES = [
    "Bearer short",  # token under 8 characters
    "sk-short",  # under 12 after the dash
    "rb_live_abc",  # under 6 after the prefix
    "rb_prod_abcdefgh",  # not a ReasonBlocks key kind
    "AKIAIOSFODNN7EXAMPL",  # 19 characters, not 20
    "AKIAIOSFODNN7EXAMPLEX",  # glued to a word: no boundary
    "ghp_short",
    "xoxz-1234567890",  # not a Slack token kind
    "password=abc",  # value under 6 characters
    "the token is fine",  # the word alone
    "desk-abcdefghijklmnop",  # "sk-" inside a word
]


@pytest.mark.parametrize(("secret", "value"), SECRETS)
def test_every_pattern_redacts(secret: str, value: str) -> None:
    out = redact(f"before {secret} after")
    assert "[REDACTED]" in out and out.startswith("before ") and out.endswith(" after")
    assert value not in out


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_kept(text: str) -> None:
    assert redact(text) == text


def test_a_secret_across_the_capture_cut_is_removed_whole() -> None:
    policy = ContentPolicy(True)
    for offset in range(1, 16):
        text = "x" * (MAX_CAPTURED_CHARS - offset) + " sk-abcdefghijklmnopqrstuvwxyz"
        out = policy.text(text)
        assert len(out) <= MAX_CAPTURED_CHARS and "sk-abc" not in out


def test_a_preview_cut_inside_a_key_drops_the_fragment() -> None:
    policy = ContentPolicy(True)
    for keep in range(1, 14):  # "sk-" plus under 12 characters: too short for its pattern
        head = "y" * (THOUGHT_PREVIEW_CHARS - 3 - keep - 1) + " "
        preview = (head + "sk-abcdefghijklmnopqrstuvwxyz")[:THOUGHT_PREVIEW_CHARS]
        assert len(preview) == THOUGHT_PREVIEW_CHARS
        assert "sk-" not in policy.preview(preview, THOUGHT_PREVIEW_CHARS)
    assert policy.preview("calm thought", THOUGHT_PREVIEW_CHARS) == "calm thought"


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


# Filler from an alphabet no secret body uses, so any 8-character run of a secret in the output is a leak.
filler = st.text(alphabet="äöüßé \n", max_size=300).map(lambda s: f"{s} ")
secrets = st.sampled_from(SECRETS)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=secrets, before=filler, after=filler, where=st.sampled_from(["thought", "argument", "prompt"]))
def test_a_secret_anywhere_never_reaches_a_span(
    otel: Otel, secret: tuple[str, str], before: str, after: str, where: str
) -> None:
    otel.exporter.clear()
    secret, body = secret
    text = f"{before}{secret} {after}"
    thought = text if where == "thought" else "Echoing."
    argument = text if where == "argument" else "plain"
    prompt = text if where == "prompt" else "go"
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True)
    script = [tool_call("echo", {"text": argument}, "c1", content=thought), AIMessage(thought)]
    agent = create_agent(ScriptedChatModel(script=script), [echo], middleware=[rb.middleware(agent_name="s")])
    agent.invoke({"messages": [("user", prompt)]})
    windows = {body[i : i + 8] for i in range(max(len(body) - 7, 1))}
    spans = otel.exporter.get_finished_spans()
    assert spans
    for span in spans:
        exported = str(dict(span.attributes or {})) + str([dict(e.attributes or {}) for e in span.events])
        leaked = [w for w in windows if w in exported]
        assert not leaked, f"{span.name} leaked {leaked} of {secret!r}"


def test_capture_resolution(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from rb_otel.telemetry.content import CAPTURE_ENV, resolve_capture

    with caplog.at_level("WARNING", logger="rb_otel.telemetry"):
        for raw, expected in (("", False), ("false", False), ("0", False), ("No", False), (" off ", False),
                              ("FALSE", False), ("true", True), ("1", True), ("YES", True), ("on", True)):  # fmt: skip
            monkeypatch.setenv(CAPTURE_ENV, raw)
            assert resolve_capture(None) is expected, raw
            assert resolve_capture(not expected) is (not expected)  # the argument wins over the environment
        monkeypatch.delenv(CAPTURE_ENV)
        assert resolve_capture(None) is False
    assert not caplog.records  # every accepted spelling is accepted silently
    monkeypatch.setenv(CAPTURE_ENV, "maybe")
    with caplog.at_level("WARNING", logger="rb_otel.telemetry"):
        assert resolve_capture(None) is False
    assert [r.getMessage() for r in caplog.records] == [
        f"{CAPTURE_ENV}='maybe' is not true/false; content capture stays off"
    ]


def test_captured_values_are_json_or_text_and_bounded() -> None:
    policy = ContentPolicy(True)
    assert policy.capture is True and ContentPolicy(False).capture is False
    assert policy.text({"b": "é", "a": [1, None]}) == '{"b": "é", "a": [1, null]}'  # insertion order, UTF-8 kept
    assert policy.text({"when": object}) == '{"when": "<class \'object\'>"}'  # default=str

    class Loop(list):  # type: ignore[type-arg]
        pass

    circular = Loop()
    circular.append(circular)
    assert policy.text(circular) == "[[...]]"  # not JSON: its str()
    long = "x" * (MAX_CAPTURED_CHARS + 100)
    assert policy.text(long) == "x" * MAX_CAPTURED_CHARS
    near = "x" * (MAX_CAPTURED_CHARS - 40) + " sk-abcdefghijklmnopqrstuvwxyz " + "y" * 600
    out = policy.text(near)
    assert len(out) == MAX_CAPTURED_CHARS and out.startswith("x" * (MAX_CAPTURED_CHARS - 40) + " [REDACTED]")
    assert policy.texts(["a sk-abcdefghijklmnop", "b"]) == ["a [REDACTED]", "b"]


def test_previews_keep_whole_words_and_drop_only_a_cut_one() -> None:
    policy = ContentPolicy(True)
    assert policy.preview("ends with a space ", 18) == "ends with a space "  # at the limit, not cut mid-word
    assert policy.preview("two words", 9) == "two "  # at the limit and ending in a word: maybe cut
    assert policy.preview("two words", 10) == "two words"
    assert policy.preview("x" * 12, 12) == ""  # a single cut word is dropped whole
    assert policy.preview("a bcd", 5) == "a "  # the last character decides, not another one
    assert policy.preview("abc d", 5) == "abc "
    assert policy.previews(["one two", "three"], 7) == ["one ", "three"]
