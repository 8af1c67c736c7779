"""Claude Code's ``stream-json`` output (``claude -p --output-format stream-json --verbose``), as the JSON-lines file a
user saves, or inside an asciinema recording of the terminal it ran in (``*.cast``: Terminal-Bench's
``sessions/agent.cast``).

The stream is one JSON object per line:

- ``{"type": "system", "subtype": "init", "session_id", "model", "tools", "claude_code_version", ...}`` starts a
  run (a file holding several sessions is several runs; the run id is the session id, else the file's name);
- ``{"type": "assistant", "message": {"id", "model", "content": [...], "usage"}}`` is a model call. One call often
  arrives as several events, one per content block, with the same ``message.id``: they are one step. ``text`` and
  ``thinking`` blocks are its thought; each ``tool_use`` block (``name``, ``input``) is an action, the first one the
  step's action and the inputs (a ``Bash`` call's ``command``, else the input as JSON) its action input;
- ``{"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id", "content", "is_error"}]}}``
  holds the tool results, joined to their calls by ``tool_use_id``; ``is_error`` is a tool error. The step's
  observation is its results in call order;
- ``{"type": "result", "subtype", "num_turns", "total_cost_usd", "duration_ms", "usage"}`` ends the run (absent when
  the run was killed): how the agent stopped, kept as ``rb.metadata.claude_code.*``, never its outcome;
- events with a ``parent_tool_use_id`` are a subagent's (the ``Task`` tool): one nested run per ``Task`` call, under
  the step that called it;
- ``stream_event`` lines (``--include-partial-messages``) repeat what the complete messages say and are passed over.

Usage is per message (``input_tokens`` plus the cache reads and writes make the prompt); a usage of all zeros, which
a proxy that reports none writes, is read as not recorded.

The events are read by :mod:`rb_otel.importers.formats.claude_code_stream`, from the file or from a terminal
recording of it; steps carry the recording's times.

**Outcome.** A Terminal-Bench trial's ``results.json`` beside the recording (the folder above ``sessions/``, or the
file's own folder) gives it: ``is_resolved`` true is ``success``, false ``failure: unresolved``, null (or no such
file) ``unlabelled``: no outcome, left out of training and counted (``--labels`` may supply one). There the run id
is the trial's name, the task its ``task_id`` (and its ``instruction``), and the task group the task id without its
difficulty variant (``crack-7z-hash.hard`` is in ``crack-7z-hash``'s group).

**Agent.** The harness is ``claude_code`` (its version is ``rb.metadata.claude_code.version``), the kind coding (its
tools); the model is the ``init`` event's (:func:`~rb_otel.importers.identity.agent_model`), else the configured
one (Terminal-Bench's ``run_metadata.json`` ``model_name``), else the first main-chain message's, else the name of
the configuration folder. ``rb.metadata.claude_code.configuration`` names the Terminal-Bench configuration folder
when there is one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.importers.detect import NotRuns
from rb_otel.importers.formats.claude_code_stream import StreamEvent, stream_events
from rb_otel.importers.formats.mini_swe_agent import UNLABELLED, mapping
from rb_otel.importers.formats.records import as_int, dump, iso_seconds, observation, text
from rb_otel.importers.identity import agent_model
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import AttributeValue

__all__ = ["AGENT_NAME", "HARNESS", "read"]

#: The harness every run of this format is attributed to (docs/importers.md, "Agent identity").
HARNESS = "claude_code"
#: The agent's name (as Terminal-Bench names it).
AGENT_NAME = "claude-code"
_META = n.RB_METADATA_PREFIX
# Terminal-Bench's task variants (``crack-7z-hash.hard``, ``incompatible-python-fasttext.base_with_hint``).
_VARIANT = re.compile(r"\.[a-z_]+$")
_RESULT_FIELDS = ("subtype", "is_error", "num_turns", "duration_ms", "duration_api_ms", "total_cost_usd")


@dataclass(slots=True)
class _Chain:
    """The steps of one chain of messages: the main agent's, or one subagent's (a ``Task`` call's)."""

    steps: list[ImportedStep] = field(default_factory=list)
    by_message: dict[str, ImportedStep] = field(default_factory=dict)
    task: str = ""
    models: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Session:
    """One run being read: its chains, its init and result events, and where each tool call is."""

    init: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    session_id: str = ""
    main: _Chain = field(default_factory=_Chain)
    subagents: dict[str, _Chain] = field(default_factory=dict)
    calls: dict[str, tuple[ImportedStep, ImportedTool]] = field(default_factory=dict)
    end: float | None = None

    def chain(self, parent: str) -> _Chain:
        return self.subagents.setdefault(parent, _Chain()) if parent else self.main

    def add(self, item: StreamEvent) -> None:
        event = item.event
        self.session_id = self.session_id or str(event.get("session_id") or "")
        self.end = item.time if item.time is not None else self.end
        kind = event.get("type")
        chain = self.chain(str(event.get("parent_tool_use_id") or ""))
        message = mapping(event.get("message"))
        if kind == "system" and event.get("subtype") == "init":
            self.init = event
        elif kind == "result":
            self.result = event
        elif kind == "assistant":
            self._assistant(chain, message, item.time)
        elif kind == "user":
            self._user(chain, message, item.time)

    def _assistant(self, chain: _Chain, message: dict[str, Any], when: float | None) -> None:
        message_id = str(message.get("id") or f"message-{len(chain.steps)}")
        step = chain.by_message.get(message_id)
        if step is None:
            step = chain.by_message[message_id] = ImportedStep(index=len(chain.steps), timestamp=when)
            chain.steps.append(step)
        step.model = str(message.get("model") or step.model)
        if step.model:
            chain.models.append(step.model)
        step.finish_reason = str(message.get("stop_reason") or step.finish_reason)
        _usage(step, mapping(message.get("usage")))
        content = message.get("content")
        blocks: list[Any] = content if isinstance(content, list) else [content]
        for block in blocks:
            _block(step, block if isinstance(block, dict) else {"type": "text", "text": text(block)}, self.calls)

    def _user(self, chain: _Chain, message: dict[str, Any], when: float | None) -> None:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": text(content)}]
        for raw in blocks:
            block = mapping(raw)
            if block.get("type") == "tool_result":
                found = self.calls.get(str(block.get("tool_use_id") or ""))
                if found is None:
                    continue  # a result whose call is not in the stream (cut off before it)
                step, tool = found
                tool.result = text(block.get("content"))
                tool.error = "tool_error" if block.get("is_error") is True else None
                if when is not None and step.timestamp is not None:
                    step.duration_s = max(when - step.timestamp, 0.0)
            elif block.get("type") == "text" and not chain.task:
                chain.task = text(block.get("text"))[:2000]


def _usage(step: ImportedStep, usage: dict[str, Any]) -> None:
    """The message's usage (each event of one message repeats it: the last one stands); all zeros is none."""
    counts = {k: as_int(usage.get(k)) for k in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                                 "cache_creation_input_tokens")}  # fmt: skip
    if not any(counts.values()):
        return
    step.cache_read_tokens = counts["cache_read_input_tokens"]
    step.cache_creation_tokens = counts["cache_creation_input_tokens"]
    step.input_tokens = counts["input_tokens"] + step.cache_read_tokens + step.cache_creation_tokens
    step.output_tokens = counts["output_tokens"]
    step.tokens = step.input_tokens + step.output_tokens


def _block(step: ImportedStep, block: dict[str, Any], calls: dict[str, tuple[ImportedStep, ImportedTool]]) -> None:
    kind = block.get("type")
    if kind in ("text", "thinking"):
        said = text(block.get("thinking") if kind == "thinking" else block.get("text")).strip()
        if said:
            step.thought = f"{step.thought}\n{said}" if step.thought else said
    elif kind == "tool_use":
        arguments = block.get("input")
        tool = ImportedTool(name=str(block.get("name") or "unknown"), call_id=str(block.get("id") or ""),
                            arguments=arguments)  # fmt: skip
        step.tools.append(tool)
        if tool.call_id:
            calls[tool.call_id] = (step, tool)


def _action_input(tool: ImportedTool) -> str:
    command = tool.arguments.get("command") if isinstance(tool.arguments, dict) else None
    return command if isinstance(command, str) else dump(tool.arguments)


def _finish(steps: list[ImportedStep]) -> list[ImportedStep]:
    """Each step's action, action input and observation, from its tool calls and their results."""
    for step in steps:
        if step.tools:
            step.action = step.tools[0].name
            step.action_input = "\n".join(_action_input(t) for t in step.tools)[:2000]
            results = [t.result for t in step.tools if t.result is not None]
            step.observation = observation("\n".join(results)) if results else None
    return steps


@dataclass(frozen=True, slots=True)
class _Trial:
    """What a Terminal-Bench trial's files say of the run recorded in it (module docstring)."""

    results: dict[str, Any]
    configuration: str = ""
    configured_model: str = ""

    @classmethod
    def of(cls, path: Path) -> _Trial:
        folder = path.parent.parent if path.parent.name == "sessions" else path.parent
        results = _json_object(folder / "results.json")
        if "is_resolved" not in results:
            return cls({})  # not a Terminal-Bench trial's results (another tool's results.json)
        configuration = folder.parent.parent
        metadata = _json_object(configuration / "run_metadata.json")
        return cls(results, configuration.name if metadata else "", str(metadata.get("model_name") or ""))

    @property
    def outcome(self) -> str:
        resolved = self.results.get("is_resolved")
        if not isinstance(resolved, bool):
            return UNLABELLED
        return "success" if resolved else "failure: unresolved"

    def attributes(self) -> dict[str, AttributeValue]:
        if not self.results:
            return {}
        tests = mapping(self.results.get("parser_results")).values()
        out: dict[str, AttributeValue] = {
            _META + "terminal_bench.failure_mode": str(self.results.get("failure_mode") or ""),
            _META + "terminal_bench.tests_passed": sum(1 for t in tests if t == "passed"),
            _META + "terminal_bench.tests": len(tests),
        }
        if self.configuration:
            out[_META + "claude_code.configuration"] = self.configuration
        return out


def _json_object(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _sessions(path: Path, problems: list[ImportProblem]) -> list[_Session]:
    """The runs of a stream: a new ``init`` event (of another session) starts the next."""
    sessions: list[_Session] = []
    for item in stream_events(path, problems):
        event = item.event
        starts = event.get("type") == "system" and event.get("subtype") == "init"
        if not sessions or (starts and (sessions[-1].init or sessions[-1].main.steps)):
            sessions.append(_Session())
        sessions[-1].add(item)
    return sessions


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    sessions = _sessions(path, problems)
    if not sessions:
        raise NotRuns(str(path), "format", "no Claude Code stream-json events in it (Claude Code never started)")
    trial = _Trial.of(path)
    for number, session in enumerate(sessions):
        yield _run(path, session, trial, number if len(sessions) > 1 else None)


def _run(path: Path, session: _Session, trial: _Trial, number: int | None) -> ImportedRun:
    results = trial.results
    run_id = str(results.get("trial_name") or session.session_id or path.stem)
    if number is not None:
        run_id = session.session_id or f"{run_id}#{number + 1}"
    task_id = str(results.get("task_id") or "")
    model = session.init.get("model") or trial.configured_model
    model = model or next(iter(session.main.models), "") or trial.configuration
    steps = _finish(session.main.steps)
    first = next((s.timestamp for s in steps if s.timestamp is not None), None)
    run = ImportedRun(
        run_id=run_id,
        source="claude_code",
        steps=steps,
        agent_name=AGENT_NAME,
        harness=HARNESS,
        task=str(results.get("instruction") or session.main.task)[:2000],
        task_id=task_id,
        group_id=_VARIANT.sub("", task_id),
        model=agent_model(str(model)),
        outcome=trial.outcome,
        start=first if first is not None else iso_seconds(results.get("agent_started_at")),
        end=session.end,
        synthetic_timing=first is None,
        attributes={**_session_attributes(session), **trial.attributes()},
        summary={k: session.result[k] for k in _RESULT_FIELDS if k in session.result},
    )
    for parent, chain in session.subagents.items():
        spawned = session.calls.get(parent)
        child = ImportedRun(
            run_id=f"{run_id}/{parent}",
            source="claude_code",
            steps=_finish(chain.steps),
            agent_name=f"{AGENT_NAME}:subagent",
            harness=HARNESS,
            task=chain.task,
            model=agent_model(next(iter(chain.models), "")),
            outcome="success",
            synthetic_timing=not any(s.timestamp is not None for s in chain.steps),
        )
        run.children.append((spawned[0].index if spawned else None, child))
    return run


def _session_attributes(session: _Session) -> dict[str, AttributeValue]:
    init, result = session.init, session.result
    out: dict[str, AttributeValue] = {}
    if init.get("claude_code_version"):
        out[_META + "claude_code.version"] = str(init["claude_code_version"])
    if session.session_id:
        out[_META + "claude_code.session_id"] = session.session_id
    # how the agent stopped ("success", "error_max_turns", ...; "none": killed before its result), not its outcome
    out[_META + "claude_code.result"] = str(result.get("subtype") or "none") if result else "none"
    if isinstance(result.get("num_turns"), int):
        out[_META + "claude_code.num_turns"] = result["num_turns"]
    if isinstance(result.get("total_cost_usd"), int | float) and not isinstance(result.get("total_cost_usd"), bool):
        out[_META + "claude_code.total_cost_usd"] = float(result["total_cost_usd"])
    return out
