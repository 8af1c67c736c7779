"""Kinds of agent: inferred from tools by one rule live and in replay, named by the user, recorded on the run span,
and the pilot's default model chosen by it (docs/signal.md, "A default pilot per kind")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Otel
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from rb_otel import ReasonBlocks
from rb_otel.backends.pilot import PilotScorer
from rb_otel.importers import replay
from rb_otel.steering.pilot import PilotModel
from rb_otel.steering.pilot.kinds import (
    AGENT_KINDS,
    CODING,
    CUSTOMER_SERVICE,
    checked_kind,
    infer_agent_kind,
    is_coding_tool,
)
from rb_otel.steering.pilot.model import DEFAULT_FOR_KIND
from rb_otel.testing import ScriptedChatModel, tool_call


@pytest.mark.parametrize(
    "name",
    ["bash", "Bash", "execute_bash", "run_command", "shell", "str_replace_editor", "str_replace_based_edit_tool",
     "edit_file", "write_file", "create_file", "apply_patch", "delete_file", "execute_ipython_cell", "python"],
)  # fmt: skip
def test_shells_and_file_editors_are_coding_tools(name: str) -> None:
    assert is_coding_tool(name)


@pytest.mark.parametrize(
    "name",
    ["update_reservation", "cancel_reservation", "book_reservation", "get_user_details", "read_file", "think",
     "transfer_to_human_agents", "calculate", "search_flights", "file_search", "write", "send_certificate"],
)  # fmt: skip
def test_domain_tools_and_readers_are_not(name: str) -> None:
    assert not is_coding_tool(name)


@given(st.lists(st.sampled_from(["get_order", "refund", "think", "lookup_user"]), max_size=6), st.booleans())
def test_one_coding_tool_makes_a_coding_agent(names: list[str], with_shell: bool) -> None:
    tools = [*names, "bash"] if with_shell else names
    assert infer_agent_kind(tools) == (CODING if with_shell else CUSTOMER_SERVICE)


def test_a_named_kind_is_checked_at_the_boundary() -> None:
    assert checked_kind("coding") == CODING and checked_kind(None) is None and checked_kind("") is None
    with pytest.raises(ValueError, match="agent_kind must be one of 'coding', 'customer_service', got 'chat'"):
        checked_kind("chat")
    with pytest.raises(ValueError, match="agent_kind must be one of"):
        ReasonBlocks(scorer="pilot", agent_kind="chat")


def test_every_kind_has_a_shipped_default_model() -> None:
    assert set(DEFAULT_FOR_KIND) == set(AGENT_KINDS)
    for kind in AGENT_KINDS:
        model = PilotModel.default_for(kind)
        assert model.version.startswith("pilot/")
    assert PilotModel.default_for("").version == PilotModel.load().version


def test_the_scorer_picks_the_model_of_the_runs_kind_unless_one_is_given(tmp_path: Path) -> None:
    coding = PilotModel.default_for(CODING)
    custom = PilotModel(0.5, coding.weights, coding.prior, coding.fsm, version="pilot/2", features=coding.features)
    chooser = PilotScorer()
    assert chooser.chooses_by_kind and chooser.name_for(CODING) == PilotModel.default_for(CODING).version
    assert chooser.start_run("a|m", kind=CUSTOMER_SERVICE)._model == PilotModel.default_for(CUSTOMER_SERVICE)
    fixed = PilotScorer(model=custom)
    assert not fixed.chooses_by_kind and fixed.start_run("a|m", kind=CODING)._model is custom
    named = PilotScorer(agent_kind=CODING)
    assert named.model_for(CUSTOMER_SERVICE) == PilotModel.default_for(CODING)  # the user's word wins


@tool
def bash(command: str) -> str:
    """Run a shell command."""
    return "ok"


@tool
def get_order(order_id: str) -> str:
    """Look up an order."""
    return "{}"


def _run_agent(otel: Otel, tools: list, **rb_args: str) -> dict:
    name = tools[0].name
    model = ScriptedChatModel(script=[tool_call(name, {"command": "ls"} if name == "bash" else {"order_id": "1"}, "c1"),
                                      AIMessage("done")])  # fmt: skip
    rb = ReasonBlocks(scorer="pilot", tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                      **rb_args)  # fmt: skip
    agent = create_agent(model, tools, middleware=[rb.middleware(agent_name="a")])
    agent.invoke({"messages": [HumanMessage("go")]})
    [root] = otel.spans("invoke_agent")
    return dict(root.attributes or {})


def test_a_live_run_infers_its_kind_from_the_agents_tools_and_records_it(otel: Otel) -> None:
    attrs = _run_agent(otel, [bash])
    assert attrs["rb.agent.kind"] == CODING
    scored = [dict(s.attributes or {}) for s in otel.spans("chat") if "rb.difficulty" in (s.attributes or {})]
    assert scored and {a["rb.scorer"] for a in scored} == {PilotModel.default_for(CODING).version}


def test_a_named_kind_overrides_the_tools(otel: Otel) -> None:
    attrs = _run_agent(otel, [get_order], agent_kind=CODING)
    assert attrs["rb.agent.kind"] == CODING


def test_a_customer_service_agent(otel: Otel) -> None:
    assert _run_agent(otel, [get_order])["rb.agent.kind"] == CUSTOMER_SERVICE


def test_replay_uses_the_same_rule(otel: Otel, tmp_path: Path) -> None:
    messages = [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "look", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "done"},
    ]  # fmt: skip
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"messages": messages}))
    replay(path, scorer="pilot", tracer_provider=otel.tracer_provider)
    [root] = otel.spans("invoke_agent")
    assert dict(root.attributes or {})["rb.agent.kind"] == CODING
    otel.exporter.clear()
    replay(path, scorer="heuristic", tracer_provider=otel.tracer_provider)
    [root] = otel.spans("invoke_agent")
    assert "rb.agent.kind" not in dict(root.attributes or {})  # the kind is the pilot's: said where it chose
