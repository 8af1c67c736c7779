"""Labelled runs for ``rb-otel train``: any importer's format (or rb-otel's own OTLP/JSON traces), with outcomes.

Each run becomes the steps a live step scorer would have seen (:func:`~rb_otel.steering.scoring.steps.scorer_step`,
the same views and cuts), keyed by its agent (:func:`~rb_otel.steering.pilot.baselines.agent_key`) and grouped by task
(or user scenario), so folds keep a task's runs together.

**The training view is the live view.** A live LangChain run scores a turn when the next model call starts, on the
newest tool result: a turn that called no tool (a reply to the user) is scored with no observation, whatever the
user answers next (that answer starts the next request). So a text-only step's observation is dropped here too (a
harness such as tau2-bench records the simulated user's reply as it).

**The grouping rule.** Runs are one task group when they share the importer's group id (tau2-bench: a digest of the
simulated user's instructions) *or* the same task under a variant of its domain (``airline/8`` and
``airline-relaxed/8``, ``airline_tighter_policy/8``: one customer whose instructions were edited), joined
transitively, so no fold or half split has one customer on both sides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rb_otel.analysis.fleet import FleetFilter
from rb_otel.analysis.imported import read_from_source, source_runs
from rb_otel.files import not_a_file
from rb_otel.importers.detect import FORMATS, NotRuns, detect, input_files
from rb_otel.importers.labels import Labels, failed_of, load_labels, with_recorded  # failed_of: importable here
from rb_otel.importers.model import ImportedRun, ImportProblem, RecordError
from rb_otel.importers.outcome_events import recorded_outcomes
from rb_otel.importers.reading import SeenRuns, not_runs_problem
from rb_otel.importers.replay import READERS
from rb_otel.steering.agent_keys import agent_key, normalise_model
from rb_otel.steering.pilot.fingerprint import task_family, task_keys
from rb_otel.steering.pilot.kinds import infer_agent_kind
from rb_otel.steering.scoring import ScorerStep

__all__ = ["Dataset", "LabelledRun", "agent_unit", "failed_of", "grouped", "read_dataset", "task_family"]


@dataclass(slots=True)
class LabelledRun:
    """One run with its outcome, as the pilot scores it (its scored steps, in order)."""

    run_id: str
    source: str
    agent: str
    group: str
    failed: bool
    steps: list[ScorerStep]
    prompt_tokens: list[int]  # the largest prompt (else call) in tokens so far, per step
    tokens: list[int]  # tokens of each step's call
    family: str = ""  # the task up to its domain's variant (the grouping rule)
    harness: str = ""  # what ran the agent (ImportedRun.harness; else its name up to a domain suffix)
    model: str = ""  # the agent's model, normalised
    #: The keys of its task group before the grouping rule joins groups (the model file's fingerprint holds them).
    task_keys: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The run's kind of agent (:func:`~rb_otel.steering.pilot.kinds.infer_agent_kind` of the tools it
        called)."""
        return infer_agent_kind({s.action for s in self.steps if s.action})


def agent_unit(run: LabelledRun) -> str:
    """The agent a run belongs to for training and holding out: its harness and its model (``"harness|model"``).
    The same model in two harnesses is two agents; one model's runs on several domains, on policy variants or at
    several reasoning efforts in one harness are one. Runs whose importer names no harness fall back to the model
    part of their agent key."""
    if run.harness or run.model:
        return f"{run.harness}|{run.model}"
    _, bar, model = run.agent.rpartition("|")
    return model if bar and model else run.agent


@dataclass(slots=True)
class Dataset:
    runs: list[LabelledRun]
    problems: list[ImportProblem] = field(default_factory=list)
    unlabelled: int = 0
    files: int = 0
    not_runs: int = 0  # files in the directories read that hold no runs (reports, configs, ...), passed over


def read_dataset(
    paths: Sequence[str | Path],
    *,
    labels: str | Path | Labels | None = None,
    format: str = "auto",
    where: FleetFilter | None = None,
    engine: str = "python",
    done: Callable[[], None] | None = None,
) -> Dataset:
    """Every labelled run under ``paths`` (files, or directories with their subfolders, in path order). ``labels``
    sets outcomes by run id. In a directory, files that hold no runs are passed over and counted (``not_runs``, and
    one line in ``problems``); a run whose ``unique_id`` was already read is a duplicate (listed, not taken).
    ``done()`` is called after each file (not for a trace store, read in one go).

    With a URL among ``paths`` (a trace store), ``engine="chdb"`` or a filter ``where``, the runs come from that
    source, selected there (:mod:`rb_otel.analysis.imported`). Outcomes recorded after the runs (``gen_ai.evaluation
    .result`` events of ``rb.record_outcome`` and ``rb-otel label``) are read where the runs live too
    (:mod:`rb_otel.importers.outcome_events`): an event sets a run's outcome, and a ``labels`` entry wins over it.
    Raises :class:`~rb_otel.importers.model.RecordError` for a file given by name that cannot be read (one found
    in a directory is skipped and listed in ``problems``) and for an unknown ``format``;
    :class:`~rb_otel.analysis.sources.SourceError` for a source that cannot be reached or read.
    """
    if format != "auto" and format not in READERS:
        raise RecordError(str(paths[0]) if paths else "", "format", f"unknown format {format!r}; choose {FORMATS}")
    outcomes = load_labels(labels) if isinstance(labels, str | Path) else labels
    paths, recorded = recorded_outcomes(paths)  # outcome events where the runs live; --labels wins over them
    outcomes = with_recorded(outcomes, recorded)
    data = Dataset(runs=[])
    if read_from_source(paths, where, engine):
        sourced = source_runs(paths, where, engine=engine)
        data.problems += sourced.problems
        data.files = sourced.files
        taken = [one for run in sourced.runs if (one := _labelled(run, outcomes, data))]
        data.runs = grouped([run for run in taken if run.steps])
        return data
    passed_over: list[Path] = []
    seen = SeenRuns()
    for path, in_directory in input_files(paths, passed_over):
        try:
            if not path.is_file():
                raise RecordError(str(path), "file", not_a_file(path))
            reader = READERS[detect(path) if format == "auto" else format]
            # each run is taken whole before the next is read: streamed formats read both from one file
            found = [
                labelled
                for run in reader(path, data.problems)
                if not seen.duplicate(run, path, data.problems) and (labelled := _labelled(run, outcomes, data))
            ]
        except NotRuns:
            if not in_directory:
                raise
            passed_over.append(path)
            continue
        except RecordError as exc:
            if not in_directory:
                raise
            data.problems.append(ImportProblem(exc.path, exc.where, exc.problem))
            continue
        finally:
            if done is not None:
                done()
        data.files += 1
        data.runs += [run for run in found if run.steps]
    data.not_runs = len(passed_over)
    if (line := not_runs_problem(", ".join(map(str, paths)), passed_over)) is not None:
        data.problems.append(line)
    data.runs = grouped(data.runs)
    return data


def grouped(runs: list[LabelledRun]) -> list[LabelledRun]:
    """The runs with their groups joined by the grouping rule (module docstring): a run's group becomes the
    smallest key of every group it is connected to through a shared group id or task family."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for run in runs:
        find(run.group)
        if run.family:
            union(run.group, "family:" + run.family)
    return [replace(run, group=find(run.group)) for run in runs]


def _labelled(run: ImportedRun, labels: Labels | None, data: Dataset) -> LabelledRun | None:
    succeeded = labels.outcome_of(run.run_id) if labels is not None else None
    failed = (not succeeded) if succeeded is not None else failed_of(run.outcome)
    if failed is None:
        for _ in run.steps:  # read past it (a streamed run's steps come from the same file)
            pass
        data.unlabelled += 1
        return None
    steps, prompt, tokens = [], [], []
    largest = 0
    for i, step in enumerate(run.steps):
        if i == 0 and not step.thought:
            continue  # a live run's first call with no thought is not scored (the first-call path)
        if step.action is None and step.observation is not None:
            step.observation = None  # a turn that called no tool has no tool result (module docstring)
        steps.append(step.as_scorer_step())
        largest = max(largest, step.input_tokens or step.tokens)
        prompt.append(largest)
        tokens.append(step.tokens)
    return LabelledRun(
        run_id=run.run_id,
        source=run.source,
        # the key the workers scored it under when its traces say (rb.agent.key), else the one its calls give
        agent=run.agent_key or agent_key(run.agent_name, run.model),
        group=run.group_id or run.task_id or run.run_id,
        failed=failed,
        steps=steps,
        prompt_tokens=prompt,
        tokens=tokens,
        family=task_family(run.task_id),
        harness=run.harness or run.agent_name.split(":", 1)[0],
        model=normalise_model(run.model),
        task_keys=task_keys(run.run_id, run.group_id, run.task_id),
    )
