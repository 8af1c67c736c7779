"""Every importer on fixtures we wrote ourselves in its format (``tests/fixtures/formats``, README there), so a
fresh clone tests every format with no outside data. Each test reads a fixture with its format's reader and
replays it, and checks the fields against values written here from the fixture: run id, task, agent, model,
outcome, steps (thought, action, input, observation, tool calls, errors, tokens, times) and the spans a replay
makes. The real records' tests are in tests/test_importers.py (they read the data root)."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import Otel
from format_fixtures import fixture, io_harness_store
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from rb_otel.importers import detect, replay
from rb_otel.importers.formats import agy, io_harness, openai_messages, openhands, otlp_json, steplog, swe_agent
from rb_otel.importers.formats import tau_bench as tau_bench_format
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportProblem

SECOND = 10**9


def read(reader: Any, path: Path) -> tuple[list[ImportedRun], list[str]]:
    """Every run ``reader`` reads from ``path`` with its steps as a list, and the problems it listed."""
    problems: list[ImportProblem] = []
    runs = list(reader(path, problems))
    for run in runs:
        run.steps = list(run.steps)
    return runs, [str(p) for p in problems]


def steps_of(run: ImportedRun) -> list[ImportedStep]:
    assert isinstance(run.steps, list)
    return run.steps


def at(text: str) -> float:
    """Seconds since the epoch of an ISO time written in UTC."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def root(otel: Otel, run_id: str) -> ReadableSpan:
    [span] = [s for s in otel.spans("invoke_agent") if attrs(s)["rb.run_id"] == run_id]
    return span


def children(otel: Otel, parent: ReadableSpan, prefix: str) -> list[ReadableSpan]:
    spans = [s for s in otel.spans(prefix) if s.parent is not None and s.parent.span_id == parent.context.span_id]
    return sorted(spans, key=lambda s: (s.start_time or 0, attrs(s).get("rb.step", 0)))


def seconds(span: ReadableSpan) -> float:
    return ((span.end_time or 0) - (span.start_time or 0)) / SECOND


# -- SWE-agent -----------------------------------------------------------------------------------------------


def as_traj(tmp_path: Path, name: str, stem: str) -> Path:
    """The fixture under a ``.traj`` name, as SWE-agent writes it (the suffix alone tells the format)."""
    path = tmp_path / f"{stem}.traj"
    shutil.copy(fixture(f"swe_agent/{name}"), path)
    return path


def test_swe_agent_0x_layout(tmp_path: Path) -> None:
    name = "handwritten_0x_submitted_after_cost_limit.json"
    assert detect(fixture(f"swe_agent/{name}")) == "swe_agent"  # by content: a 'trajectory' list
    path = as_traj(tmp_path, name, "tidewater__units-7")
    assert detect(path) == "swe_agent"  # by suffix
    [run], problems = read(swe_agent.read, path)
    assert problems == []
    assert (run.run_id, run.source, run.agent_name, run.model, run.task_id) == (
        "tidewater__units-7", "swe_agent", "", "", ""
    )  # fmt: skip
    assert run.task == 'Fix this issue in tidewater: parse_duration("90s") returns 5400, it should return 90 (seconds).'
    # "Submitted (exit_cost)", submitted when the budget ran out, in any case: a patch was submitted, which says
    # nothing of whether it resolved the issue, so the run is unlabelled until --labels says (docs/importers.md)
    assert run.outcome == "unlabelled"
    assert run.synthetic_timing and run.start is None and run.end is None
    assert run.attributes == {
        "rb.metadata.swe_agent.tokens_sent": 18240,
        "rb.metadata.swe_agent.tokens_received": 915,
        "rb.metadata.swe_agent.api_calls": 8,
    }
    assert run.summary["exit_status"] == "Submitted (exit_cost)" and run.summary["model_stats"]["total_cost"] == 2.03
    steps = steps_of(run)
    edit = '1:1\nfrom tidewater.units import parse_duration\nprint(parse_duration("90s"))\nend_of_edit'
    assert [(s.action, s.action_input) for s in steps] == [
        ("create", "check_units.py"),
        ("edit", edit),
        ("python", "check_units.py"),
        ("open", "tidewater/units.py 40"),
        ("edit", "42:42\nreturn int(text[:-1])\nend_of_edit"),
        ("edit", "42:42\n        return int(text[:-1])\nend_of_edit"),  # the same edit, retried
        ("rm", "check_units.py"),
        ("submit", ""),
    ]
    assert [s.thought for s in steps] == [
        "A two-line script will show the wrong value first.",
        "Put the call from the report into the script.",
        "Run it and compare with the 90 the report expects.\n\n```\npython check_units.py\n```",  # the response
        "Seconds come out as minutes, so the suffix table must be wrong. Open the parser.",
        "Line 42 multiplies seconds by 60; drop the factor.",
        "The edit lost its indentation; the same edit again, indented by eight spaces.",
        "The fix is in; the script has done its job.",
        "Submitting the one-line fix.",
    ]
    assert steps[2].observation == "5400\n" and steps[6].observation == ""
    assert steps[4].observation is not None
    assert steps[4].observation.startswith("Edit rejected, the file would not compile: E999 IndentationError")
    assert steps[7].observation is not None and steps[7].observation.startswith("\ndiff --git a/tidewater/units.py")
    for i, step in enumerate(steps):
        assert step.index == i and step.tokens == 0 and step.input_tokens is None and step.duration_s is None
        assert step.timestamp is None and step.error_type is None and not step.failed
        [tool] = step.tools
        assert (tool.name, tool.call_id, tool.arguments, tool.result) == (
            step.action, f"step-{i}", step.action_input, step.observation
        )  # fmt: skip


def test_swe_agent_0x_replay_is_synthetic_seconds(tmp_path: Path, otel: Otel) -> None:
    path = as_traj(tmp_path, "handwritten_0x_submitted_after_cost_limit.json", "tidewater__units-7")
    [result] = replay(path, tracer_provider=otel.tracer_provider)
    assert (result.run_id, result.step_count, result.outcome) == ("tidewater__units-7", 8, "unlabelled")
    run = root(otel, "tidewater__units-7")
    a = attrs(run)
    assert a["rb.source"] == a["rb.framework"] == "swe_agent" and a["rb.synthetic_timing"] is True
    assert a["rb.outcome"] == "unlabelled"
    assert a["rb.metadata.swe_agent.tokens_sent"] == 18240 and a["rb.steps"] == 8
    chats = children(otel, run, "chat")
    assert [seconds(c) for c in chats] == [1.0] * 8 and seconds(run) == 8.0  # one synthetic second a step
    tools = children(otel, run, "execute_tool")
    assert [(attrs(t)["gen_ai.tool.name"], attrs(t)["gen_ai.tool.call.id"]) for t in tools] == [
        ("create", "step-0"), ("edit", "step-1"), ("python", "step-2"), ("open", "step-3"),
        ("edit", "step-4"), ("edit", "step-5"), ("rm", "step-6"), ("submit", "step-7"),
    ]  # fmt: skip
    assert [e.thought_preview for e in result.steps][4] == "Line 42 multiplies seconds by 60; drop the factor."


def test_swe_agent_1x_function_calling_layout(tmp_path: Path, otel: Otel) -> None:
    path = as_traj(tmp_path, "handwritten_1x_function_calling.json", "quillmark-setext-2")
    [run], problems = read(swe_agent.read, path)
    assert problems == []
    assert (run.run_id, run.outcome) == ("quillmark-setext-2", "failure: exit_format")
    assert (run.agent_name, run.model) == ("", "")
    # replay_config names the model (gpt-4o-2024-08-06): the reader does not take it
    assert run.task.startswith("<issue>\nquillmark reports setext headings underlined with dashes as level 1")
    assert run.attributes["rb.metadata.swe_agent.api_calls"] == 6
    steps = steps_of(run)
    assert [(s.action, s.action_input) for s in steps] == [
        ("ls", "-a"),
        ("find_file", "headings.py src"),
        ("open", '"src/quillmark/headings.py" 21'),
        ("edit", "'return 1' 'return 1 if underline[0] == \"=\" else 2'"),
        ("python", "-m pytest tests/test_headings.py -q"),
        ("noop", ""),  # an empty action: the format error that ended the run
    ]
    assert steps[2].thought == "Open the setext branch of the heading rule."  # thought empty: the response
    assert steps[5].thought == "An empty underline still reaches setext_level; it needs a guard before indexing."
    assert steps[4].observation is not None and "1 failed, 3 passed" in steps[4].observation
    assert [s.duration_s for s in steps] == [0.12, 0.09, 0.15, 0.41, 2.87, None]  # execution_time, when recorded
    [result] = replay(path, tracer_provider=otel.tracer_provider)
    assert result.step_count == 6
    span = root(otel, "quillmark-setext-2")
    assert span.status.status_code is StatusCode.ERROR and attrs(span)["error.type"] == "exit_format"
    chats = children(otel, span, "chat")
    assert [seconds(c) for c in chats] == pytest.approx([0.12, 0.09, 0.15, 0.41, 2.87, 1.0], abs=1e-6)  # else 1 s
    assert [attrs(t)["gen_ai.tool.name"] for t in children(otel, span, "execute_tool")] == [
        "ls", "find_file", "open", "edit", "python", "noop"
    ]  # fmt: skip


def test_swe_agent_bad_step_missing_info_and_bad_execution_time(tmp_path: Path) -> None:
    data = json.loads(fixture("swe_agent/handwritten_1x_function_calling.json").read_text())
    data["trajectory"].insert(1, "not a step")
    data["trajectory"][0]["execution_time"] = "fast"
    del data["info"], data["history"]
    path = tmp_path / "edited.traj"
    path.write_text(json.dumps(data))
    [run], problems = read(swe_agent.read, path)
    assert problems == [f"{path}: trajectory[1]: expected a step object"]
    steps = steps_of(run)
    assert [s.index for s in steps] == list(range(6)) and steps[1].action == "find_file"  # the rest still read
    assert steps[0].duration_s is None  # not a number: synthetic
    assert run.outcome == "unfinished" and run.task == "" and run.summary == {"exit_status": "", "model_stats": {}}
    assert run.attributes["rb.metadata.swe_agent.tokens_sent"] == 0


# -- OpenHands -----------------------------------------------------------------------------------------------


LEDGERD_TASK = (
    "<uploaded_files>\n/workspace/ledgerd\n</uploaded_files>\nIn ledgerd, `ledgerd export --since "
    "2025-03-01T00:00+02:00` drops the entries of the first two hours: the offset is ignored. Make --since honour "
    "the offset."
)
LEDGERD_ERROR = "RuntimeError: the agent used all 6 iterations without calling finish; the last test run still failed"


def test_openhands_output_record() -> None:
    path = fixture("openhands/handwritten_output_record.json")
    assert detect(path) == "openhands"
    [run], problems = read(openhands.read, path)
    assert problems == []
    assert (run.run_id, run.source, run.task, run.agent_name, run.model) == (
        "brightline__ledgerd-212", "openhands", LEDGERD_TASK, "", "ledger-coder-1"
    )  # fmt: skip
    assert run.harness == "openhands CodeActAgent"  # metadata.agent_class: the file's own marker
    assert run.outcome == "failure: " + LEDGERD_ERROR[:80] and len(LEDGERD_ERROR) > 80
    assert not run.synthetic_timing
    assert (run.start, run.end) == (at("2025-03-02T09:15:00"), at("2025-03-02T09:15:17"))  # first event, last step
    steps = steps_of(run)
    # system, recall and change_agent_state are no model calls; observations are matched by their cause
    assert [s.thought for s in steps] == [
        "Find where --since is parsed.",
        "strptime with a date-only format drops the offset. Look at the lines around it.",  # from a repr string
        "Parse the full ISO timestamp, offset included.",
        "The file indents with a tab, so my old_str never matched. View the exact line again before editing.",
        "Check what the export tests say about --since as it stands.",  # no tool_call_metadata: args.thought
        "I ran out of iterations before the offset test passed.",  # an agent message: its text
    ]
    assert [(s.action, s.action_input) for s in steps] == [
        ("execute_bash", "grep -rn since ledgerd/"),
        ("str_replace_editor", "view"),
        ("str_replace_editor", "str_replace"),
        (None, None),  # think: no tool
        ("run", "python -m pytest tests/test_export.py -q"),
        (None, None),
    ]
    assert [[(t.name, t.call_id, t.error) for t in s.tools] for s in steps] == [
        [("execute_bash", "toolu_01", None)],
        [("str_replace_editor", "toolu_02", None)],
        [("str_replace_editor", "toolu_03", "tool_error")],  # an "error" observation
        [],
        [("run", "", "tool_error")],  # success: false
        [],
    ]
    # accumulated usage 4100/60, 8900/131, 14020/301, 19500/420, 25110/488: each step's tokens are the deltas
    assert [(s.input_tokens, s.output_tokens, s.tokens) for s in steps] == [
        (4100, 60, 4160), (4800, 71, 4871), (5120, 170, 5290), (5480, 119, 5599), (5610, 68, 5678), (None, None, 0),
    ]  # fmt: skip
    assert [s.model for s in steps] == ["ledger-coder-1"] * 4 + ["openai/ledger-coder-1", ""]
    assert [s.finish_reason for s in steps] == ["tool_calls"] * 4 + ["", ""]
    times = ["09:15:02", "09:15:04", "09:15:07", "09:15:09", "09:15:12", "09:15:17"]
    assert [s.timestamp for s in steps] == [at(f"2025-03-02T{t}") for t in times]
    assert [s.duration_s for s in steps] == pytest.approx([0.5, 0.25, 0.125, 0.01, 3.75, None])  # type: ignore[list-item]
    assert steps[0].observation is not None and steps[0].observation.startswith("ledgerd/export.py:31:")
    assert steps[3].observation == "Thought noted." and steps[5].observation is None
    assert steps[2].tools[0].arguments["new_str"] == "datetime.fromisoformat(args.since)"
    assert [s.failed for s in steps] == [False, False, True, False, True, False]


def test_openhands_output_record_replays_on_its_own_clock(otel: Otel) -> None:
    [result] = replay(fixture("openhands/handwritten_output_record.json"), tracer_provider=otel.tracer_provider)
    assert (result.run_id, result.step_count) == ("brightline__ledgerd-212", 6)
    span = root(otel, "brightline__ledgerd-212")
    a = attrs(span)
    assert "rb.synthetic_timing" not in a and a["rb.source"] == "openhands"
    assert span.start_time == int(at("2025-03-02T09:15:00")) * SECOND
    assert span.end_time == int(at("2025-03-02T09:15:17")) * SECOND
    assert span.status.status_code is StatusCode.ERROR and a["error.type"] == LEDGERD_ERROR[:80]
    assert (a["rb.tokens"], a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (25598, 25110, 488)
    chats = children(otel, span, "chat")
    times = ("09:15:02", "09:15:04", "09:15:07", "09:15:09", "09:15:12", "09:15:17")
    assert [c.start_time for c in chats] == [int(at(f"2025-03-02T{t}")) * SECOND for t in times]
    assert [c.name for c in chats] == ["chat ledger-coder-1"] * 4 + ["chat openai/ledger-coder-1", "chat"]
    tools = children(otel, span, "execute_tool")
    assert [(attrs(t)["gen_ai.tool.name"], t.status.status_code) for t in tools] == [
        ("execute_bash", StatusCode.UNSET),
        ("str_replace_editor", StatusCode.UNSET),
        ("str_replace_editor", StatusCode.ERROR),
        ("run", StatusCode.ERROR),
    ]


def test_openhands_bare_event_list(tmp_path: Path) -> None:
    path = fixture("openhands/handwritten_event_list.json")
    assert detect(path) == "openhands"  # a list whose first event has source, timestamp and action
    [run], problems = read(openhands.read, path)
    assert problems == []
    assert (run.run_id, run.task, run.outcome) == ("handwritten_event_list", "Which weekday was 2024-02-29?", "success")
    assert (run.start, run.end, run.synthetic_timing) == (at("2025-03-03T11:00:00"), at("2025-03-03T11:02:01"), False)
    steps = steps_of(run)
    assert [s.thought for s in steps] == [
        "2024-02-29 was a Thursday.",
        "There is no such day: 2100 is not a leap year.",
        "Glad to help.",  # finish: the message content is null and the thought empty, so the event's message
    ]
    assert all(s.tools == [] and s.action is None and s.observation is None and s.tokens == 0 for s in steps)
    assert [(s.model, s.finish_reason) for s in steps] == [("", ""), ("", ""), ("ledger-coder-1", "tool_calls")]
    events = json.loads(path.read_text())
    for event in events:
        del event["timestamp"]
    undated = tmp_path / "undated.json"
    undated.write_text(json.dumps(events))
    [run], _ = read(openhands.read, undated)
    assert run.synthetic_timing and run.start is None and all(s.timestamp is None for s in steps_of(run))


# -- tau-bench and OpenAI-style messages -----------------------------------------------------------------------


def test_tau_bench_results_list() -> None:
    path = fixture("tau_bench/handwritten_results.json")
    assert detect(path) == "tau_bench"
    runs, problems = read(tau_bench_format.read, path)
    assert problems == []
    assert [(r.run_id, r.outcome, r.task_id, r.agent_name, r.source) for r in runs] == [
        ("task-4-trial-0", "failure: reward 0", "4", "tau-bench", "tau_bench"),
        ("task-4-trial-1", "success", "4", "tau-bench", "tau_bench"),
    ]
    assert [r.attributes for r in runs] == [{"rb.metadata.reward": 0.0}, {"rb.metadata.reward": 1.0}]
    assert all(r.task == "Hi, I'd like to return the kettle from my last order." and r.synthetic_timing for r in runs)
    failed, solved = (steps_of(r) for r in runs)
    assert len(failed) == 6 and len(solved) == 7
    assert [(s.action, s.action_input) for s in failed] == [
        (None, None),
        ("find_customer_by_email", '{"email": "mei.tanaka@example.com"}'),
        (None, None),
        ("get_order", '{"order_id": "#K3307"}'),
        ("start_return", '{"item_ids": ["kettle-glass-15", "filter-pack-3"], "order_id": "#K3307", '
                         '"refund_to": "gift_card"}'),
        (None, None),
    ]  # fmt: skip
    assert [s.thought for s in failed] == [
        "I can help with that. What is the email address on your account?",
        "",  # content null: a tool call alone
        "Thanks, Mei. Which order is the kettle from?",
        "",
        "",
        "I've started return R-0912 for the kettle and the filters; the refund goes to a gift card.",
    ]
    assert [s.observation for s in failed][:3] == [
        "It's mei.tanaka@example.com.",  # a text turn: the user's reply
        "mei_tanaka_4821",  # a tool call: its result
        "Order #K3307.",
    ]
    reply = "I only wanted to return the kettle, and I wanted my money back on my card. ###STOP###"
    assert failed[5].observation == reply
    assert [t.call_id for s in failed for t in s.tools] == ["call_a1", "call_a2", "call_a3"]
    assert [t.call_id for s in solved for t in s.tools] == ["call_b1", "call_b2", "call_b3"]
    assert solved[5].tools[0].arguments == {
        "order_id": "#K3307", "item_ids": ["kettle-glass-15"], "refund_to": "original_payment"
    }  # fmt: skip
    assert all(s.tokens == 0 and s.timestamp is None and not s.failed for s in failed + solved)


def test_tau_bench_results_replay(otel: Otel) -> None:
    results = replay(fixture("tau_bench/handwritten_results.json"), tracer_provider=otel.tracer_provider)
    assert [(r.run_id, r.step_count, r.task_id) for r in results] == [
        ("task-4-trial-0", 6, "4"), ("task-4-trial-1", 7, "4")
    ]  # fmt: skip
    failed, solved = root(otel, "task-4-trial-0"), root(otel, "task-4-trial-1")
    assert failed.status.status_code is StatusCode.ERROR and attrs(failed)["error.type"] == "reward 0"
    assert solved.status.status_code is StatusCode.UNSET and attrs(solved)["rb.metadata.reward"] == 1.0
    assert failed.context.trace_id != solved.context.trace_id  # one trace per run
    tools = children(otel, solved, "execute_tool")
    assert [(attrs(t)["gen_ai.tool.name"], attrs(t)["gen_ai.tool.call.id"]) for t in tools] == [
        ("find_customer_by_email", "call_b1"), ("get_order", "call_b2"), ("start_return", "call_b3")
    ]  # fmt: skip
    assert [seconds(c) for c in children(otel, solved, "chat")] == [1.0] * 7 and seconds(solved) == 7.0


def test_a_tau_bench_element_alone_is_an_openai_messages_run() -> None:
    path = fixture("tau_bench/handwritten_single_run_loopy.json")
    assert detect(path) == "openai_messages"  # a dict with 'traj', not a results list
    [run], problems = read(openai_messages.read, path)
    assert problems == []
    assert (run.run_id, run.source, run.task_id, run.outcome) == (
        "handwritten_single_run_loopy", "openai_messages", "9", "failure: reward 0"
    )  # fmt: skip
    assert run.attributes == {"rb.metadata.reward": 0.0} and run.agent_name == ""
    assert run.task == "Hello, I moved last week. Can you send order #K4410 to 3 Quay Street, Leeds instead?"
    steps = steps_of(run)
    assert [s.action for s in steps] == [None, "find_customer_by_email", *["get_order"] * 6, "update_address", None]
    loop = "Let me check the order status again to see whether the address can still be changed."
    assert [s.thought for s in steps[2:8]] == [loop] * 6
    assert {s.observation for s in steps[2:8]} == {
        '{"order_id": "#K4410", "status": "shipped", "address": "12 Birch Lane, Leeds", "carrier_status": "in transit"}'
    }
    assert steps[8].observation == "Error: order #K4410 is shipped; the address cannot be changed"
    assert steps[9].observation == "That's not helpful at all. ###STOP###"


def test_openai_messages_flat_and_nested_tool_calls(otel: Otel) -> None:
    path = fixture("openai_messages/handwritten_messages_flat_and_nested_calls.json")
    assert detect(path) == "openai_messages"
    [run], problems = read(openai_messages.read, path)
    assert problems == []
    assert (run.run_id, run.task_id, run.outcome, run.attributes) == (
        "handwritten_messages_flat_and_nested_calls", "kw-damage-12", "failure: reward 0.5", {"rb.metadata.reward": 0.5}
    )  # fmt: skip
    assert run.task == "My blender arrived with a cracked jug. Order #K5120."  # text blocks joined
    steps = steps_of(run)
    assert [s.thought for s in steps] == [
        "Damage claim; the policy wants the customer verified first.\nSorry to hear that! What is the email on your "
        "account?",  # reasoning_content, then the content
        "Verify by email, then read the order.",  # the think tool's argument
        "Now the order.",  # 'reasoning'
        "Retrying with the right arguments.",
        "A replacement is the first option.",
        "The blender is out of stock, so I can't send a replacement; I've asked for a refund of $89.00 instead.",
    ]
    assert [(s.action, s.action_input) for s in steps] == [
        (None, None),
        ("find_customer_by_email", '{"email": "sam.okafor@example.com"}'),  # the acting tool, not think
        ("get_order", '"order #K5120"'),  # arguments that are not JSON are kept as text
        ("get_order", '{"order_id": "#K5120"}'),
        ("exchange_item", '{"item_id": "blender-900", "order_id": "#K5120"}'),
        (None, None),
    ]
    assert [s.observation for s in steps] == [
        "sam.okafor@example.com",
        "sam_okafor_3302",  # a flat call's result, matched by 'id'
        "Error: arguments must be a JSON object",
        '{"order_id": "#K5120", "status": "delivered", "items": [{"item_id": "blender-900", "price": 89.0}]}',
        "Error: blender-900 is out of stock",
        None,  # the last turn: nobody answered
    ]
    assert [[(t.name, t.call_id, t.error) for t in s.tools] for s in steps] == [
        [],
        [("think", "tc-1", None), ("find_customer_by_email", "tc-2", None)],
        [("get_order", "tc-3", "tool_error")],  # error: true
        [("get_order", "tc-4", None)],  # error: false
        [("exchange_item", "tc-5", "tool_error")],  # error: "true"
        [],
    ]
    assert steps[2].tools[0].arguments == "order #K5120" and steps[1].tools[0].result == ""
    [result] = replay(path, tracer_provider=otel.tracer_provider)
    span = root(otel, result.run_id)
    assert span.status.status_code is StatusCode.ERROR and attrs(span)["error.type"] == "reward 0.5"
    tools = children(otel, span, "execute_tool")
    assert [(attrs(t)["gen_ai.tool.call.id"], t.status.status_code) for t in tools] == [
        ("tc-1", StatusCode.UNSET), ("tc-2", StatusCode.UNSET), ("tc-3", StatusCode.ERROR),
        ("tc-4", StatusCode.UNSET), ("tc-5", StatusCode.ERROR),
    ]  # fmt: skip


def test_openai_messages_as_a_bare_list(tmp_path: Path) -> None:
    data = json.loads(fixture("openai_messages/handwritten_messages_flat_and_nested_calls.json").read_text())
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(data["messages"]))
    assert detect(path) == "openai_messages"
    [run], _ = read(openai_messages.read, path)
    assert (run.run_id, run.task_id, run.outcome, run.attributes) == ("bare", "", "success", {})  # no reward
    assert len(steps_of(run)) == 6


# -- io_harness ------------------------------------------------------------------------------------------------


def test_io_harness_022_store_with_provider_calls(tmp_path: Path) -> None:
    path = io_harness_store("handwritten_store_0_22.sql", tmp_path / "store.sqlite3")
    assert detect(path) == "io_harness"
    [parent], problems = read(io_harness.read, path)
    assert problems == []
    assert (parent.run_id, parent.source, parent.task, parent.outcome) == (
        "io_harness-1", "io_harness", "add a --dry-run flag to tide sync", "success"
    )  # fmt: skip
    assert parent.attributes == {"rb.metadata.workspace": "/work/tidewater", "rb.metadata.io_harness.run_id": 1}
    start = at("2026-01-01T00:00:00")
    assert (parent.start, parent.end, parent.synthetic_timing) == (start, start + 4.0, True)
    steps = steps_of(parent)
    assert [s.index for s in steps] == [0, 1, 3]  # step numbers 1, 2, 4: the gap is kept
    assert [s.thought for s in steps] == ["wrote docs/dry-run.md", "spawned the test writer", "wrote the flag"]
    assert [[(t.name, t.arguments) for t in s.tools] for s in steps] == [
        [("write_file", {"content": "tide sync --dry-run | tee plan.txt", "path": "docs/dry-run.md"})],
        [("spawn_agent", {"goal": "write the tests for --dry-run"})],  # the committed row's {"name", "arguments"}
        [("write_file", {"content": 'parser.add_argument("--dry-run")', "path": "tide/cli.py"})],  # bare arguments
    ]
    assert [s.observation for s in steps] == ["ok", "ok", "ok"]
    # provider calls: summed over a step's attempts (the 503 attempt reported no usage); the last one names the model
    assert [(s.input_tokens, s.output_tokens, s.cache_read_tokens, s.cache_creation_tokens, s.reasoning_tokens)
            for s in steps] == [(420, 80, 300, 0, 0), (630, 150, 450, 60, 40), (15, 5, 0, 0, 0)]  # fmt: skip
    assert [s.tokens for s in steps] == [500, 780, 20]  # the rows' tokens, every attempt
    assert [(s.model, s.provider, s.finish_reason, s.error_type) for s in steps] == [
        ("tide-model-large", "anthropic", "tool_use", None),
        ("tide-model-large", "anthropic", "tool_use", None),  # the 503 was not the last attempt
        ("tide-model-small", "anthropic", "end_turn", None),
    ]
    assert [s.timestamp for s in steps] == pytest.approx([start, start + 4 / 3, start + 8 / 3])
    assert [s.duration_s for s in steps] == pytest.approx([4 / 3] * 3)
    assert [[(e["rb.attempt"], e["rb.step.retry"], e["rb.tokens"]) for _, e in s.events] for s in steps] == [
        [(0, False, 500)], [(0, True, 300), (1, True, 0), (2, False, 480)], [(0, False, 20)]
    ]  # fmt: skip
    [(spawned_at, child)] = parent.children
    assert spawned_at == 1 and (child.run_id, child.outcome, child.task) == (
        "io_harness-2", "verification_failed", "write the tests for --dry-run"
    )  # fmt: skip
    [child_step] = steps_of(child)
    assert [(t.name, t.arguments) for t in child_step.tools] == [
        ("unparsed", "ran pytest tests/test_dry_run.py, 2 failed")
    ]
    assert (child_step.model, child_step.input_tokens, child_step.tokens) == ("", None, 7)  # no provider calls
    assert (child.start, child.end) == (at("2026-01-01T00:00:01"), at("2026-01-01T00:00:02"))  # no outcome row: 1 s
    assert parent.summary["steps"][1:3] == [
        {"step": 2, "decision": "spawning a test writer and a reviewer", "tokens": 300},
        {"step": 2, "decision": "retry 1 after a 503 from the provider", "tokens": 0},
    ]
    assert (parent.summary["duration_ms"], parent.summary["finished_at"]) == (4000, "2026-01-01T00:00:04Z")


def test_io_harness_029_store(tmp_path: Path, otel: Otel) -> None:
    path = io_harness_store("handwritten_store_0_29.sql", tmp_path / "store.sqlite3")
    runs, problems = read(io_harness.read, path)
    assert problems == []
    assert [(r.run_id, r.outcome, len(steps_of(r))) for r in runs] == [
        ("io_harness-1", "success", 3),  # run_outcomes' outcome over runs.outcome ('running')
        ("io_harness-2", "stalled", 2),  # runs.outcome is NULL: run_outcomes tells
        ("io_harness-3", "unfinished", 0),  # neither: unfinished
    ]
    first, second, third = runs
    steps = steps_of(first)
    assert [(s.index, s.thought, s.action) for s in steps] == [
        (0, "read the heading rule", "read_file"),
        (1, "", None),  # provider calls without a steps row: a model call that wrote nothing
        (2, "return 2 for dashes", "write_file"),
    ]
    assert [(s.tokens, s.input_tokens, s.output_tokens, s.cache_read_tokens, s.reasoning_tokens) for s in steps] == [
        (1100, 1000, 100, 0, 20), (1200, 1150, 50, 900, 10), (1350, 1250, 100, 1000, 30)
    ]  # fmt: skip
    assert [s.finish_reason for s in steps] == ["tool_calls", "stop", "tool_calls"]
    assert steps[1].events == [] and steps[1].attributes == {"rb.step.number": 2}
    start = at("2026-08-01T10:00:00")
    assert [s.timestamp for s in steps] == [start, start + 2, start + 4] and first.end == start + 6  # 6000 ms / 3
    assert first.summary["tokens"] == 2450 and first.summary["step_count"] == 3  # the rows only, as the crate counts
    failing = steps_of(second)
    assert [s.error_type for s in failing] == [None, "rate_limited"]  # the last provider call failed
    assert (failing[1].input_tokens, failing[1].tokens, failing[1].finish_reason) == (820, 860, "")
    assert [s.duration_s for s in failing] == [1.0, 1.0]  # duration_ms 0: one second a step
    assert (third.start, third.end, third.task) == (None, None, "draft the release notes")
    assert third.summary["status"] == "running" and "duration_ms" not in third.summary  # no outcome row
    replay(path, tracer_provider=otel.tracer_provider)
    roots = otel.spans("invoke_agent")
    assert {attrs(s)["rb.run_id"]: (s.status.status_code, attrs(s).get("error.type")) for s in roots} == {
        "io_harness-1": (StatusCode.UNSET, None),
        "io_harness-2": (StatusCode.ERROR, "stalled"),
        "io_harness-3": (StatusCode.ERROR, "unfinished"),
    }
    chats = children(otel, root(otel, "io_harness-2"), "chat")
    assert [(c.status.status_code, attrs(c).get("error.type")) for c in chats] == [
        (StatusCode.UNSET, None), (StatusCode.ERROR, "rate_limited")
    ]  # fmt: skip
    assert [attrs(c)["rb.step.number"] for c in children(otel, root(otel, "io_harness-1"), "chat")] == [1, 2, 3]


# -- agy_bridge Step streams -----------------------------------------------------------------------------------


def test_agy_two_cascades_out_of_order(otel: Otel) -> None:
    path = fixture("agy/handwritten_two_cascades.jsonl")
    assert detect(path) == "agy"
    runs, problems = read(agy.read, path)
    assert problems == []
    assert [(r.run_id, r.outcome, r.attributes) for r in runs] == [
        ("ledger-7", "success", {"rb.cascade_id": "ledger-7"}),
        ("quill-2", "failure: 503", {"rb.cascade_id": "quill-2"}),  # the FINISH step failed with 503
    ]
    ledger, quill = runs
    steps = steps_of(ledger)
    # model calls only (THINKING, TOOL_CALL, TEXT_RESPONSE), in step_index order though the lines came 2, 1, 4
    assert [s.attributes["rb.step.index"] for s in steps] == [1, 2, 4]
    assert [s.attributes["rb.agy.step_type"] for s in steps] == ["THINKING", "TOOL_CALL", "TEXT_RESPONSE"]
    assert [s.thought for s in steps] == [
        "The export filter compares naive and aware datetimes.",  # two thinking deltas
        "",
        "The offset is honoured now; 3 export tests pass.",  # the full content replaced the delta
    ]
    assert steps[2].attributes["rb.agy.raw.target"] == "TARGET_BROWSER"  # an unknown enum keeps its raw value
    assert [(s.tokens, s.input_tokens, s.output_tokens, s.cache_read_tokens, s.reasoning_tokens) for s in steps] == [
        (960, 900, 60, None, 60),  # no total: prompt + candidates + thoughts
        (1040, 1000, 40, 700, 10),
        (0, None, None, None, None),
    ]
    assert [(t.name, t.call_id, t.arguments) for t in steps[1].tools] == [
        ("run_command", "tc-9", {"command": "pytest tests/test_export.py -q"})
    ]
    assert (steps[1].action, steps[1].action_input) == ("run_command", '{"command": "pytest tests/test_export.py -q"}')
    assert ledger.events == [
        ("rb.system_message", {"rb.step.index": 0}),
        ("rb.compaction", {"rb.step.index": 3}),  # step_index "3", a string
        ("rb.finish", {"rb.step.index": 5, "rb.structured_output": '{"fixed": true, "tests": 3}'}),
    ]
    assert ledger.children == [] and ledger.synthetic_timing
    failing = steps_of(quill)
    assert [(t.name, t.call_id) for t in failing[0].tools] == [("unknown", "")]  # neither name nor id
    assert (failing[0].tokens, failing[0].output_tokens) == (412, 12)
    assert [(s.thought, s.error_type) for s in failing] == [("", None), ("The README says", "agy_error")]
    assert quill.events == [("rb.finish", {"rb.step.index": 2, "rb.structured_output": "null"})]
    replay(path, tracer_provider=otel.tracer_provider)
    ledger_span, quill_span = root(otel, "ledger-7"), root(otel, "quill-2")
    assert [e.name for e in ledger_span.events] == ["rb.system_message", "rb.compaction", "rb.finish"]
    assert quill_span.status.status_code is StatusCode.ERROR and attrs(quill_span)["error.type"] == "503"
    assert [(c.status.status_code, attrs(c).get("error.type")) for c in children(otel, quill_span, "chat")] == [
        (StatusCode.UNSET, None), (StatusCode.ERROR, "agy_error")
    ]  # fmt: skip
    assert [seconds(c) for c in children(otel, ledger_span, "chat")] == [1.0, 1.0, 1.0]


# -- ReasonBlocks step logs ------------------------------------------------------------------------------------


def test_steplog_header_at_the_top_level(otel: Otel) -> None:
    path = fixture("steplog/handwritten_header_at_top_level.json")
    assert detect(path) == "steplog"
    [run], problems = read(steplog.read, path)
    assert problems == []
    assert (run.run_id, run.agent_name, run.task, run.outcome, run.attributes) == (
        "tide-dry-run-3", "tide-coder", "add a --dry-run flag to tide sync", "failure: GraphRecursionError",
        {"rb.framework": "langgraph"},
    )  # fmt: skip
    assert run.model == "" and not run.synthetic_timing  # the header's model is not carried to the run
    steps = steps_of(run)
    assert [s.thought for s in steps] == [
        "",  # "(first call)"
        "The sync command builds its plan in tide/plan.py; the flag only has to skip apply().",
        "Maybe apply() is called from somewhere else too, not sure, let me look at plan.py again.",
        "Guard apply() behind the flag and print the plan instead.",
    ]
    assert [(s.index, s.tokens, s.timestamp) for s in steps] == [
        (0, 812, 1767225600.0), (1, 1290, 1767225601.5), (2, 1604, 1767225604.0), (3, 1750, None)
    ]  # fmt: skip
    assert all(s.entry is not None for s in steps)  # replayed as recorded
    [result] = replay(path, tracer_provider=otel.tracer_provider)
    assert [e.fsm_state for e in result.steps] == ["INIT", "NORMAL", "SLOW", "NORMAL"]
    span = root(otel, "tide-dry-run-3")
    a = attrs(span)
    assert (a["gen_ai.agent.name"], a["rb.framework"], a["rb.max_state"], a["rb.tokens"]) == (
        "tide-coder", "langgraph", "SLOW", 5456
    )  # fmt: skip
    assert span.status.status_code is StatusCode.ERROR and a["error.type"] == "GraphRecursionError"
    chats = children(otel, span, "chat")
    slow = attrs(chats[2])
    assert (slow["rb.fsm_state"], slow["rb.difficulty"], slow["rb.model_id"], slow["rb.failure_type"]) == (
        "SLOW", 0.7731, "anthropic:tide-model-large", "loop"
    )  # fmt: skip
    assert (list(slow["rb.monitors_fired"]), list(slow["rb.injection_sources"]), slow["rb.attempt"]) == (
        ["semantic_loop"], ["monitor"], 2
    )  # fmt: skip
    assert chats[2].name == "chat anthropic:tide-model-large"
    assert list(attrs(chats[3])["rb.tool_calls"]) == ["edit_file", "run_tests"]
    assert chats[3].start_time == chats[2].start_time == 1767225604 * SECOND  # no timestamp: the replay's clock


# -- rb-otel's own OTLP/JSON traces -----------------------------------------------------------------------------


def test_otlp_json_two_runs() -> None:
    path = fixture("otlp_json/handwritten_two_runs.jsonl")
    assert detect(path) == "otlp_json"
    runs, problems = read(otlp_json.read, path)
    assert problems == [f"{path}: line 2: not valid JSON (Expecting value)"]  # the rest of the file is read
    assert [(r.run_id, r.agent_name, r.model, r.outcome, r.task_id, r.group_id) for r in runs] == [
        ("tide-run-a", "tide-coder", "tide-model-large", "success", "dry-run", "dry-run"),
        ("tide-run-b", "tide-coder", "tide-model-small", "failure: ValueError", "", "tide-run-b"),
    ]
    captured, bare = runs
    t0 = at("2026-01-01T00:00:00")
    assert (captured.start, captured.end, captured.synthetic_timing) == (t0, pytest.approx(t0 + 4.1), False)
    assert captured.attributes == {"rb.metadata.task_id": "dry-run"}
    steps = steps_of(captured)
    # the failed model call and the one a tool made are no steps; the LangGraph node span is not read
    assert [s.thought for s in steps] == [
        "The plan is built before apply() runs.\nReading tide/plan.py first.",  # reasoning and text parts
        "Guard apply() behind the new flag.",  # no output messages: the thought preview
        "Added --dry-run: sync prints the plan and skips apply().",
    ]
    assert [(s.action, s.action_input, s.observation) for s in steps] == [
        ("read_file", '{"path": "tide/plan.py"}', "def apply(plan): ..."),
        ("edit_file", '{"path": "tide/cli.py"}', "tool_error"),  # no result: the error
        (None, None, None),
    ]
    assert [[(t.name, t.result, t.error) for t in s.tools] for s in steps] == [
        [("read_file", "def apply(plan): ...", None)], [("edit_file", None, "tool_error")], []
    ]  # fmt: skip
    assert [(s.tokens, s.input_tokens, s.output_tokens, s.model) for s in steps] == [
        (1280, 1200, 80, "tide-model-large"), (1560, 1500, 60, "tide-model-small"), (1840, 1800, 40, "tide-model-large")
    ]  # fmt: skip
    assert [s.timestamp for s in steps] == pytest.approx([t0, t0 + 2.0, t0 + 3.3])
    assert [s.duration_s for s in steps] == pytest.approx([1.2, 0.9, 0.7])
    [only] = steps_of(bare)  # content was not captured: tool names, sizes and errors only
    assert (only.thought, only.action, only.action_input, only.tokens) == ("", "run_tests", None, 725)
    assert (bare.start, bare.end) == (t0 + 10.0, t0 + 12.5)
