"""Who ran an imported run: its harness and its model, as a file names them, folded so that one agent is one name.

An agent is a harness and a model (docs/importers.md, "Agent identity"). Readers set ``ImportedRun.harness`` (the
harness and its major version: ``tau2 llm_agent``, ``mini-swe-agent 2``) and ``ImportedRun.model`` through
:func:`agent_model`, so the spellings of one model in one harness are one agent, and settings that do not change
the model (reasoning effort, prompt variants) are recorded as ``rb.metadata.*`` attributes instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rb_otel.steering.agent_keys import normalise_model
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import AttributeValue

__all__ = ["REASONING_EFFORT", "agent_model", "major_version", "reasoning_effort"]

#: The run attribute that holds the reasoning effort the agent's model was configured with, when a file says it.
REASONING_EFFORT = n.RB_METADATA_PREFIX + "reasoning_effort"

# A dated snapshot of a model (OpenAI's form: ``gpt-4.1-mini-2025-04-14``); undated ``YYYYMMDD`` suffixes
# (Anthropic's ``claude-3-5-sonnet-20241022``) name different models and are kept.
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def agent_model(model: str) -> str:
    """The model of an agent, one name for its spellings: lower case, a ``provider/`` path or ``provider:``
    prefix dropped (``xai/grok-4`` and ``grok-4`` are one), a dated snapshot suffix dropped
    (``gpt-4.1-mini-2025-04-14`` is ``gpt-4.1-mini``). A fine-tuned model (``ft:base:org:name:id``) is its own
    model, kept whole (lower case), never folded into its base. ``""`` stays ``""``."""
    text = str(model or "").strip().lower()
    if text.startswith("ft:"):
        return text
    return _SNAPSHOT.sub("", normalise_model(text))


def major_version(version: Any) -> str:
    """The major version of a version string (``"1.17.3"`` -> ``"1"``), ``""`` when there is none."""
    match = re.match(r"\s*v?(\d+)", str(version or ""))
    return match.group(1) if match else ""


def reasoning_effort(settings: Mapping[str, Any]) -> dict[str, AttributeValue]:
    """The reasoning-effort attribute for a model's settings (``{"reasoning": {"effort": "low"}}`` as the OpenAI
    Responses API and LiteLLM take it, or ``{"reasoning_effort": "low"}``); empty when the settings name none."""
    reasoning = settings.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
    effort = effort or settings.get("reasoning_effort")
    return {REASONING_EFFORT: str(effort)} if isinstance(effort, str) and effort else {}
