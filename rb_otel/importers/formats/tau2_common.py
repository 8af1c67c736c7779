"""What the tau2-bench readers share: a results file's simulations as runs, and the agent that ran them.

Both layouts (``tau2_bench``: ``{info, tasks, simulations}``; ``tau2_indexed``: the same with a top-level
``simulation_index`` and voice-era fields) hold simulations whose messages are OpenAI-style with flat tool calls
(``{id, name, arguments}``) and tool results carrying the call's ``id``. One run per simulation, in file order; the
outcome is ``reward_info.reward`` (below 1 is a failure; ``termination_reason`` is how the run stopped, recorded
as ``rb.metadata.tau2.termination_reason``); the run's ``unique_id`` is the simulation id, so a simulation saved
in two files is read once (:class:`~rb_otel.importers.reading.SeenRuns`).

The agent (docs/importers.md, "Agent identity") is the header's ``info.agent_info``: tau2's own agents
(``llm_agent``, ``llm_agent_solo``, ...) are the harness ``tau2 <implementation>``, any other implementation is its
own harness (``ironforge``, ``whissle``); the model is ``agent_info.llm`` (:func:`agent_model`). One exception: a
file of a leaderboard submission (``submission.json`` beside its ``trajectories/`` folder) whose submission is
``custom`` and whose messages carry none of the timestamps tau2's runner writes on every message was exported
into tau2's format by another harness, and its header names the exporter's defaults, not the agent; such runs are
the submission's agent (harness and model: its ``model_name``, as NVIDIA's ToolOrchestra submission names its
orchestrator), with the header kept as ``rb.metadata.tau2.header_agent``.

Runs are grouped (folds, bootstrap intervals) by their task's *user scenario*: the same simulated user under two
policy variants (``airline`` and ``airline_tighter_policy``) is one group, so a fold never sees a scenario it is
tested on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.openai_messages import steps_from_messages
from rb_otel.importers.formats.records import iso_seconds, load_json
from rb_otel.importers.formats.tau_bench import reward_outcome
from rb_otel.importers.identity import agent_model, reasoning_effort
from rb_otel.importers.model import ImportedRun, ImportProblem, RecordError
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import AttributeValue

__all__ = ["TAU2_AGENTS", "Agent", "mapping", "simulation_runs", "simulations", "the_agent"]

#: tau2-bench's own agent implementations: their harness is ``tau2 <implementation>``.
TAU2_AGENTS = frozenset({"llm_agent", "llm_agent_solo", "llm_agent_gt"})
_SUBMISSION = "submission.json"
_META = n.RB_METADATA_PREFIX


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class Agent:
    """Who ran a results file's simulations (module docstring)."""

    harness: str
    model: str
    name: str  # the implementation, as ``agent_name`` has always named it (``llm_agent``)
    step_model: str  # the model each call names (the header's spelling; "" when the header is not the agent's)
    attributes: dict[str, AttributeValue] = field(default_factory=dict)


def _submission(path: Path, problems: list[ImportProblem]) -> dict[str, Any]:
    """A leaderboard submission's metadata: ``submission.json`` in the results file's folder or the one above it
    (``<submission>/trajectories/<file>``); ``{}`` when there is none or it cannot be read (a problem, then)."""
    for folder in (path.parent, path.parent.parent):
        candidate = folder / _SUBMISSION
        if candidate.is_file():
            try:
                return mapping(load_json(candidate))
            except RecordError as exc:
                problems.append(ImportProblem(exc.path, exc.where, f"{exc.problem}; its metadata not used"))
                return {}
    return {}


def _exported(simulations: list[Any]) -> bool:
    """Whether no message of the file carries the timestamp tau2's runner writes on every message."""
    messages = (m for sim in simulations for m in mapping(sim).get("messages") or [] if isinstance(m, dict))
    return not any(m.get("timestamp") for m in messages)


def the_agent(path: Path, data: dict[str, Any], problems: list[ImportProblem]) -> Agent:
    """The agent of a results file (module docstring): harness, model, ``agent_name`` and its run attributes."""
    info = mapping(data.get("info"))
    header = mapping(info.get("agent_info"))
    user = mapping(info.get("user_info"))
    implementation = str(header.get("implementation") or "tau2-agent")
    llm = str(header.get("llm") or "")
    attributes: dict[str, AttributeValue] = {
        _META + "tau2.user_simulator": " ".join(str(user.get(k) or "") for k in ("implementation", "llm")).strip(),
        **reasoning_effort(mapping(header.get("llm_args"))),
    }
    submission = _submission(path, problems)
    if submission.get("model_name"):
        attributes[_META + "tau2.submission"] = str(submission["model_name"])
    if (
        implementation in TAU2_AGENTS
        and submission.get("submission_type") == "custom"
        and submission.get("model_name")
        and _exported(data.get("simulations") or [])
    ):
        attributes[_META + "tau2.header_agent"] = f"{implementation} {llm}".strip()
        name = str(submission["model_name"])
        return Agent(harness=name, model=agent_model(name), name=name, step_model="", attributes=attributes)
    harness = f"tau2 {implementation}" if implementation in TAU2_AGENTS else implementation
    return Agent(harness=harness, model=agent_model(llm), name=implementation, step_model=llm, attributes=attributes)


def simulations(
    path: Path,
    data: Any,
    problems: list[ImportProblem],
    prepare: Callable[[list[Any]], list[Any]] | None = None,
) -> list[tuple[int, dict[str, Any]]]:
    """The file's simulations that hold a ``messages`` list, with their index (their messages passed through
    ``prepare`` when given); any other simulation is a problem (a full-duplex one recorded as ticks says so)."""
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise RecordError(str(path), "top level", "expected an object with a 'simulations' list (tau2-bench)")
    kept = []
    for i, sim in enumerate(data["simulations"]):
        where = f"simulations[{i}]"
        if isinstance(sim, dict) and isinstance(sim.get("messages"), list):
            kept.append((i, {**sim, "messages": prepare(sim["messages"])} if prepare else sim))
        elif isinstance(sim, dict) and sim.get("ticks"):
            mode = sim.get("mode") or "full_duplex"
            problems.append(ImportProblem(str(path), where, f"a {mode} simulation recorded as ticks, not messages: "
                                          "not read"))  # fmt: skip
        else:
            problems.append(ImportProblem(str(path), where, "expected a simulation with a 'messages' list"))
    return kept


def _scenarios(tasks: Any) -> dict[str, str]:
    """``task id -> "scenario/<digest>"`` of each task's user scenario (the simulated user's instructions)."""
    out: dict[str, str] = {}
    for task in tasks if isinstance(tasks, list) else []:
        if isinstance(task, dict) and task.get("id") is not None and task.get("user_scenario") is not None:
            text = json.dumps(task["user_scenario"], sort_keys=True, default=str)
            out[str(task["id"])] = "scenario/" + hashlib.sha256(text.encode()).hexdigest()[:12]
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def simulation_runs(
    path: Path,
    data: dict[str, Any],
    problems: list[ImportProblem],
    *,
    source: str,
    simulations: list[tuple[int, dict[str, Any]]],
) -> Iterator[ImportedRun]:
    """One run per ``(index, simulation)`` of ``simulations`` (already checked to hold a ``messages`` list), for
    the results file ``data`` read from ``path``; a simulation without a numeric reward is a problem, not a run."""
    agent = the_agent(path, data, problems)
    domain = str(mapping(mapping(data.get("info")).get("environment_info")).get("domain_name") or "")
    scenarios = _scenarios(data.get("tasks"))
    for i, sim in simulations:
        where = f"simulations[{i}]"
        reward = mapping(sim.get("reward_info")).get("reward")
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            problems.append(ImportProblem(str(path), where, f"'reward_info.reward' must be a number, got {reward!r}"))
            continue
        steps, task = steps_from_messages(sim["messages"], str(path), f"{where}: messages", problems)
        replies = [m for m in sim["messages"] if mapping(m).get("role") == "assistant"]
        for step, message in zip(steps, replies, strict=False):  # a malformed message is a problem, not a step
            step.timestamp = iso_seconds(message.get("timestamp"))
            step.model = agent.step_model
            usage = mapping(message.get("usage"))
            step.input_tokens = _int(usage.get("prompt_tokens"))
            step.output_tokens = _int(usage.get("completion_tokens"))
            step.tokens = (step.input_tokens or 0) + (step.output_tokens or 0)
        start, end = iso_seconds(sim.get("start_time")), iso_seconds(sim.get("end_time"))
        task_id = str(sim.get("task_id", ""))
        sim_id = str(sim.get("id") or "")
        yield ImportedRun(
            run_id=sim_id or f"{path.stem}-{i}",
            source=source,
            agent_name=f"{agent.name}:{domain}" if domain else agent.name,
            harness=agent.harness,
            model=agent.model,
            unique_id=f"tau2:{sim_id}" if sim_id else "",
            steps=steps,
            task=task,
            task_id=f"{domain}/{task_id}" if domain else task_id,
            group_id=scenarios.get(task_id, ""),
            outcome=reward_outcome(reward),
            start=start,
            end=end,
            synthetic_timing=start is None,
            attributes={
                _META + "reward": float(reward),
                _META + "tau2.termination_reason": str(sim.get("termination_reason") or ""),
                **agent.attributes,
            },
        )
