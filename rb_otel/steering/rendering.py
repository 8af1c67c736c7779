"""Rendering of guidance: ``render_pattern`` per model family and the system-message blocks (docs/steering.md,
"E-traces"; docs/steering.md, "Routing and the [REASONBLOCKS] block").

Our format (docs/steering.md, "Choices where ReasonBlocks leaves them open"): a heading per tier, then the pattern's
fields in a stable order (``title``, ``guidance``, ``situation``, ``dead_ends``, ``unlock``, then the rest sorted).
Claude models (``claude*``, ``anthropic:*``) get XML-style tags, which Anthropic recommends for structured prompt
content; every other model gets markdown bullets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rb_otel.steering.memo import BoundedMemo
from rb_otel.types import REASONBLOCKS_HEADER, PendingInjection

__all__ = [
    "CACHE_CONTROL",
    "TIER_HEADINGS",
    "guidance_block",
    "render_injection",
    "render_pattern",
    "system_blocks",
]

TIER_HEADINGS: Mapping[str, str] = {
    "e1": "Relevant prior experience",
    "e2": "Known failure pattern",
    "e3": "Standing rule",
}
_FIELD_ORDER = ("title", "guidance", "situation", "dead_ends", "unlock")
#: Marks the cacheable prefix for Anthropic; other providers ignore it (docs/steering.md, "Routing and the
#: [REASONBLOCKS] block").
CACHE_CONTROL: Mapping[str, str] = {"type": "ephemeral"}


def model_family_is_claude(model_id: str) -> bool:
    lowered = model_id.lower()
    bare = lowered.split(":", 1)[1] if ":" in lowered else lowered
    return lowered.startswith("anthropic:") or bare.startswith("claude")


def _ordered(fields: Mapping[str, Any]) -> list[tuple[str, Any]]:
    known = [(k, fields[k]) for k in _FIELD_ORDER if k in fields]
    rest = sorted((k, v) for k, v in fields.items() if k not in _FIELD_ORDER)
    return [(k, v) for k, v in known + rest if v not in (None, "", [], {})]


def _as_text(value: Any, *, bullet: str) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {_as_text(v, bullet=bullet)}" for k, v in sorted(value.items()))
    if isinstance(value, Iterable):
        return "".join(f"\n{bullet}{_as_text(v, bullet=bullet)}" for v in value)
    return str(value)


def render_pattern(tier: str, model_id: str, fields: Mapping[str, Any]) -> str:
    """Render one pattern for the model that will receive it; deterministic for the same inputs."""
    tier = tier.lower()
    heading = TIER_HEADINGS.get(tier, f"Guidance ({tier})")
    items = _ordered(fields)
    if model_family_is_claude(model_id):
        body = "\n".join(f"<{k}>{_as_text(v, bullet='  - ')}</{k}>" for k, v in items)
        return f'<{tier}_pattern heading="{heading}">\n{body}\n</{tier}_pattern>'
    body = "\n".join(f"- {k.replace('_', ' ')}: {_as_text(v, bullet='  - ')}" for k, v in items)
    return f"**{heading}**\n{body}"


#: Rendered stored patterns, keyed by (pattern id, tier, Claude family); a hit is used only if the fields are
#: equal, so a changed pattern is rendered again. Bounded: cleared when full.
_RENDERED: BoundedMemo[tuple[str, str, bool], tuple[Mapping[str, Any], str]] = BoundedMemo("rendering.patterns", 4096)


def render_injection(injection: PendingInjection, model_id: str) -> str:
    """Plain text passes through; a ``(tier, fields)`` pattern goes through :func:`render_pattern`."""
    if injection.text is not None:
        return injection.text
    tier, fields = injection.tier or "", injection.fields or {}
    if not injection.pattern_id:
        return render_pattern(tier, model_id, fields)
    key = (injection.pattern_id, tier, model_family_is_claude(model_id))
    hit = _RENDERED.get(key)
    if hit is not None and hit[0] == fields:  # comparing is much cheaper than rendering
        return hit[1]
    text = render_pattern(tier, model_id, fields)
    _RENDERED.put(key, (fields, text))
    return text


def guidance_block(rendered: str) -> str:
    """``"[REASONBLOCKS]\\n" + rendered``, or ``""`` when nothing fired."""
    return REASONBLOCKS_HEADER + rendered if rendered else ""


def system_blocks(
    base_blocks: Sequence[Mapping[str, Any]], rendered: str, *, cache_control: bool = True
) -> list[dict[str, Any]]:
    """The system message content: the base blocks (last one cache-marked), then the guidance block.

    The guidance block never carries ``cache_control``, so changing guidance never invalidates the cached base.
    Returns ``[]`` when there is neither a base nor guidance (no system message is then sent).
    """
    blocks = [dict(b) for b in base_blocks]
    if blocks and cache_control and blocks[-1].get("type") == "text":
        blocks[-1]["cache_control"] = dict(CACHE_CONTROL)
    if not cache_control:
        for block in blocks:
            block.pop("cache_control", None)
    if rendered:
        blocks.append({"type": "text", "text": guidance_block(rendered)})
    return blocks
