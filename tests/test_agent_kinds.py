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
    UNKNOWN,
    checked_kind,
    infer_agent_kind,
    is_coding_tool,
    tool_names,
)
from rb_otel.steering.pilot.model import DEFAULT_FOR_KIND
from rb_otel.testing import ScriptedChatModel, tool_call


@pytest.mark.parametrize(
    "name",
    ["bash", "Bash", "execute_bash", "run_command", "shell", "str_replace_editor", "str_replace_based_edit_tool",
     "edit_file", "write_file", "create_file", "apply_patch", "delete_file", "execute_ipython_cell", "python",
     "execute_code", "write", "search_replace", "run_code", "terminal_run", "bash_tool", "read_file", "list_dir",
     "grep"],
)  # fmt: skip
def test_shells_editors_and_code_readers_are_coding_tools(name: str) -> None:
    assert is_coding_tool(name)


@pytest.mark.parametrize(
    "name",
    ["update_reservation", "cancel_reservation", "book_reservation", "get_user_details", "think", "run_speed_test",
     "transfer_to_human_agents", "calculate", "search_flights", "file_search", "send_certificate", "web_search",
     "get_order_details", "list_all_airports", "toggle_data", "reboot_device", "submit", "finish", "browser"],
)  # fmt: skip
def test_domain_tools_and_others_are_not(name: str) -> None:
    assert not is_coding_tool(name)


@given(st.lists(st.sampled_from(["get_order", "refund", "think", "lookup_user"]), min_size=1, max_size=6),
       st.booleans())  # fmt: skip
def test_one_coding_tool_makes_a_coding_agent(names: list[str], with_shell: bool) -> None:
    tools = [*names, "bash"] if with_shell else names
    assert infer_agent_kind(tools) == (CODING if with_shell else CUSTOMER_SERVICE)


def test_no_tools_is_a_kind_not_known() -> None:
    assert infer_agent_kind([]) == infer_agent_kind(["", ""]) == UNKNOWN == ""
    assert PilotModel.default_for(UNKNOWN).version == PilotModel.load().version  # the generic pilot/1


#: The tools of real frameworks and harnesses (their names as each one gives them), and the kind they say.
FRAMEWORK_TOOLS: list[tuple[str, list[str], str]] = [
    ("LangChain ShellTool", ["terminal"], CODING),
    (
        "LangChain FileManagementToolkit",
        ["copy_file", "file_delete", "file_search", "move_file", "read_file", "write_file", "list_directory"],
        CODING,
    ),
    *[
        (f"LangChain {name}", [name], CODING)
        for name in ("read_file", "write_file", "list_directory", "copy_file", "move_file", "file_delete")
    ],
    ("LangChain PythonREPLTool", ["Python_REPL"], CODING),
    ("a Python REPL tool", ["python_repl"], CODING),
    ("LangChain PythonAstREPLTool", ["python_repl_ast"], CODING),
    ("OpenAI Agents SDK ComputerTool", ["computer_use_preview"], CODING),
    ("OpenAI Agents SDK ShellTool", ["shell"], CODING),
    ("OpenAI Agents SDK LocalShellTool", ["local_shell"], CODING),
    ("OpenAI Agents SDK ApplyPatchTool", ["apply_patch"], CODING),
    ("OpenAI Agents SDK CodeInterpreterTool", ["code_interpreter"], CODING),
    (
        "OpenAI Agents SDK FileSearchTool (a vector store) and WebSearchTool",
        ["file_search", "web_search"],
        CUSTOMER_SERVICE,
    ),
    *[
        (f"Claude Code {name}", [name], CODING)
        for name in ("Bash", "Edit", "Write", "Read", "Glob", "Grep", "MultiEdit", "NotebookEdit", "LS")
    ],
    (
        "Claude Code (the init event's list)",
        [
            "Task",
            "Bash",
            "Glob",
            "Grep",
            "ExitPlanMode",
            "Read",
            "Edit",
            "Write",
            "NotebookEdit",
            "WebFetch",
            "TodoWrite",
            "WebSearch",
            "BashOutput",
            "KillShell",
            "Skill",
            "SlashCommand",
        ],
        CODING,
    ),
    ("Claude Code without its code tools", ["Task", "TodoWrite", "WebFetch", "WebSearch"], CUSTOMER_SERVICE),
    ("SWE-agent 1.x (function calling)", ["bash", "str_replace_editor", "submit"], CODING),
    (
        "SWE-agent 0.x commands",
        [
            "open",
            "goto",
            "scroll_up",
            "scroll_down",
            "create",
            "edit",
            "find_file",
            "search_dir",
            "search_file",
            "submit",
        ],
        CODING,
    ),
    *[
        (f"SWE-agent {name}", [name], CODING)
        for name in ("str_replace_editor", "bash", "find_file", "search_dir", "edit")
    ],
    ("mini-swe-agent", ["bash"], CODING),
    (
        "OpenHands CodeAct",
        ["execute_bash", "str_replace_editor", "execute_ipython_cell", "browser", "finish", "think"],
        CODING,
    ),
    *[(f"OpenHands {name}", [name], CODING) for name in ("execute_bash", "str_replace_editor", "execute_ipython_cell")],
    ("OpenHands without its code tools", ["browser", "finish", "think"], CUSTOMER_SERVICE),
    # aider edits files through edit formats in its replies' text, with no tool calls: nothing to tell its kind by
    # (pass agent_kind="coding" for it)
    ("aider", [], UNKNOWN),
    (
        "tau2-bench airline",
        [
            "get_user_details",
            "get_reservation_details",
            "search_direct_flight",
            "update_reservation_flights",
            "cancel_reservation",
            "transfer_to_human_agents",
            "calculate",
            "think",
        ],
        CUSTOMER_SERVICE,
    ),
    (
        "tau2-bench telecom (user tools)",
        ["run_speed_test", "toggle_airplane_mode", "reboot_device", "check_sim_status"],
        CUSTOMER_SERVICE,
    ),
]


@pytest.mark.parametrize(("framework", "names", "kind"), FRAMEWORK_TOOLS, ids=[f[0] for f in FRAMEWORK_TOOLS])
def test_the_tools_of_real_frameworks_say_their_kind(framework: str, names: list[str], kind: str) -> None:
    assert infer_agent_kind(names) == kind


def test_tool_names_are_read_from_names_tool_objects_schemas_and_functions() -> None:
    agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK is the [openai-agents] extra")

    def run_code(source: str) -> str:
        return source

    sdk_tools = [agents.ShellTool(executor=lambda request: "ok"), agents.LocalShellTool(executor=lambda r: "ok"),
                 agents.FileSearchTool(vector_store_ids=["vs_1"]), agents.WebSearchTool()]  # fmt: skip
    assert tool_names(sdk_tools) == ["shell", "local_shell", "file_search", "web_search"]
    mixed = ["Bash", bash, {"name": "str_replace_based_edit_tool", "type": "text_editor_20250124"},
             {"type": "function", "function": {"name": "get_order"}}, run_code, {"type": "web_search"}, 42]  # fmt: skip
    assert tool_names(mixed) == ["Bash", "bash", "str_replace_based_edit_tool", "get_order", "run_code"]
    assert tool_names("bash") == ["bash"]  # one name is one tool, not its letters
    with pytest.raises(TypeError, match="tools must be a list of tools, tool schemas or tool names, got int"):
        tool_names(42)  # type: ignore[arg-type]


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


# -- every adapter passes the tools it has (docs/signal.md, "A default pilot per kind") --------------------------


def _root(otel: Otel) -> dict:
    [root] = otel.spans("invoke_agent")
    return dict(root.attributes or {})


def _rb(otel: Otel) -> ReasonBlocks:
    return ReasonBlocks(scorer="pilot", tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)


@pytest.mark.parametrize(("tools", "kind"), [([bash], CODING), ([get_order], CUSTOMER_SERVICE), ([], UNKNOWN)])
def test_the_chat_model_wrapper_records_the_kind_of_the_tools_the_agent_bound(
    otel: Otel, tools: list, kind: str
) -> None:
    model = ScriptedChatModel(script=[AIMessage("done")])
    agent = create_agent(_rb(otel).chat_model(model, agent_name="a"), tools)
    agent.invoke({"messages": [HumanMessage("go")]})
    assert _root(otel).get("rb.agent.kind", UNKNOWN) == kind


def test_a_middleware_agent_with_no_tools_is_not_called_customer_service(otel: Otel) -> None:
    rb = _rb(otel)
    agent = create_agent(ScriptedChatModel(script=[AIMessage("hello")]), [], middleware=[rb.middleware(agent_name="a")])
    agent.invoke({"messages": [HumanMessage("hi")]})
    assert "rb.agent.kind" not in _root(otel)


@pytest.mark.parametrize(
    ("tools", "kind"), [(["bash", {"name": "get_order"}], CODING), ([get_order], CUSTOMER_SERVICE), (None, UNKNOWN)]
)
def test_a_session_takes_the_agents_tools(otel: Otel, tools: list | None, kind: str) -> None:
    session = _rb(otel).session(agent_name="a", model="m", tools=tools)
    session.start()
    session.finish(outcome_status="success")
    assert _root(otel).get("rb.agent.kind", UNKNOWN) == kind


def test_the_anthropic_loop_passes_its_tool_specs(otel: Otel) -> None:
    anthropic = pytest.importorskip("anthropic", reason="the Anthropic SDK is the [anthropic] extra")
    from model_api import ScriptedModelAPI, by_turn, message, text

    specs = [{"name": "str_replace_based_edit_tool", "type": "text_editor_20250124"},
             {"name": "lookup", "description": "Look up a record.", "input_schema": {"type": "object"}}]  # fmt: skip
    with ScriptedModelAPI(by_turn([message([text("nothing to do")])])) as api:
        _rb(otel).anthropic_loop(anthropic.Anthropic(api_key="sk-test", base_url=api.url), model="claude-test-1",
                                 messages=[{"role": "user", "content": "go"}], tool_specs=specs,
                                 dispatch=lambda name, arguments: "", agent_name="a")  # fmt: skip
    assert _root(otel)["rb.agent.kind"] == CODING


@pytest.mark.parametrize("steered", [False, True])
@pytest.mark.parametrize(("tool_name", "kind"), [("bash", CODING), ("get_order", CUSTOMER_SERVICE)])
def test_the_openai_agents_adapters_pass_the_agents_tools(otel: Otel, steered: bool, tool_name: str, kind: str) -> None:
    agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK is the [openai-agents] extra")
    openai = pytest.importorskip("openai")
    import asyncio

    from model_api import Reply, ScriptedModelAPI

    def answer(path: str, body: object) -> Reply:
        output = [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": "done", "annotations": []}]}]  # fmt: skip
        return Reply({"id": "r1", "object": "response", "created_at": 0, "model": "gpt-test", "status": "completed",
                      "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                      "usage": {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
                                "input_tokens_details": {"cached_tokens": 0},
                                "output_tokens_details": {"reasoning_tokens": 0}}})  # fmt: skip

    tool = agents.FunctionTool(name=tool_name, description="a tool", params_json_schema={"type": "object"},
                               on_invoke_tool=lambda context, arguments: "ok")  # fmt: skip
    rb = _rb(otel)
    with ScriptedModelAPI(answer) as api:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=api.url + "/v1")
        model = agents.OpenAIResponsesModel(model="gpt-test", openai_client=client)
        agent = agents.Agent(name="a", tools=[tool], model=rb.openai_model(model, agent_name="a") if steered else model)
        hooks = None if steered else rb.openai_hooks(agent_name="a")
        config = agents.RunConfig(tracing_disabled=True)
        asyncio.run(agents.Runner.run(agent, "go", hooks=hooks, run_config=config))
    rb.telemetry.flush()
    assert _root(otel)["rb.agent.kind"] == kind


@pytest.mark.parametrize(("init", "kind"), [({"tools": ["Task", "Bash", "Read", "Edit"]}, CODING), ({}, UNKNOWN)])
def test_the_claude_agent_adapter_reads_the_tools_of_the_init_message(otel: Otel, init: dict, kind: str) -> None:
    sdk = pytest.importorskip("claude_agent_sdk", reason="the Claude Agent SDK is the [claude-agent] extra")
    import asyncio

    stream = [
        sdk.SystemMessage(subtype="init", data={"model": "claude-test-1", "session_id": "s1", **init}),
        sdk.AssistantMessage([sdk.TextBlock("done")], model="claude-test-1", message_id="m1", usage={}),
        sdk.ResultMessage(
            subtype="success", duration_ms=1, duration_api_ms=1, is_error=False, num_turns=1, session_id="s1", usage={}
        ),
    ]

    async def replayed() -> object:
        for message in stream:
            yield message

    async def drain() -> None:
        async for _ in _rb(otel).claude_agent(replayed(), agent_name="a"):
            pass

    asyncio.run(drain())
    assert _root(otel).get("rb.agent.kind", UNKNOWN) == kind
