"""Test seams: a deterministic, stateless scripted chat model that can bind tools.

LangChain's ``GenericFakeChatModel`` cannot bind tools and shares an iterator across runs. This model picks
its reply from the number of ``AIMessage``s already in the prompt, so one instance replays its script on every
run and is safe under concurrency. It emits ``usage_metadata`` and ``response_metadata`` like a provider.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = ["ScriptedChatModel", "tool_call"]


def tool_call(name: str, args: dict[str, Any], call_id: str, content: str = "") -> AIMessage:
    """An ``AIMessage`` asking for one tool call (``content`` is the model's visible thought)."""
    return AIMessage(content=content, tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


class ScriptedChatModel(BaseChatModel):
    """Replies with ``script[i]`` where ``i`` counts the AIMessages already in the prompt.

    ``raise_on_call=i`` raises ``RuntimeError`` on that call; ``sleep_s`` simulates latency;
    ``record_system=True`` keeps the system messages it was sent in :attr:`received_system` (last 1,000).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[AIMessage]
    model_name: str = "scripted-1"
    provider: str = "scripted"
    raise_on_call: int | None = None
    error_factory: Callable[[], BaseException] | None = None
    sleep_s: float = 0.0
    record_system: bool = False
    usage: bool = True
    received_system: list[SystemMessage | None] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = self.provider
        params["ls_model_name"] = self.model_name
        return params

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: str | None = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        index = sum(isinstance(m, AIMessage) for m in messages)
        if self.record_system:
            system = next((m for m in messages if isinstance(m, SystemMessage)), None)
            with self._lock:
                self.received_system.append(system)
                del self.received_system[:-1000]
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if index == self.raise_on_call:
            raise self.error_factory() if self.error_factory else RuntimeError("scripted model failure")
        template = self.script[min(index, len(self.script) - 1)]
        prompt_tokens = 10 + sum(len(str(m.content)) for m in messages) // 4
        output_tokens = 1 + len(str(template.content)) // 4 + 8 * len(template.tool_calls)
        message = AIMessage(
            content=template.content,
            tool_calls=template.tool_calls,
            usage_metadata={
                "input_tokens": prompt_tokens,
                "output_tokens": output_tokens,
                "total_tokens": prompt_tokens + output_tokens,
            }
            if self.usage
            else None,
            response_metadata={
                "model_name": self.model_name,
                "finish_reason": "tool_calls" if template.tool_calls else "stop",
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
