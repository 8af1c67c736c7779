"""``TokenSavingMiddleware`` (docs/experiments.md, "TokenSavingMiddleware"): shrink an agent's history before each
model call.

Old tool outputs are cut to head and tail under the same message id, so LangGraph's ``add_messages`` reducer
replaces them in place and the history really shrinks; optionally, stale messages keep only the words a
classifier keeps (``perplexity`` compression); and an agent stuck in a loop is told to submit (early exit). The
system prompt and tool definitions are never touched (the prompt cache stays valid). Put it **last** in
``middleware=[...]``. Any failure inside it is logged and the model is called with the history as it was.

What it saved is counted in :attr:`TokenSavingMiddleware.stats` and, when ``ReasonBlocksMiddleware`` records the
run, on the run span (``rb.token_saving.chars_saved``, ``.compressions``, ``.early_exits``) and in the
``rb.token_saving.chars_saved`` counter.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime

from rb_otel.integrations.langchain._graph_context import node_run_id
from rb_otel.integrations.langchain._guard import guard
from rb_otel.integrations.langchain._messages import message_text
from rb_otel.integrations.langchain.notes import TokensSaved
from rb_otel.steering.checks import check_bool, check_int, check_number, expected
from rb_otel.steering.memo import BoundedMemo
from rb_otel.steering.token_saving import (
    EARLY_EXIT_TEXT,
    WordClassifier,
    compress_tool_output,
    early_exit_fires,
    keep_words,
)

__all__ = ["TokenSavingMiddleware", "TokenSavingStats", "build_steps_from_messages"]

_log = logging.getLogger("rb_otel.integrations.langchain")
#: Marks our early-exit nudge in the history, so a run is nudged at most once (docs/experiments.md,
#: "TokenSavingMiddleware").
_EARLY_EXIT_KEY = "rb_early_exit"
#: ``TokenSavingStats.replacements_emitted`` keeps about this many of the latest model calls.
_KEEP_REPLACEMENTS = 10_000


@dataclass(slots=True)
class TokenSavingStats:
    """What one middleware saved, over every run it served (every field starts at 0)."""

    compressions: int = 0
    chars_saved: int = 0
    early_exits: int = 0
    perplexity_compressions: int = 0
    perplexity_chars_saved: int = 0
    perplexity_cache_hits: int = 0
    replacements_emitted: list[int] = field(default_factory=list)  # replaced messages per model call


def build_steps_from_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """One dict per AIMessage (per tool call when it has several), docs/experiments.md, "TokenSavingMiddleware":
    ``step_index``, ``action``,
    ``action_input``, ``thought``, ``observation`` (the matching ToolMessage's content), ``is_error``."""
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    steps: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        thought = message_text(message)
        for call in message.tool_calls or [None]:  # type: ignore[list-item]
            call_id = call.get("id") if call is not None else None
            result = results.get(call_id) if call_id else None
            steps.append(
                {
                    "step_index": len(steps),
                    "action": call["name"] if call is not None else "",
                    "action_input": dict(call["args"]) if call is not None else {},
                    "thought": thought,
                    "observation": message_text(result) if result is not None else "",
                    "is_error": result is not None and result.status == "error",
                }
            )
    return steps


class TokenSavingMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Compresses old tool outputs, optionally stale messages, and nudges a looping agent to submit
    (docs/experiments.md, "TokenSavingMiddleware").

    Example::

        mw = rb.middleware(agent_name="coder")
        agent = create_agent(model, tools, middleware=[mw, TokenSavingMiddleware(signals_fn=loop_signals)])
    """

    def __init__(
        self,
        *,
        compress_threshold_chars: int = 1800,
        head_keep_chars: int = 900,
        tail_keep_chars: int = 700,
        keep_recent_tool_messages: int = 2,
        early_exit_min_call_index: int = 40,
        early_exit_text: str = EARLY_EXIT_TEXT,
        signals_fn: Any = None,
        enable_compression: bool = True,
        enable_early_exit: bool = True,
        enable_perplexity_compression: bool = False,
        perplexity_classifier: WordClassifier | None = None,
        perplexity_recent_cutoff: int = 3,
        perplexity_mid_cutoff: int = 10,
        perplexity_keep_ratio_mid: float = 0.55,
        perplexity_keep_ratio_old: float = 0.30,
        perplexity_window_words: int = 50,
        perplexity_min_content_words: int = 30,
    ) -> None:
        super().__init__()
        for name, value in (
            ("compress_threshold_chars", compress_threshold_chars),
            ("head_keep_chars", head_keep_chars),
            ("tail_keep_chars", tail_keep_chars),
            ("keep_recent_tool_messages", keep_recent_tool_messages),
            ("early_exit_min_call_index", early_exit_min_call_index),
            ("perplexity_recent_cutoff", perplexity_recent_cutoff),
            ("perplexity_min_content_words", perplexity_min_content_words),
        ):
            check_int(name, value, low=0)
        check_int("perplexity_window_words", perplexity_window_words, low=1)
        check_int("perplexity_mid_cutoff", perplexity_mid_cutoff, low=perplexity_recent_cutoff)
        for name, ratio in (("perplexity_keep_ratio_mid", perplexity_keep_ratio_mid),
                            ("perplexity_keep_ratio_old", perplexity_keep_ratio_old)):  # fmt: skip
            check_number(name, ratio, low=0.0, high=1.0)
        if head_keep_chars + tail_keep_chars > compress_threshold_chars:
            raise ValueError("head_keep_chars + tail_keep_chars must not exceed compress_threshold_chars")
        if signals_fn is not None and not callable(signals_fn):
            raise TypeError("signals_fn must be callable: (steps: list[dict]) -> dict[str, float]")
        if not isinstance(early_exit_text, str) or not early_exit_text.strip():
            raise ValueError("early_exit_text must be a non-empty string")
        for name, switch in (("enable_compression", enable_compression), ("enable_early_exit", enable_early_exit),
                             ("enable_perplexity_compression", enable_perplexity_compression)):  # fmt: skip
            check_bool(name, switch)
        if perplexity_classifier is not None and not callable(perplexity_classifier):
            what = "a callable (words: list[str]) -> list[bool], or None"
            raise expected("perplexity_classifier", what, perplexity_classifier)
        self.compress_threshold_chars = compress_threshold_chars
        self.head_keep_chars = head_keep_chars
        self.tail_keep_chars = tail_keep_chars
        self.keep_recent_tool_messages = keep_recent_tool_messages
        self.early_exit_min_call_index = early_exit_min_call_index
        self.early_exit_text = early_exit_text
        self.signals_fn = signals_fn
        self.enable_compression = enable_compression
        self.enable_early_exit = enable_early_exit
        self.enable_perplexity_compression = enable_perplexity_compression
        self.perplexity_classifier = perplexity_classifier
        self.perplexity_recent_cutoff = perplexity_recent_cutoff
        self.perplexity_mid_cutoff = perplexity_mid_cutoff
        self.perplexity_keep_ratio_mid = perplexity_keep_ratio_mid
        self.perplexity_keep_ratio_old = perplexity_keep_ratio_old
        self.perplexity_window_words = perplexity_window_words
        self.perplexity_min_content_words = perplexity_min_content_words
        self.stats = TokenSavingStats()
        self._lock = threading.Lock()
        # (message id, keep ratio) -> the compressed text; and a message's text before we first changed it
        self._decisions: BoundedMemo[tuple[str, float], str] = BoundedMemo("token_saving.perplexity", 4096)
        self._originals: BoundedMemo[str, str] = BoundedMemo("token_saving.originals", 4096)

    # -- hooks -------------------------------------------------------------------------------------------

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        try:
            return self._shrink(list(state["messages"]))
        except Exception:
            _log.warning("token saving failed; the model gets the history as it was", exc_info=True)
            return None

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    # -- internals ---------------------------------------------------------------------------------------

    def _shrink(self, messages: list[BaseMessage]) -> dict[str, Any] | None:
        replaced: dict[str, BaseMessage] = {}
        saved = compressions = 0
        if self.enable_compression:
            saved, compressions = self._compress_tool_outputs(messages, replaced)
        if self.enable_perplexity_compression and self.perplexity_classifier is not None:
            self._compress_stale(messages, replaced)
        update: list[BaseMessage] = list(replaced.values())
        early_exit = self._early_exit(messages)
        if early_exit is not None:
            update.append(early_exit)
        with self._lock:
            self.stats.compressions += compressions
            self.stats.chars_saved += saved
            self.stats.early_exits += early_exit is not None
            emitted = self.stats.replacements_emitted
            emitted.append(len(replaced))
            if len(emitted) > 2 * _KEEP_REPLACEMENTS:  # bounded (a long-lived middleware serves many runs), trimmed
                del emitted[:-_KEEP_REPLACEMENTS]  # in batches so appending stays O(1)
        # what this call removed from the history (tool outputs and stale messages together), for telemetry
        removed = sum(len(message_text(m)) for m in messages if m.id in replaced) - sum(
            len(message_text(m)) for m in replaced.values()
        )
        if replaced or early_exit is not None:
            guard().note(node_run_id(), TokensSaved(removed, len(replaced), int(early_exit is not None)))
        return {"messages": update} if update else None

    def _compress_tool_outputs(self, messages: list[BaseMessage], replaced: dict[str, BaseMessage]) -> tuple[int, int]:
        tools = [m for m in messages if isinstance(m, ToolMessage)]
        old = tools[: max(len(tools) - self.keep_recent_tool_messages, 0)]
        saved = compressions = 0
        for message in old:
            text = message.content if isinstance(message.content, str) else message_text(message)
            if message.id is None or len(text) <= self.compress_threshold_chars:
                continue  # no id: the reducer could not replace it, so it is left alone
            short = compress_tool_output(
                text, self.compress_threshold_chars, self.head_keep_chars, self.tail_keep_chars
            )
            self._originals.put(message.id, text)
            replaced[message.id] = message.model_copy(update={"content": short})
            saved += len(text) - len(short)
            compressions += 1
        return saved, compressions

    def _compress_stale(self, messages: list[BaseMessage], replaced: dict[str, BaseMessage]) -> None:
        calls_after = 0
        classifier = self.perplexity_classifier
        assert classifier is not None
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                calls_after += 1
            if not isinstance(message, AIMessage | ToolMessage) or message.id is None:
                continue
            if calls_after < self.perplexity_recent_cutoff:
                continue
            ratio = (
                self.perplexity_keep_ratio_mid
                if calls_after < self.perplexity_mid_cutoff
                else self.perplexity_keep_ratio_old
            )
            current = replaced.get(message.id, message)
            original = self._originals.get(message.id) or message_text(current)
            if len(original.split()) < self.perplexity_min_content_words:
                continue
            key = (message.id, ratio)
            kept = self._decisions.get(key)
            if kept is not None:
                with self._lock:
                    self.stats.perplexity_cache_hits += 1
            else:
                kept = self._decisions.put(
                    key, keep_words(original, classifier, keep_ratio=ratio, window_words=self.perplexity_window_words)
                )
            if kept == message_text(current):
                continue  # already in this form in the history
            self._originals.put(message.id, original)
            replaced[message.id] = current.model_copy(update={"content": kept})
            with self._lock:
                self.stats.perplexity_compressions += 1
                self.stats.perplexity_chars_saved += max(len(message_text(current)) - len(kept), 0)

    def _early_exit(self, messages: list[BaseMessage]) -> HumanMessage | None:
        if not self.enable_early_exit or self.signals_fn is None:
            return None
        if sum(isinstance(m, AIMessage) for m in messages) < self.early_exit_min_call_index:
            return None
        if any(isinstance(m, HumanMessage) and m.additional_kwargs.get(_EARLY_EXIT_KEY) for m in messages):
            return None  # at most once per run
        signals = self.signals_fn(build_steps_from_messages(messages))
        if not early_exit_fires(signals or {}):
            return None
        return HumanMessage(self.early_exit_text, additional_kwargs={_EARLY_EXIT_KEY: True})
