"""mini-swe-agent 1.x trajectories (``trajectory_format: mini-swe-agent-1``, ``*.traj.json``; the SWE-bench
bash-only leaderboard's format).

Every assistant message is a model call, and the harness's next message says what became of it:

- an observation (the config's ``action_observation_template``: ``<returncode>N</returncode><output>...``): the
  action ran; a non-zero return code is a tool error;
- the config's ``timeout_template`` (``The last command ... timed out``): the action ran and was killed (a tool
  error ``timeout``);
- the run's last message once it exited (``info.exit_status``): the submission the final action printed;
- anything else (the ``format_error_template``, or a fork's own complaint): the harness refused the turn, a
  ``format_error`` step with no tool call.

The action is the turn's one ```` ```bash ```` block; a fork whose prompt writes actions another way (the "CaM"
prompt's ``def action(): return exec_bash_cmd(...)`` under a ``# Thoughts:`` comment) has its turn's code as the
action input and its comment lines as the thought. The thought is the text outside the action (with the provider's
reasoning, when the raw response kept it). A turn the run ended on, with no message after it, is an action when it
has exactly one bash block.

The run id is the instance id (``instance_id``, else the file's name), qualified by its batch in mini-swe-agent's
batch layout (``<batch>/<instance>/<instance>.traj.json``: ``<batch>/<instance>``), where several batches run the
same instances; the task id is the instance id. The outcome is the SWE-bench evaluation's
(:mod:`rb_otel.importers.formats.swebench`: the report found with the trajectory), ``unlabelled`` when none names
the run; ``info.exit_status`` says how the agent stopped, not whether its patch works. The agent (docs/importers.md,
"Agent identity") is the harness ``mini-swe-agent <major version>`` and the configured model
(:func:`~rb_otel.importers.identity.agent_model`); the reasoning effort, the prompt variant (``stock`` for
mini-swe-agent's own system prompt, else the run module of ``info.config.agent_type`` that set another: a fork's
``swebench_cam``) and a digest of the prompt templates are ``rb.metadata.*`` attributes.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import as_int, load_json, observation, text
from rb_otel.importers.formats.swebench import evaluation
from rb_otel.importers.identity import agent_model, major_version, reasoning_effort
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import AttributeValue

__all__ = [
    "FORMAT_ID",
    "UNLABELLED",
    "mapping",
    "read",
    "run_identity",
    "split_response",
    "swebench_outcome",
    "usage_step",
]

FORMAT_ID = "mini-swe-agent-1"
#: The outcome of a run no evaluation report names (labels may supply it).
UNLABELLED = "unlabelled"
# The harness's own action regex (mini-swe-agent 1.x ``parse_action``).
_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
# The same block written inside code, indented (a fork's prompt puts it in a function body).
_INDENTED_ACTION = re.compile(r"```bash[ \t]*\n(.*?)\n[ \t]*```", re.DOTALL)
_RETURN_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_TEMPLATE_FIELD = re.compile(r"\{[{%]")
# How mini-swe-agent's own SWE-bench system prompt begins (1.x: "... interact multiple times with a computer shell",
# 2.x: "... interact with a computer shell").
_STOCK_SYSTEM = "You are a helpful assistant that can interact"
_META = n.RB_METADATA_PREFIX


def split_response(content: str) -> tuple[str, list[str]]:
    """``(thought, commands)``: the text outside the bash blocks, and the blocks' commands."""
    commands = [c.strip() for c in _ACTION.findall(content)]
    thought = _ACTION.sub(" ", content).strip()
    return thought.removeprefix("THOUGHT:").strip(), commands


def _split_code(content: str) -> tuple[str, str]:
    """``(thought, command)`` of a turn that writes its action as code (module docstring): comment lines are the
    thought; the command is the one bash block inside the code (indented, as in a function body), else the string
    passed to ``exec_bash_cmd(...)``, else the code itself."""
    comments, lines = [], []
    for line in content.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comments.append(stripped.lstrip("#").strip())
        else:
            lines.append(line)
    thought = "\n".join(c for c in comments if c).removeprefix("Thoughts:").strip()
    code = "\n".join(lines).strip()
    blocks = _INDENTED_ACTION.findall(code)
    if len(blocks) == 1:
        return thought, textwrap.dedent(blocks[0]).strip()
    return thought, _called_command(code) or code


def _called_command(code: str) -> str | None:
    """The literal string a turn's code passes to ``exec_bash_cmd``, when there is exactly one (parsed, never run)."""
    try:
        with warnings.catch_warnings():  # the agent's code is data here: its invalid escapes are not ours to warn of
            warnings.simplefilter("ignore")
            tree = ast.parse(textwrap.dedent(code))
    except (SyntaxError, ValueError):
        return None
    found = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "exec_bash_cmd"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]
    return found[0] if len(found) == 1 else None


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _response(message: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    response = mapping(mapping(message.get("extra")).get("response"))
    choices = response.get("choices") if isinstance(response.get("choices"), list) else []
    first = mapping(choices[0]) if choices else {}
    return response, mapping(first.get("message"))


def usage_step(index: int, message: dict[str, Any], thought: str) -> ImportedStep:
    """A step with the model call's usage, model and reasoning read from the raw response (``extra.response``)."""
    response, raw = _response(message)
    reasoning = text(raw.get("reasoning") or raw.get("reasoning_content"))
    usage = mapping(response.get("usage"))
    details = mapping(usage.get("completion_tokens_details"))
    cached = mapping(usage.get("prompt_tokens_details")).get("cached_tokens")
    step = ImportedStep(
        index=index,
        thought="\n".join(p for p in (reasoning, thought) if p),
        input_tokens=as_int(usage.get("prompt_tokens")) if usage else None,
        output_tokens=as_int(usage.get("completion_tokens")) if usage else None,
        reasoning_tokens=as_int(details.get("reasoning_tokens")) if details else None,
        cache_read_tokens=as_int(cached) if isinstance(cached, int) else None,
        model=str(response.get("model") or ""),
    )
    step.tokens = (step.input_tokens or 0) + (step.output_tokens or 0)
    return step


def _prefix(template: Any, default: str) -> str:
    """The fixed text a harness template starts with (up to its first field), ``default`` without one."""
    head = _TEMPLATE_FIELD.split(template, maxsplit=1)[0].strip() if isinstance(template, str) else ""
    return head or default


class _Replies:
    """What the harness's message after a turn says became of it (module docstring)."""

    def __init__(self, data: dict[str, Any]) -> None:
        agent = mapping(mapping(mapping(data.get("info")).get("config")).get("agent"))
        self.observation = _prefix(agent.get("action_observation_template"), "<returncode>")
        self.timeout = _prefix(agent.get("timeout_template"), "The last command")
        self.exited = bool(mapping(data.get("info")).get("exit_status"))

    def kind(self, reply: str | None, last: bool) -> str:
        if reply is None:
            return "none"
        stripped = reply.lstrip()
        if stripped.startswith(self.observation):
            return "observation"
        if stripped.startswith(self.timeout):
            return "timeout"
        return "submission" if last and self.exited else "refused"


def _step(index: int, message: dict[str, Any], reply: str | None, kind: str) -> ImportedStep:
    content = text(message.get("content"))
    thought, commands = split_response(content)
    ran = kind in ("observation", "timeout", "submission") or (kind == "none" and len(commands) == 1)
    command = commands[0] if len(commands) == 1 else None
    if ran and command is None:  # the fork's own action syntax (module docstring)
        thought, command = _split_code(content)
        command = command or content.strip()
    step = usage_step(index, message, thought)
    step.observation = observation(reply)
    if not ran or command is None:
        step.error_type = "format_error"
        return step
    code = _RETURN_CODE.search(reply or "") if kind == "observation" else None
    returncode = int(code.group(1)) if code else None
    error = "timeout" if kind == "timeout" else (None if returncode in (0, None) else f"exit code {returncode}")
    step.action, step.action_input = "bash", command[:2000]
    step.tools = [ImportedTool(name="bash", call_id=f"step-{index}", arguments=command, result=reply, error=error)]
    return step


def _prompt_variant(system: Any, agent_type: str) -> str:
    """``stock`` for mini-swe-agent's own system prompt; else the run module that set another (a fork's
    ``swebench_cam``: ``minisweagent.run.extra.swebench_cam.ProgressTrackingAgent``), else ``custom``."""
    if isinstance(system, str) and system.startswith(_STOCK_SYSTEM):
        return "stock"
    parts = agent_type.split(".")
    return parts[-2] if len(parts) > 3 and parts[:2] == ["minisweagent", "run"] else "custom"


def run_identity(data: dict[str, Any], harness_major: str) -> tuple[str, str, dict[str, AttributeValue]]:
    """``(harness, model, attributes)`` of a mini-swe-agent trajectory (module docstring): the harness from
    ``info.mini_version`` (else ``harness_major``), the configured model (else the first response's, by the
    caller), the reasoning effort, prompt variant and digest, the agent type and version as attributes."""
    info = mapping(data.get("info"))
    config = mapping(info.get("config"))
    model = mapping(config.get("model"))
    agent = mapping(config.get("agent"))
    version = str(info.get("mini_version") or "")
    attributes: dict[str, AttributeValue] = {**reasoning_effort(mapping(model.get("model_kwargs")))}
    agent_type = str(config.get("agent_type") or "")
    if agent_type:
        attributes[_META + "mini_swe_agent.agent_type"] = agent_type
    templates = [agent.get(k) for k in ("system_template", "instance_template")]
    if any(isinstance(t, str) for t in templates):
        joined = "\0".join(t if isinstance(t, str) else "" for t in templates)
        attributes[_META + "prompt_digest"] = hashlib.sha256(joined.encode()).hexdigest()[:12]
        attributes[_META + "prompt_variant"] = _prompt_variant(templates[0], agent_type)
    if version:
        attributes[_META + "mini_swe_agent.version"] = version
    harness = f"mini-swe-agent {major_version(version) or harness_major}"
    return harness, agent_model(str(model.get("model_name") or "")), attributes


def swebench_outcome(
    path: Path, instance_id: str, data: dict[str, Any], problems: list[ImportProblem]
) -> tuple[str, dict[str, AttributeValue]]:
    """The run's outcome from the evaluation report found with ``path``, and the attributes saying which."""
    submission = mapping(data.get("info")).get("submission")
    found = evaluation(path, instance_id, submission if isinstance(submission, str) else None, problems)
    return (found.outcome, found.attributes(path)) if found is not None else (UNLABELLED, {})


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise RecordError(str(path), "top level", "expected an object with a 'messages' list (mini-swe-agent)")
    messages = data["messages"]
    replies = _Replies(data)
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
        steps.append(_step(len(steps), message, reply, replies.kind(reply, last=i + 2 == len(messages))))
    info = mapping(data.get("info"))
    stats = mapping(info.get("model_stats"))
    instance = str(data.get("instance_id") or path.name.removesuffix(".traj.json").removesuffix(".json"))
    harness, model, identity = run_identity(data, "1")
    outcome, evaluated = swebench_outcome(path, instance, data, problems)
    # mini-swe-agent's batch layout, <batch>/<instance>/<instance>.traj.json: several batches run one instance, and
    # a run id names one run (rb-otel's traces join the parts of a run by it), so the batch qualifies it
    batched = path.parent.name == instance and path.parent.parent.name
    yield ImportedRun(
        run_id=f"{path.parent.parent.name}/{instance}" if batched else instance,
        source="mini_swe_agent",
        agent_name="mini-swe-agent",
        harness=harness,
        model=model or agent_model(next((s.model for s in steps if s.model), "")),
        steps=steps,
        task=task,
        task_id=instance,
        outcome=outcome,
        synthetic_timing=True,
        attributes={
            _META + "mini_swe_agent.exit_status": str(info.get("exit_status") or ""),
            _META + "mini_swe_agent.api_calls": as_int(stats.get("api_calls")),
            **identity,
            **evaluated,
        },
        summary={"exit_status": str(info.get("exit_status") or ""), "model_stats": stats},
    )
