"""mini-swe-agent 2.x trajectories (``trajectory_format: mini-swe-agent-1.1``): the tool-calling agent, one ``bash``
tool, parallel calls allowed.

- ``system`` and the first ``user`` message (the task) are not steps;
- each ``assistant`` message is a model call: its ``content`` (with the provider's reasoning) is the thought, its
  actions are the harness's parsed ``extra.actions`` (``{command, tool_call_id}``; else each tool call's
  ``arguments.command``), their input the commands one per line;
- each ``tool`` message, matched to its call by ``tool_call_id``, is a result (``<returncode>..</returncode><output>
  ..</output>``); a non-zero ``extra.returncode`` is a tool error ``exit code N``, an ``extra.exception_info`` one
  too (``not executed`` for a call the harness skipped, else ``exception``); the step's observation is its results;
- a later ``user`` message the harness marked as an interrupt (``extra.interrupt_type``, e.g. ``FormatError``: the
  model answered without a tool call) is a model call whose answer the harness refused without recording it: a step
  with no thought, that error type (``format_error``) and the harness's message as its observation;
- the ``exit`` message (the submission, ``extra.exit_status``) ends the run.

Results of the main run and of re-runs often sit in one tree (``results_full/instance_<N>.json`` named by dataset
index, controller arms ``<arm>/<instance_id>.json``): the instance (the task id) is ``instance_id``, else read from
the SWE-bench image ``info.config.environment.image``, else the file's name; the run id is the instance qualified
by the trajectory's folder (``results_full/<instance>``, ``<arm>/<instance>``: one instance, several runs); the
outcome the report whose
evaluated patch is this trajectory's submission (:mod:`rb_otel.importers.formats.swebench`), and the agent, the
controller (``info.stopping.controller``) and the rest as in :mod:`rb_otel.importers.formats.mini_swe_agent`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.mini_swe_agent import mapping, run_identity, swebench_outcome, usage_step
from rb_otel.importers.formats.openai_messages import ToolResults
from rb_otel.importers.formats.records import as_int, load_json, observation, text
from rb_otel.importers.identity import agent_model
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.telemetry import names as n

__all__ = ["instance_of", "read"]

_META = n.RB_METADATA_PREFIX
# ``docker.io/swebench/sweb.eval.x86_64.django_1776_django-11099:latest``: the harness writes ``__`` as ``_1776_``.
_IMAGE = re.compile(r"(?:^|/)sweb\.eval\.[^./]+\.([^/:]+)(?::[^/]*)?$")
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def instance_of(data: dict[str, Any], path: Path) -> str:
    """The SWE-bench instance a trajectory ran (module docstring)."""
    if data.get("instance_id"):
        return str(data["instance_id"])
    config = mapping(mapping(data.get("info")).get("config"))
    image = str(mapping(config.get("environment")).get("image") or "")
    found = _IMAGE.search(image)
    return found.group(1).replace("_1776_", "__") if found else path.name.removesuffix(".json")


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {"command": raw}
    return raw if isinstance(raw, dict) else {}


def _actions(message: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """``(tool name, call id, command, arguments)`` of each action of a turn."""
    calls = {}
    for raw in message.get("tool_calls") or []:
        call = mapping(raw)
        function = mapping(call.get("function"))
        calls[str(call.get("id") or "")] = (str(function.get("name") or "bash"), _arguments(function.get("arguments")))
    parsed = mapping(message.get("extra")).get("actions")
    if isinstance(parsed, list) and parsed:
        out = []
        for item in parsed:
            action = mapping(item)
            call_id = str(action.get("tool_call_id") or "")
            name, arguments = calls.get(call_id, ("bash", {"command": action.get("command")}))
            out.append((name, call_id, text(action.get("command")), arguments))
        return out
    return [(name, call_id, text(args.get("command")), args) for call_id, (name, args) in calls.items()]


def _error(result: dict[str, Any] | None) -> str | None:
    if result is None:
        return None
    extra = mapping(result.get("extra"))
    exception = text(extra.get("exception_info")).strip()
    if exception:
        return "not executed" if exception.startswith("action was not executed") else "exception"
    code = extra.get("returncode")
    return f"exit code {code}" if isinstance(code, int) and not isinstance(code, bool) and code != 0 else None


def _turn(index: int, message: dict[str, Any], position: int, results: ToolResults) -> ImportedStep:
    step = usage_step(index, message, text(message.get("content")).strip())
    actions = _actions(message)
    if not actions:
        step.error_type = "format_error"
        return step
    outputs = []
    for name, call_id, _, arguments in actions:
        result = results.take(call_id, position) if call_id else None
        output = text(result.get("content")) if result is not None else None
        if output is not None:
            outputs.append(output)
        step.tools.append(ImportedTool(name=name, call_id=call_id or f"step-{index}", arguments=arguments,
                                       result=output, error=_error(result)))  # fmt: skip
    step.action = actions[0][0]
    step.action_input = "\n".join(a[2] for a in actions)[:2000]
    step.observation = observation("\n".join(outputs))
    return step


def _refused(index: int, message: dict[str, Any], interrupt: str) -> ImportedStep:
    return ImportedStep(
        index=index,
        observation=observation(text(message.get("content"))),
        error_type=_CAMEL.sub("_", interrupt).lower(),
    )


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise RecordError(str(path), "top level", "expected an object with a 'messages' list (mini-swe-agent 2)")
    messages = data["messages"]
    results = ToolResults(messages)
    steps: list[ImportedStep] = []
    task = ""
    exit_status = ""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            problems.append(ImportProblem(str(path), f"messages[{i}]", "expected an object with a 'role'"))
            continue
        role = message["role"]
        if role == "exit":
            exit_status = str(mapping(message.get("extra")).get("exit_status") or "")
            break
        if role == "user" and not task:
            task = text(message.get("content"))[:2000]
        elif role == "user" and mapping(message.get("extra")).get("interrupt_type"):
            steps.append(_refused(len(steps), message, str(message["extra"]["interrupt_type"])))
        elif role == "assistant":
            steps.append(_turn(len(steps), message, i, results))
    info = mapping(data.get("info"))
    stats = mapping(info.get("model_stats"))
    stopping = mapping(info.get("stopping"))
    instance = instance_of(data, path)
    harness, model, identity = run_identity(data, "2")
    outcome, evaluated = swebench_outcome(path, instance, data, problems)
    exit_status = str(info.get("exit_status") or exit_status)
    controller = stopping.get("controller") or mapping(mapping(info.get("config")).get("agent")).get("controller")
    attributes = {
        _META + "mini_swe_agent.exit_status": exit_status,
        _META + "mini_swe_agent.api_calls": as_int(stats.get("api_calls")),
        **identity,
        **evaluated,
    }
    if controller:
        attributes[_META + "mini_swe_agent.controller"] = str(controller)
    if isinstance(stopping.get("stopped_by_controller"), bool):
        attributes[_META + "mini_swe_agent.stopped_by_controller"] = stopping["stopped_by_controller"]
    yield ImportedRun(
        run_id=f"{path.parent.name}/{instance}" if path.parent.name else instance,
        source="mini_swe_agent_2",
        agent_name="mini-swe-agent",
        harness=harness,
        model=model or agent_model(next((s.model for s in steps if s.model), "")),
        steps=steps,
        task=task,
        task_id=instance,
        outcome=outcome,
        synthetic_timing=True,
        attributes=attributes,
        summary={"exit_status": exit_status, "model_stats": stats},
    )
