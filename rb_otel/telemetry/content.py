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

__all__ = ["CAPTURE_ENV", "ContentPolicy", "redact", "resolve_capture"]

_log = logging.getLogger("rb_otel.telemetry")

#: Standard GenAI variable turning prompt/completion capture on (``true``/``false``, default false).
CAPTURE_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Captured strings longer than this are cut (spans are not a blob store).
MAX_CAPTURED_CHARS: Final = 8192
#: Redaction reads this far past the cut, so a secret that straddles it is still recognised (and removed) whole.
_REDACT_LOOKAHEAD: Final = 512

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


def resolve_capture(argument: bool | None) -> bool:
    """Explicit argument, else the environment variable, else False. Invalid values are warned about."""
    if argument is not None:
        return bool(argument)
    raw = os.environ.get(CAPTURE_ENV, "").strip().lower()
    if raw in ("", "false", "0", "no", "off"):
        return False
    if raw in ("true", "1", "yes", "on"):
        return True
    _log.warning("%s=%r is not true/false; content capture stays off", CAPTURE_ENV, raw)
    return False


class ContentPolicy:
    """Decides whether content goes on spans and prepares it (redacted, bounded)."""

    __slots__ = ("capture",)

    def __init__(self, capture: bool) -> None:
        self.capture = capture

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
