"""``GeneralMonitorMiddleware`` (docs/experiments.md, "GeneralMonitorMiddleware"): five rule-based detectors that add a
short corrective hint.

Before each model call the rules of :mod:`rb_otel.steering.general_monitor` are checked in priority order; the
first that holds, and is not cooling down (``cooldown`` model calls since it last fired in this run), adds its
hint as a ``HumanMessage`` at the end of the messages (after the cached prefix, so the prompt cache holds). When
``ReasonBlocksMiddleware`` records the run, the model call that gets the hint carries it on its ``chat`` span
(``rb.general_monitor.rules`` and a ``rb.general_monitor.hint`` event). Failures are logged and the model is
called without a hint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.runtime import Runtime

from rb_otel.integrations.langchain._graph_context import node_run_id
from rb_otel.integrations.langchain._guard import guard
from rb_otel.integrations.langchain.notes import HintGiven
from rb_otel.integrations.langchain.token_saving import build_steps_from_messages
from rb_otel.steering.checks import check_int, expected
from rb_otel.steering.general_monitor import DEFAULT_SUBMIT_TOOLS, DEFAULT_VERIFY_TOOLS, HINTS, first_rule

__all__ = ["GeneralMonitorMiddleware"]

_log = logging.getLogger("rb_otel.integrations.langchain")
#: Marks our hints in the history: the rule's name (cooldowns are read from the run's own messages).
_HINT_KEY = "rb_general_monitor"


def _tool_names(name: str, value: object) -> frozenset[str]:
    """``value`` as a set of tool names; a bare ``str`` is refused (it would be read as a set of letters)."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise expected(name, "a set of tool names (e.g. frozenset({'bash'}))", value)
    names = frozenset(value)
    if not all(isinstance(tool, str) for tool in names):
        raise expected(name, "a set of tool names (str)", next(t for t in names if not isinstance(t, str)))
    return names


class GeneralMonitorMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Rule-based hints for a struggling agent. ``max_tool_calls`` is the reference budget of the sprawl,
    idle-response and low-novelty rules; ``cooldown`` the model calls between two firings of one rule."""

    def __init__(
        self,
        max_tool_calls: int = 50,
        pack: str = "v1",
        verify_tools: frozenset[str] = DEFAULT_VERIFY_TOOLS,
        submit_tools: frozenset[str] = DEFAULT_SUBMIT_TOOLS,
        *,
        cooldown: int = 8,
    ) -> None:
        super().__init__()
        if pack != "v1":
            raise ValueError(f"unknown rule pack {pack!r}; the only pack is 'v1'")
        check_int("max_tool_calls", max_tool_calls, low=1)
        check_int("cooldown", cooldown, low=1)
        self.max_tool_calls = max_tool_calls
        self.pack = pack
        self.verify_tools = _tool_names("verify_tools", verify_tools)
        self.submit_tools = _tool_names("submit_tools", submit_tools)
        self.cooldown = cooldown
        self.fired: dict[str, int] = dict.fromkeys(HINTS, 0)  # firings per rule, over every run served

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        try:
            return self._check(list(state["messages"]))
        except Exception:
            _log.warning("general monitor failed; calling the model without a hint", exc_info=True)
            return None

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.before_model(state, runtime)

    def _cooling(self, messages: list[BaseMessage]) -> frozenset[str]:
        """Rules that fired fewer than ``cooldown`` model calls ago in this run."""
        cooling: set[str] = set()
        calls_since = 0
        for message in reversed(messages):
            if isinstance(message, AIMessage):
                calls_since += 1
                if calls_since >= self.cooldown:
                    break
            elif isinstance(message, HumanMessage) and message.additional_kwargs.get(_HINT_KEY):
                cooling.add(str(message.additional_kwargs[_HINT_KEY]))
        return frozenset(cooling)

    def _check(self, messages: list[BaseMessage]) -> dict[str, Any] | None:
        steps = build_steps_from_messages(messages)
        if steps and steps[-1]["action"] in self.submit_tools:
            return None  # the agent is submitting: no hint now
        rule = first_rule(steps, budget=self.max_tool_calls, verify=self.verify_tools, cooling=self._cooling(messages))
        if rule is None:
            return None
        self.fired[rule] += 1
        guard().note(node_run_id(), HintGiven(rule, HINTS[rule]))
        return {"messages": [HumanMessage(HINTS[rule], additional_kwargs={_HINT_KEY: rule})]}
