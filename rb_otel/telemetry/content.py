"""Content-capture policy and secret redaction.

Capture is off unless ``capture_content=True`` or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``
(argument > environment > default). Off means no thought, prompt, completion, guidance, task, tool argument or
result text on any span or event. Whatever the setting, captured text is passed through :func:`redact`, so API
keys and ``Authorization`` values never leave the process.
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any, Final

__all__ = [
    "CAPTURE_ENV",
    "CAPTURE_MODES",
    "CONTENT_ATTRIBUTES",
    "ContentPolicy",
    "redact",
    "resolve_capture",
    "resolve_capture_mode",
]

_log = logging.getLogger("rb_otel.telemetry")

#: Standard GenAI variable turning prompt/completion capture on (``true``/``false``, default false).
CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Captured strings longer than this are cut (spans are not a blob store).
MAX_CAPTURED_CHARS: Final = 8192
#: Redaction reads this far past the cut, so a secret that straddles it is still recognised (and removed) whole.
_REDACT_LOOKAHEAD: Final = 512

#: The GenAI capture modes (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``); ``true`` means SPAN_ONLY.
NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT = "NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT"
CAPTURE_MODES: Final = (NO_CONTENT, SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT)
#: The attributes that carry content: on spans, on events, or on neither, as the mode says.
CONTENT_ATTRIBUTES: Final = frozenset(
    {
        "rb.thought_preview",
        "rb.injections",
        "rb.intervention_texts",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
)
_FALSE = ("", "false", "0", "no", "off")
_TRUE = ("true", "1", "yes", "on")

_SECRETS = re.compile(
    r"(?i)(?:\b(?:bearer|basic)\s+[a-z0-9._~+/=-]{8,})"  # Authorization header values
    r"|\b(?:sk|rk|pk)-[a-z0-9_-]{12,}"  # OpenAI/Stripe-style keys
    r"|\bsk-ant-[a-z0-9_-]{12,}"
    r"|\brb_(?:live|test)_[a-z0-9_-]{6,}"  # ReasonBlocks keys
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bgh[pousr]_[a-z0-9]{20,}"  # GitHub tokens
    r"|\bxox[abprs]-[a-z0-9-]{10,}"  # Slack tokens
    # key=value / "key": "value", also inside JSON-encoded text (where quotes come escaped: \")
    r"|(?:api[_-]?key|secret|token|password|passwd)\\?[\"']?\s*[:=]\s*\\?[\"']?[^\s\"'\\,;]{6,}"
)
_REDACTED: Final = "[REDACTED]"
_LAST_WORD = re.compile(r"\S+\Z")


def redact(text: str) -> str:
    """Replace anything that looks like a credential with ``[REDACTED]``, and lone surrogates (text decoded with
    ``surrogateescape``) with U+FFFD, which OTLP's UTF-8 encoding would otherwise refuse attribute by attribute."""
    return _SECRETS.sub(_REDACTED, _valid_utf8(text))


def _valid_utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def resolve_capture_mode(argument: bool | str | None) -> str:
    """The capture mode: the argument (a bool or a mode name), else the environment variable, else NO_CONTENT.
    ``true``/``false`` (and 1/0, yes/no, on/off) keep their meaning (true = SPAN_ONLY); anything else is warned
    about and captures nothing."""
    if isinstance(argument, bool):
        return SPAN_ONLY if argument else NO_CONTENT
    raw = (argument if argument is not None else os.environ.get(CAPTURE_ENV, "")).strip()
    if raw.upper() in CAPTURE_MODES:
        return raw.upper()
    if raw.lower() in _FALSE:
        return NO_CONTENT
    if raw.lower() in _TRUE:
        return SPAN_ONLY
    where = "capture_content" if argument is not None else CAPTURE_ENV
    _log.warning("%s=%r is not true/false; content capture stays off", where, raw.lower())
    return NO_CONTENT


def resolve_capture(argument: bool | str | None) -> bool:
    """Whether any content is captured: explicit argument, else the environment variable, else False."""
    return resolve_capture_mode(argument) != NO_CONTENT


class ContentPolicy:
    """Decides whether content is captured and where (span attributes, events), and prepares it (redacted,
    bounded). ``capture`` is a bool (True = SPAN_ONLY) or a mode name."""

    __slots__ = ("capture", "mode", "on_events", "on_spans")

    def __init__(self, capture: bool | str) -> None:
        self.mode = resolve_capture_mode(capture)
        self.on_spans = self.mode in (SPAN_ONLY, SPAN_AND_EVENT)
        self.on_events = self.mode in (EVENT_ONLY, SPAN_AND_EVENT)
        self.capture = self.on_spans or self.on_events  # content is collected at all

    def split(self, attrs: dict[str, Any]) -> dict[str, Any] | None:
        """Move or copy the content attributes of ``attrs`` (in place) as the mode says; returns the attributes
        for a content event, or ``None`` when there is none to add."""
        if not self.capture:
            return None
        content = {k: v for k, v in attrs.items() if k in CONTENT_ATTRIBUTES}
        if not self.on_spans:
            for key in content:
                del attrs[key]
        return content if self.on_events and content else None

    def text(self, value: Any) -> str:
        """``value`` as redacted, bounded text; callers must check :attr:`capture` first."""
        if isinstance(value, str):
            raw = value
        else:
            try:
                raw = json.dumps(value, default=str, ensure_ascii=False)
            except (TypeError, ValueError):
                raw = str(value)
        # Redact first, cut after: a cut inside a key would leave a prefix too short for its pattern.
        return redact(raw[: MAX_CAPTURED_CHARS + _REDACT_LOOKAHEAD])[:MAX_CAPTURED_CHARS]

    def texts(self, values: list[str]) -> list[str]:
        return [self.text(v) for v in values]

    def preview(self, value: str, limit: int) -> str:
        """A preview someone else already cut at ``limit`` characters, redacted. A preview that reaches the limit
        may end inside a word, perhaps a key too short there to be recognised: that last fragment is dropped."""
        if len(value) >= limit and value and not value[-1].isspace():
            match = _LAST_WORD.search(value)
            value = value[: match.start()] if match else value
        return redact(value)

    def previews(self, values: list[str], limit: int) -> list[str]:
        return [self.preview(v, limit) for v in values]
