"""``run_messages_agent_loop``: a tool-using agent loop on the Anthropic Messages API, steered turn by turn.

docs/frameworks.md, "Anthropic Messages API". Without a session it is a plain loop. With one (``rb.anthropic_loop``
makes it), every turn:
the last assistant text (thinking blocks included) is the thought -> ``begin_step`` -> the ``[REASONBLOCKS]``
block is added to ``system`` when something fired (a separate, uncached block after the cached base, as the
LangChain middleware sends it) -> the routed model, ``provider:`` prefix stripped -> ``client.messages.create``
inside a ``chat`` span -> ``end_step`` with tokens (cache reads and writes included), tool names and latency;
every dispatched tool is an ``execute_tool`` span; all under the run's ``invoke_agent`` span, which the loop ends
(``success``, ``failure: max_steps``, or ``failure: <exception>``). The model's and the tools' exceptions reach
the caller unchanged. No streaming.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from rb_otel.integrations.live_calls import LiveCall, strip_provider
from rb_otel.integrations.steered_runs import SteeredRun, steered_run_of
from rb_otel.steering.rendering import system_blocks
from rb_otel.steering.session import SteeringSession
from rb_otel.telemetry import ChatResponse, ToolInvocation

__all__ = ["Dispatch", "arun_messages_agent_loop", "run_messages_agent_loop"]

_log = logging.getLogger("rb_otel.integrations.anthropic")

#: ``dispatch(tool_name, tool_input) -> result``: runs one tool the model asked for (a coroutine function in the
#: async loop is awaited).
Dispatch = Callable[[str, dict[str, Any]], Any]
_PROVIDER = "anthropic"
#: A call's tokens, as the step log counts them: fresh input, output, cache writes and cache reads.
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
#: ``json.dumps`` as the LangChain middleware writes a tool call's input (so both score alike).
_ENCODER = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False)


def run_messages_agent_loop(
    client: Any,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tool_specs: Sequence[Mapping[str, Any]],
    dispatch: Dispatch,
    system: str = "",
    max_steps: int = 40,
    max_tokens: int = 4096,
    session: SteeringSession | None = None,
) -> dict[str, Any]:
    """Run the agent until it answers without a tool call or ``max_steps`` model calls were made.

    ``client`` is an ``anthropic.Anthropic`` (use :func:`arun_messages_agent_loop` for ``AsyncAnthropic``);
    ``messages`` (not modified) the conversation so far; ``tool_specs`` the API's tool definitions. Returns
    ``{"final_text", "messages", "stop_reason", "tool_calls": [(name, input, result), ...]}``; ``stop_reason``
    is the API's (``"end_turn"``, ``"stop_sequence"``, ...) or ``"max_steps"``.
    """
    if _is_async(client):
        raise TypeError("run_messages_agent_loop got an async client: use arun_messages_agent_loop")
    loop = _Loop(
        model=model,
        messages=messages,
        tool_specs=tool_specs,
        system=system,
        max_steps=max_steps,
        max_tokens=max_tokens,
        session=session,
    )
    try:
        while (request := loop.next_request()) is not None:
            call, kwargs = request
            try:
                reply = client.messages.create(**kwargs)
            except BaseException as exc:
                loop.model_failed(call, exc)
                raise
            for name, tool_input, tool_id in loop.answered(call, reply):
                tool = loop.start_tool(name, tool_id, tool_input)
                try:
                    result = dispatch(name, tool_input)
                except BaseException as exc:
                    loop.tool_failed(tool, exc)
                    raise
                loop.tool_done(tool, name, tool_input, tool_id, result)
    except BaseException as exc:
        loop.finish(f"failure: {type(exc).__name__}")
        raise
    return loop.result()


async def arun_messages_agent_loop(
    client: Any,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    tool_specs: Sequence[Mapping[str, Any]],
    dispatch: Callable[[str, dict[str, Any]], Any | Awaitable[Any]],
    system: str = "",
    max_steps: int = 40,
    max_tokens: int = 4096,
    session: SteeringSession | None = None,
) -> dict[str, Any]:
    """:func:`run_messages_agent_loop` for an ``anthropic.AsyncAnthropic`` client; ``dispatch`` may be async."""
    loop = _Loop(
        model=model,
        messages=messages,
        tool_specs=tool_specs,
        system=system,
        max_steps=max_steps,
        max_tokens=max_tokens,
        session=session,
    )
    try:
        while (request := loop.next_request()) is not None:
            call, kwargs = request
            try:
                reply = await client.messages.create(**kwargs)
            except BaseException as exc:
                loop.model_failed(call, exc)
                raise
            for name, tool_input, tool_id in loop.answered(call, reply):
                tool = loop.start_tool(name, tool_id, tool_input)
                try:
                    result = dispatch(name, tool_input)
                    if inspect.isawaitable(result):
                        result = await result
                except BaseException as exc:
                    loop.tool_failed(tool, exc)
                    raise
                loop.tool_done(tool, name, tool_input, tool_id, result)
    except BaseException as exc:
        loop.finish(f"failure: {type(exc).__name__}")
        raise
    return loop.result()


class _Loop:
    """The loop's state and everything it does between the API calls and the tool calls (shared by both)."""

    def __init__(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tool_specs: Sequence[Mapping[str, Any]],
        system: str,
        max_steps: int,
        max_tokens: int,
        session: SteeringSession | None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("model must be a non-empty model id")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        self.model = model
        self.messages: list[dict[str, Any]] = [dict(m) for m in messages]
        self.tool_specs = [dict(t) for t in tool_specs]
        self.system = system
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.session = session
        self.run: SteeredRun | None = steered_run_of(session) if session is not None else None
        self.calls = 0
        self.stop_reason = "max_steps"
        self.final_text = ""
        self.tool_calls: list[tuple[str, dict[str, Any], Any]] = []
        self._results: list[dict[str, Any]] = []
        self._last_tokens = 0  # the previous call's, for step scorers that read it
        if session is not None:
            session.start()

    # -- model calls ---------------------------------------------------------------------------------------

    def next_request(self) -> tuple[LiveCall | None, dict[str, Any]] | None:
        """The next call's steering and ``messages.create`` arguments, or ``None`` when the loop is done."""
        if self._results:
            self.messages.append({"role": "user", "content": self._results})
            self._results = []
        if self.stop_reason != "max_steps" or self.calls >= self.max_steps:
            self.finish("success" if self.stop_reason != "max_steps" else "failure: max_steps")
            return None
        model: str = self.model
        system: str | list[dict[str, Any]] = self.system
        try:
            call = self._steer()
            if call is not None:
                model = strip_provider(call.decision.model_override or self.model)
                guidance = call.decision.rendered_injection_text
                if guidance:
                    base = [{"type": "text", "text": self.system}] if self.system else []
                    system = system_blocks(base, guidance, cache_control=True)
                call.open(request_model=model, provider=_PROVIDER, input_messages=self.messages)
        except Exception:  # a steering failure never stops the agent: this call goes out unmodified
            _log.warning("steering the call failed, calling the model unmodified", exc_info=True)
            call, model, system = None, self.model, self.system
        kwargs: dict[str, Any] = {"model": model, "max_tokens": self.max_tokens, "messages": list(self.messages)}
        if system:
            kwargs["system"] = system
        if self.tool_specs:
            kwargs["tools"] = self.tool_specs
        self.calls += 1
        return call, kwargs

    def _steer(self) -> LiveCall | None:
        if self.session is None:
            return None
        recorder = self.run.recorder if self.run is not None else None
        if self.calls == 0:
            return LiveCall.begin(self.session, recorder, thought=None, model_id=self.model)
        turn = _last_turn(self.messages)
        return LiveCall.begin(
            self.session,
            recorder,
            thought=turn["thought"],
            action=turn["action"],
            action_input=turn["action_input"],
            observation=turn["observation"],
            error=turn["error"],
            tokens=self._last_tokens,
            reasoning=turn["reasoning"],
            model_id=self.model,
        )

    def model_failed(self, call: LiveCall | None, error: BaseException) -> None:
        if call is not None:
            call.failed(error)

    def answered(self, call: LiveCall | None, reply: Any) -> list[tuple[str, dict[str, Any], str]]:
        """Record the reply; returns the tool calls it asks for (``[]`` when it is the final answer)."""
        blocks = [_block(b) for b in (getattr(reply, "content", None) or [])]
        self.messages.append({"role": "assistant", "content": blocks})
        usage = getattr(reply, "usage", None)
        self._last_tokens = sum(int(getattr(usage, k, 0) or 0) for k in _TOKEN_FIELDS)
        uses = [
            (str(b.get("name", "")), dict(b.get("input") or {}), str(b.get("id", "")))
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        if call is not None:
            call.succeeded(
                _chat_response(reply, usage),
                tokens=self._last_tokens,
                tool_calls=[u[0] for u in uses],
                model_id=call.decision.model_override or "",
            )
        reason = str(getattr(reply, "stop_reason", "") or "")
        if reason == "tool_use" and uses:
            return uses
        self.stop_reason = reason or "end_turn"
        self.final_text = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()
        return []

    # -- tool calls ----------------------------------------------------------------------------------------

    def start_tool(self, name: str, tool_id: str, tool_input: dict[str, Any]) -> ToolInvocation | None:
        if self.run is None:
            return None
        try:  # the arguments are recorded only when content capture is on (the recorder's policy)
            return self.run.recorder.start_tool(
                step=max(self.run.session.steps_begun - 1, 0), name=name, call_id=tool_id, arguments=tool_input
            )
        except Exception:
            _log.warning("opening the tool span failed; continuing", exc_info=True)
            return None

    def tool_failed(self, tool: ToolInvocation | None, error: BaseException) -> None:
        if tool is not None:
            tool.fail(error)

    def tool_done(
        self, tool: ToolInvocation | None, name: str, tool_input: dict[str, Any], tool_id: str, result: Any
    ) -> None:
        if tool is not None:
            tool.stop(result)
        self.tool_calls.append((name, tool_input, result))
        content = result if isinstance(result, str | list) else json.dumps(result, default=str)
        self._results.append({"type": "tool_result", "tool_use_id": tool_id, "content": content})

    # -- the end -------------------------------------------------------------------------------------------

    def finish(self, outcome: str) -> None:
        if self.session is not None and not self.session.finished:
            try:
                self.session.finish(outcome_status=outcome)
            except Exception:
                _log.warning("finishing the run failed", exc_info=True)

    def result(self) -> dict[str, Any]:
        return {
            "final_text": self.final_text,
            "messages": self.messages,
            "stop_reason": self.stop_reason,
            "tool_calls": list(self.tool_calls),
        }


def _is_async(client: Any) -> bool:
    """``AsyncAnthropic`` (and look-alikes): an ``Async*`` class, or a ``messages.create`` coroutine function."""
    if any(cls.__name__.startswith("Async") for cls in type(client).__mro__):
        return True
    return inspect.iscoroutinefunction(getattr(getattr(client, "messages", None), "create", None))


def _block(block: Any) -> dict[str, Any]:
    """A content block of a reply as the dict the next request sends back."""
    if isinstance(block, Mapping):
        return dict(block)
    dump = getattr(block, "model_dump", None)
    if callable(dump):
        return dict(dump(mode="json", exclude_none=True))
    return {"type": str(getattr(block, "type", "")), "text": str(getattr(block, "text", ""))}


def _chat_response(reply: Any, usage: Any) -> ChatResponse:
    def tokens(name: str) -> int | None:
        value = getattr(usage, name, None)
        return int(value) if isinstance(value, int) else None

    fresh, reads, writes = (
        tokens("input_tokens"),
        tokens("cache_read_input_tokens"),
        tokens("cache_creation_input_tokens"),
    )
    # gen_ai.usage.input_tokens counts every input token, cached ones included (the semantic conventions)
    total_input = None if fresh is None else fresh + (reads or 0) + (writes or 0)
    reason = getattr(reply, "stop_reason", None)
    return ChatResponse(
        response_model=str(getattr(reply, "model", "") or ""),
        response_id=str(getattr(reply, "id", "") or ""),
        finish_reasons=[str(reason)] if reason else [],
        input_tokens=total_input,
        output_tokens=tokens("output_tokens"),
        cache_read_tokens=reads,
        cache_creation_tokens=writes,
    )


def _text_of(content: Any, kinds: tuple[str, ...]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or ():
        if isinstance(block, Mapping) and block.get("type") in kinds:
            value = block.get("text") if block.get("type") != "thinking" else block.get("thinking")
            if isinstance(value, str) and value:
                parts.append(value)
    return " ".join(parts)


def _last_turn(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The newest assistant turn's text (thinking included), reasoning and first tool call, and the newest tool
    result (as the LangChain middleware reads its messages)."""
    turn: dict[str, Any] = {
        "thought": "",
        "reasoning": "",
        "action": None,
        "action_input": None,
        "observation": None,
        "error": False,
    }
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "user" and turn["observation"] is None and isinstance(content, list):
            results = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_result"]
            if results:
                turn["observation"] = " ".join(_text_of(b.get("content"), ("text",)) for b in results)
                turn["error"] = any(bool(b.get("is_error")) for b in results)
        elif message.get("role") == "assistant":
            turn["thought"] = _text_of(content, ("thinking", "text"))
            turn["reasoning"] = _text_of(content, ("thinking",)) if not isinstance(content, str) else ""
            uses = [b for b in content or () if isinstance(b, Mapping) and b.get("type") == "tool_use"]
            if uses:
                turn["action"] = str(uses[0].get("name") or "")
                turn["action_input"] = _ENCODER.encode(uses[0].get("input"))
            break
    return turn
