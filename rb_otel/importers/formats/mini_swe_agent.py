"""mini-swe-agent trajectories (``trajectory_format: mini-swe-agent-1``, ``*.traj.json``; the SWE-bench
bash-only leaderboard's format).

Every assistant message is a model call: its thought is the text outside the ```` ```bash ```` block (with the
provider's reasoning, when the raw response kept it), its action ``bash`` with the command as input, and its
observation the next user message (``<returncode>N</returncode><output>...``; a non-zero return code is a tool
error). A turn without exactly one command block is what the harness itself calls a format error: the step is
kept, with ``error.type`` ``format_error`` and no tool call. The outcome comes from ``--labels``
(``info.exit_status`` says how the agent stopped, not whether the patch works): ``unlabelled`` until then.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import as_int, load_json, observation, text
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.telemetry import names as n

__all__ = ["FORMAT_ID", "UNLABELLED", "read", "split_response"]

FORMAT_ID = "mini-swe-agent-1"
#: The outcome of a run whose harness does not say whether it succeeded (labels supply it).
UNLABELLED = "unlabelled"
# The harness's own action regex (mini-swe-agent 1.x ``parse_action``).
_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
_RETURN_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")


def split_response(content: str) -> tuple[str, list[str]]:
    """``(thought, commands)``: the text outside the bash blocks, and the blocks' commands."""
    commands = [c.strip() for c in _ACTION.findall(content)]
    thought = _ACTION.sub(" ", content).strip()
    return thought.removeprefix("THOUGHT:").strip(), commands


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _response(message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    response = _mapping(_mapping(message.get("extra")).get("response"))
    choices = response.get("choices") if isinstance(response.get("choices"), list) else []
    first = _mapping(choices[0]) if choices else {}
    return response, _mapping(first.get("message"))


def _step(index: int, message: dict[str, Any], reply: str | None) -> ImportedStep:
    thought, commands = split_response(text(message.get("content")))
    response, raw = _response(message)
    reasoning = text(raw.get("reasoning") or raw.get("reasoning_content"))
    usage = _mapping(response.get("usage"))
    details = _mapping(usage.get("completion_tokens_details"))
    step = ImportedStep(
        index=index,
        thought="\n".join(p for p in (reasoning, thought) if p),
        observation=observation(reply),
        input_tokens=as_int(usage.get("prompt_tokens")) if usage else None,
        output_tokens=as_int(usage.get("completion_tokens")) if usage else None,
        reasoning_tokens=as_int(details.get("reasoning_tokens")) if details else None,
        model=str(response.get("model") or ""),
    )
    step.tokens = (step.input_tokens or 0) + (step.output_tokens or 0)
    if len(commands) != 1:
        step.error_type = "format_error"
        return step
    code = _RETURN_CODE.search(reply or "")
    returncode = int(code.group(1)) if code else None
    step.action, step.action_input = "bash", commands[0][:2000]
    step.tools = [
        ImportedTool(
            name="bash",
            call_id=f"step-{index}",
            arguments=commands[0],
            result=reply,
            error=None if returncode in (0, None) else f"exit code {returncode}",
        )
    ]
    return step


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise RecordError(str(path), "top level", "expected an object with a 'messages' list (mini-swe-agent)")
    messages = data["messages"]
    steps: list[ImportedStep] = []
    task = ""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            problems.append(ImportProblem(str(path), f"messages[{i}]", "expected an object with a 'role'"))
            continue
        if message["role"] == "user" and not task:
            task = text(message.get("content"))[:2000]
        if message["role"] != "assistant":
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        reply = (
            text(following.get("content")) if isinstance(following, dict) and following.get("role") == "user" else None
        )
        steps.append(_step(len(steps), message, reply))
    info = _mapping(data.get("info"))
    config = _mapping(_mapping(info.get("config")).get("model"))
    stats = _mapping(info.get("model_stats"))
    instance = str(data.get("instance_id") or path.name.removesuffix(".traj.json").removesuffix(".json"))
    yield ImportedRun(
        run_id=instance,
        source="mini_swe_agent",
        agent_name="mini-swe-agent",
        model=str(config.get("model_name") or next((s.model for s in steps if s.model), "")),
        steps=steps,
        task=task,
        task_id=instance,
        outcome=UNLABELLED,
        synthetic_timing=True,
        attributes={
            n.RB_METADATA_PREFIX + "mini_swe_agent.exit_status": str(info.get("exit_status") or ""),
            n.RB_METADATA_PREFIX + "mini_swe_agent.api_calls": as_int(stats.get("api_calls")),
        },
        summary={"exit_status": str(info.get("exit_status") or ""), "model_stats": stats},
    )
