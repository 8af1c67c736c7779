"""``claude_agent_telemetry``: the Claude Agent SDK's ``query()`` message stream, recorded as an rb-otel run.

It passes every message through unchanged and reads (docs/frameworks.md, "Other frameworks"): the first message
opens the ``invoke_agent`` span (the CLI's ``init`` system message, whose ``tools`` say the run's kind of agent);
each assistant turn (the messages sharing one ``message_id``: the CLI sends a turn's blocks one message at a time)
is one step and one ``chat`` span, from the message before it to its arrival, with its usage's tokens and the tools
it asked for; each ``tool_use`` block opens an ``execute_tool`` span that its ``tool_result`` ends (an ``is_error``
result fails it; the result is cut to 8,000 characters and recorded only with content capture on); the
``ResultMessage`` ends the run (``success``, else ``failure: <subtype>``). A stream that raises, or ends or is
closed before its result, ends the run as ``failure: <exception>`` / ``failure: incomplete``.

Telemetry only: the SDK runs the agent loop itself, so there is no request to steer; steps are scored and move
the FSM (dashboards of states cover these runs too). Subagent messages (``parent_tool_use_id``) count as turns of
the same run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Protocol

from claude_agent_sdk import AssistantMessage, ResultMessage, SystemMessage, UserMessage
from claude_agent_sdk.types import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

from rb_otel.integrations.steered_runs import RunFactory, SteeredRun
from rb_otel.telemetry import ChatInvocation, ChatResponse, ToolInvocation
from rb_otel.types import RunFields, StepDecision

__all__ = ["claude_agent_telemetry"]

_log = logging.getLogger("rb_otel.integrations.claude_agent")
_OBSERVATION_CHARS = 8000
_TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


class HasRuns(Protocol):
    """What the adapter needs of a ``ReasonBlocks``: its run factory."""

    @property
    def runs(self) -> RunFactory: ...


async def claude_agent_telemetry(
    messages: AsyncIterable[Any],
    rb: HasRuns,
    *,
    agent_name: str = "",
    task: str = "",
    model: str = "",
    **metadata: Any,
) -> AsyncIterator[Any]:
    """``async for message in claude_agent_telemetry(query(prompt=..., options=...), rb, agent_name="coder")``."""
    fields = RunFields(agent_name=agent_name, task=task, framework="claude-agent-sdk", model=model)
    rb.runs.watch_agent(agent_name)

    def opened(first: Any = None) -> _ClaudeRun:
        # the run opens at the stream's first message: the CLI's init message names the agent's tools (its kind)
        return _ClaudeRun(rb.runs.open(fields, metadata=metadata, steer=False, tools=_init_tools(first)))

    run: _ClaudeRun | None = None
    try:
        async for message in messages:
            run = run or opened(message)
            run.see(message)
            yield message
    except BaseException as exc:
        run = run or opened()
        run.end(f"failure: {type(exc).__name__}", error=None if isinstance(exc, GeneratorExit) else exc)
        raise
    (run or opened()).end("failure: incomplete")


def _init_tools(message: Any) -> list[str] | None:
    """The tools the Claude Code CLI offers the agent, from its ``init`` system message (``None`` for any other
    message: not known)."""
    if not isinstance(message, SystemMessage) or message.subtype != "init":
        return None
    tools = message.data.get("tools") if isinstance(message.data, dict) else None
    return [str(t) for t in tools if isinstance(t, str)] if isinstance(tools, list) else None


class _ClaudeRun:
    """One ``query()`` stream's run: the turn being read, the tools in flight. ``see`` never raises."""

    def __init__(self, run: SteeredRun) -> None:
        self.run = run
        self.turn_id: str | None = None
        self.turn: StepDecision | None = None
        self.chat: ChatInvocation | None = None
        self.response: ChatResponse | None = None
        self.turn_started = self.turn_answered = time.time()
        self.turn_tokens = 0
        self.turn_tools: list[str] = []
        self.turn_text: list[str] = []
        self.previous_text: str | None = None  # the thought of the next turn
        self.last_event = time.time()
        self.tools: dict[str, ToolInvocation] = {}
        self.outcome: str | None = None
        run.session.start()

    def see(self, message: Any) -> None:
        try:
            if isinstance(message, AssistantMessage):
                self._assistant(message)
            elif isinstance(message, UserMessage):
                self._close_turn()
                self._tool_results(message)
            elif isinstance(message, ResultMessage):
                self._close_turn()
                failed = message.is_error or message.subtype != "success"
                self.outcome = f"failure: {message.subtype}" if failed else "success"
        except Exception:
            _log.warning("recording a Claude Agent SDK message failed; continuing", exc_info=True)
        self.last_event = time.time()

    def _assistant(self, message: AssistantMessage) -> None:
        if self.turn is None or message.message_id is None or message.message_id != self.turn_id:
            self._close_turn()
            self._open_turn(message)
        self.turn_answered = time.time()  # the turn's span ends with its last message
        for block in message.content:
            if isinstance(block, TextBlock | ThinkingBlock):
                self.turn_text.append(block.text if isinstance(block, TextBlock) else block.thinking)
            elif isinstance(block, ToolUseBlock):
                self.turn_tools.append(block.name)
                self.tools[block.id] = self.run.recorder.start_tool(
                    step=self.run.session.steps_begun - 1,
                    name=block.name,
                    call_id=block.id,
                    arguments=block.input,  # recorded only with content capture on
                    current=False,
                )

    def _open_turn(self, message: AssistantMessage) -> None:
        session = self.run.session
        self.turn = decision = session.begin_step(thought=self.previous_text, model_id=message.model)
        self.turn_id = message.message_id
        usage = message.usage or {}
        self.turn_tokens = sum(int(usage.get(k) or 0) for k in _TOKEN_KEYS)
        self.turn_tools, self.turn_text = [], []
        self.turn_started = self.last_event
        evaluation = decision.evaluation
        # the call began after the previous message: its span starts there, and ends when the turn is read
        self.chat = self.run.recorder.start_chat(
            decision.entry,
            request_model=message.model,
            provider="anthropic",
            steering_ms=decision.steering_ms,
            composite=evaluation.composite if evaluation else None,
            current=False,
            start_time=self.last_event,
        )
        self.response = _chat_response(message.model, usage)

    def _close_turn(self) -> None:
        decision, self.turn = self.turn, None
        if decision is None:
            return
        self.previous_text = " ".join(t for t in self.turn_text if t)
        latency_ms = max(self.turn_answered - self.turn_started, 0.0) * 1000.0
        entry = self.run.session.end_step(
            decision, tokens=self.turn_tokens, tool_calls=self.turn_tools, latency_ms=latency_ms
        )
        if self.chat is not None:
            self.chat.stop(self.response, step=entry, end_time=self.turn_answered)

    def _tool_results(self, message: UserMessage) -> None:
        if isinstance(message.content, str):
            return
        for block in message.content:
            if not isinstance(block, ToolResultBlock):
                continue
            tool = self.tools.pop(block.tool_use_id, None)
            if tool is None:
                continue
            text = _result_text(block.content)[:_OBSERVATION_CHARS]
            if block.is_error:
                tool.fail(text or "tool error")
            else:
                tool.stop(text)

    def end(self, fallback: str, *, error: BaseException | None = None) -> None:
        """End the run: with the result's outcome if one arrived, else ``fallback``; tools left open end too."""
        try:
            self._close_turn()
            for tool in self.tools.values():
                tool.interrupt()
            self.tools.clear()
            outcome = self.outcome or fallback
            # a result that arrived says how the run ended; the error is the run's only without one
            self.run.session.finish(outcome_status=outcome, error=error if self.outcome is None else None)
        except Exception:
            _log.warning("finishing the Claude Agent SDK run failed", exc_info=True)


def _chat_response(model: str, usage: Mapping[str, Any]) -> ChatResponse:
    def tokens(key: str) -> int | None:
        value = usage.get(key)
        return int(value) if isinstance(value, int) else None

    fresh, reads, writes = (
        tokens("input_tokens"),
        tokens("cache_read_input_tokens"),
        tokens("cache_creation_input_tokens"),
    )
    return ChatResponse(
        response_model=model,
        input_tokens=None if fresh is None else fresh + (reads or 0) + (writes or 0),
        output_tokens=tokens("output_tokens"),
        cache_read_tokens=reads,
        cache_creation_tokens=writes,
    )


def _result_text(content: str | list[dict[str, Any]] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
