"""What the adapter tests compare with the LangChain middleware: span trees and step rows of one conversation."""

from __future__ import annotations

from typing import Any

from conftest import Otel, add, calc_script
from langchain.agents import create_agent

from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel

PROMPT = "You are a calculator."
#: The step attributes every adapter must give as the middleware does (injection sources only where it steers).
STEP_KEYS = ("rb.step", "rb.fsm_state", "rb.difficulty", "rb.tool_calls")


def span_tree(otel: Otel) -> list[tuple[str, str | None]]:
    """(operation, parent's operation) of every finished span, in start order (model names left out)."""
    spans = sorted(otel.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    names = {s.context.span_id: s.name.split(" ")[0] for s in spans}
    return [(s.name.split(" ")[0], names.get(s.parent.span_id) if s.parent else None) for s in spans]


def step_rows(otel: Otel, keys: tuple[str, ...] = STEP_KEYS) -> list[tuple[Any, ...]]:
    """``keys`` of every ``chat`` span, in start order."""
    chats = sorted(otel.spans("chat "), key=lambda s: s.start_time or 0)
    return [tuple((s.attributes or {}).get(k) for k in keys) for s in chats]


def langchain_reference(otel: Otel, keys: tuple[str, ...] = STEP_KEYS) -> tuple[list[Any], list[Any]]:
    """The calculator conversation (``conftest.calc_script``) through the middleware: its tree and step rows;
    the exporter is cleared afterwards for the adapter under test."""
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent = create_agent(
        ScriptedChatModel(script=calc_script()),
        [add],
        middleware=[rb.middleware(agent_name="calc")],
        system_prompt=PROMPT,
    )
    agent.invoke({"messages": [("user", "what is 1+2?")]})
    rb.telemetry.flush()
    reference = span_tree(otel), step_rows(otel, keys)
    otel.exporter.clear()
    return reference
