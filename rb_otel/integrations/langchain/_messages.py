"""Pure helpers that read LangChain messages and chat models (no state, no telemetry)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from rb_otel.steering.memo import IdentityMemo
from rb_otel.telemetry import ChatResponse

__all__ = ["LastTurn", "ModelIdentity", "chat_response", "identify_model", "last_turn", "message_text"]

#: LangChain ``ls_provider`` -> OpenTelemetry ``gen_ai.provider.name`` (well-known values only).
_PROVIDER_NAMES = {
    "anthropic": "anthropic",
    "openai": "openai",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "google_genai": "gcp.gemini",
    "google_vertexai": "gcp.vertex_ai",
    "google_anthropic_vertex": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "amazon_bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "mistralai": "mistral_ai",
    "groq": "groq",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "perplexity": "perplexity",
    "ibm": "ibm.watsonx.ai",
}
#: Providers whose APIs have no use for Anthropic's ``cache_control`` marker (it is stripped for them).
NO_CACHE_CONTROL = frozenset({"openai", "azure.ai.openai"})


def message_text(message: BaseMessage) -> str:
    """The text of a message: a string content, or its text blocks joined with a space."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return " ".join(p for p in parts if p)


@dataclass(frozen=True, slots=True)
class LastTurn:
    """The agent's newest thought, the action it chose and the newest tool observation."""

    thought: str
    action: str | None
    action_input: str | None
    observation: str | None
    observation_error: bool = False  # the newest ToolMessage has status "error"
    reasoning: str = ""  # reasoning/thinking blocks of the newest AIMessage (step scorers read them)
    tokens: int = 0  # total tokens of the newest AIMessage's call (usage_metadata), 0 when unreported


def reasoning_text(message: BaseMessage) -> str:
    """The reasoning/thinking content blocks of a message (Anthropic ``thinking``, standard ``reasoning``)."""
    content = message.content
    if isinstance(content, str):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") in ("thinking", "reasoning"):
            value = block.get("thinking") or block.get("reasoning") or block.get("text")
            if isinstance(value, str):
                parts.append(value)
    return " ".join(parts)


def last_turn(messages: Sequence[BaseMessage]) -> LastTurn:
    """Read the newest non-empty AIMessage text (``""`` if none) and the newest ToolMessage (docs/steering.md,
    "Choices where ReasonBlocks leaves them open", "first call and the thought"). A message with
    no text blocks but reasoning blocks (``thinking``/``reasoning``) has that reasoning as its text."""
    thought = ""
    action = action_input = observation = None
    observation_error = False
    reasoning = ""
    tokens = 0
    for message in reversed(messages):
        if observation is None and isinstance(message, ToolMessage):
            observation = message_text(message)
            observation_error = getattr(message, "status", "success") == "error"
        elif isinstance(message, AIMessage):
            if not reasoning and not isinstance(message.content, str):
                reasoning = reasoning_text(message)
            if not tokens and message.usage_metadata:
                tokens = int(message.usage_metadata.get("total_tokens") or 0)
            if action is None and message.tool_calls:
                call = message.tool_calls[0]
                action = call.get("name") or None
                action_input = _dump(call.get("args"))
            # A turn with only reasoning content (an Anthropic ``thinking`` block and a tool call) still has a thought.
            text = message_text(message) or (reasoning_text(message) if not isinstance(message.content, str) else "")
            if text:
                thought = text
                break
    return LastTurn(thought, action, action_input, observation, observation_error, reasoning, tokens)


# What ``json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)`` builds at every call (encoders keep
# no state between calls, so one serves every thread).
_ENCODER = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False)


def _dump(value: Any) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError):
        return str(value)


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    provider: str
    name: str

    @property
    def model_id(self) -> str:
        """``provider:name``, the ``init_chat_model`` form."""
        return f"{self.provider}:{self.name}" if self.provider else self.name


_IDENTITIES: IdentityMemo[object, ModelIdentity] = IdentityMemo("langchain.model_identities", 1024)


def identify_model(model: Any) -> ModelIdentity:
    """Provider and model name of a chat model, from LangChain's ``_get_ls_params`` (cached per instance)."""
    hit = _IDENTITIES.get(model)
    if hit is not None:
        return hit
    provider, name = "", ""
    try:
        params = model._get_ls_params()
        provider = str(params.get("ls_provider") or "")
        name = str(params.get("ls_model_name") or "")
    except Exception:  # private LangChain API: tolerate its absence or failure
        pass
    if not name:
        name = str(getattr(model, "model_name", "") or getattr(model, "model", "") or type(model).__name__)
    identity = ModelIdentity(_PROVIDER_NAMES.get(provider, provider), name)
    if isinstance(model, BaseChatModel):  # only real chat models: an arbitrary object may be mutable
        _IDENTITIES.put(model, identity)
    return identity


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def chat_response(message: AIMessage) -> tuple[int, list[str], ChatResponse]:
    """``(total tokens, tool call names, response details)`` from a model's reply."""
    usage: Mapping[str, Any] = message.usage_metadata or {}
    input_details: Any = usage.get("input_token_details") or {}
    output_details: Any = usage.get("output_token_details") or {}
    meta = message.response_metadata or {}
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    response = ChatResponse(
        response_model=str(meta.get("model_name") or meta.get("model") or ""),
        response_id=str(message.id or "") if message.id and not str(message.id).startswith("lc_run") else "",
        finish_reasons=[str(finish)] if finish else [],
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cache_read_tokens=_int(input_details.get("cache_read")),
        cache_creation_tokens=_int(input_details.get("cache_creation")),
        reasoning_tokens=_int(output_details.get("reasoning")),
    )
    total = _int(usage.get("total_tokens")) or 0
    tool_calls = [str(call.get("name", "")) for call in message.tool_calls]
    return total, tool_calls, response
