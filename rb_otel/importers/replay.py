"""Replay imported runs as the same spans and metrics a live run produces (optionally re-steered).

Trace and span ids are derived from the input (a digest of the file and the run id), so importing the same file
twice yields the same ids and a backend deduplicates or overwrites rather than doubling the data.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.backends.pilot import PilotScorer
from rb_otel.files import not_a_file
from rb_otel.importers.detect import FORMATS, NotRuns, detect, directory_files
from rb_otel.importers.formats import (
    agy,
    claude_code,
    io_harness,
    mini_swe_agent,
    mini_swe_agent_2,
    openai_messages,
    openhands,
    otlp_json,
    steplog,
    swe_agent,
    tau2_bench,
    tau2_indexed,
    tau_bench,
)
from rb_otel.importers.labels import Labels, load_labels
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportProblem, RecordError, ReplayResult
from rb_otel.importers.reading import SeenRuns, not_runs_problem
from rb_otel.steering.agent_keys import agent_key
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.injections import create_injections
from rb_otel.steering.pilot.kinds import infer_agent_kind
from rb_otel.steering.scoring import HeuristicScorer, Scorer, resolve_scorer, score_step
from rb_otel.steering.scoring.protocol import KindAwareScorer
from rb_otel.steering.session import SteeringSession
from rb_otel.steering.state import TraceStateManager
from rb_otel.telemetry import ChatResponse, MeterProvider, RunInfo, RunRecorder, Telemetry, TracerProvider
from rb_otel.telemetry import names as n
from rb_otel.telemetry.derived_ids import DerivedIds
from rb_otel.types import FSMState, MonitorEvaluation, RunFields, StepLogEntry

__all__ = ["READERS", "file_digest", "replay", "replay_runs"]

READERS = {
    "steplog": steplog.read,
    "io_harness": io_harness.read,
    "agy": agy.read,
    "swe_agent": swe_agent.read,
    "openhands": openhands.read,
    "openai_messages": openai_messages.read,
    "tau_bench": tau_bench.read,
    "tau2_bench": tau2_bench.read,
    "tau2_indexed": tau2_indexed.read,
    "mini_swe_agent": mini_swe_agent.read,
    "mini_swe_agent_2": mini_swe_agent_2.read,
    "otlp_json": otlp_json.read,
    "claude_code": claude_code.read,
}
_STATES = {state.value: state for state in FSMState}
#: Synthetic timing: each step lasts this long when the source recorded no times.
SYNTHETIC_STEP_SECONDS = 1.0


def file_digest(path: Path) -> bytes:
    """The digest of ``path``'s content that seeds the derived ids of the runs replayed from it (with each run's
    id): the same file replays with the same ids, and ``rb-otel label`` derives them without replaying."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.digest()


def replay(
    path: str | Path,
    *,
    format: str = "auto",
    rescore: bool = False,
    scorer: str | Scorer | Callable[..., float] | None = None,
    labels: str | Path | Labels | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    keep_steps: bool = True,
    logger_provider: Any = None,
    seen: SeenRuns | None = None,
    progress: Callable[[Path, int], None] | None = None,
) -> list[ReplayResult]:
    """Import ``path`` (a file, or a directory: every file under it, subfolders included, in path order) and replay
    every run in it; one :class:`ReplayResult` per top-level run. In a directory, files that hold no runs
    (evaluation reports, predictions, configs, documentation: ``detect.holds_no_runs``, or JSON of no format) are
    passed over and counted in one problem line; a run whose ``unique_id`` was already read (a tau2 simulation
    saved in two files) is a duplicate, listed and not replayed. ``seen`` carries the runs already read across
    several calls (one read of several paths). ``progress(file, runs so far)`` is called after each file.

    ``scorer`` (``"heuristic"``, ``"pilot"``, a :class:`~rb_otel.steering.scoring.Scorer` or a callable)
    implies ``rescore``; one scorer serves every run of the call, so the pilot's per-agent baselines learn from
    the earlier runs of each agent in file order (pass the same ``Scorer`` object to several calls to go on
    learning). ``labels`` (a path or :class:`~rb_otel.importers.labels.Labels`) sets each matching run's
    outcome: ``success`` or ``failure: unresolved``.

    Raises :class:`RecordError` (a ``ValueError`` naming the file, place and problem) when the file cannot be
    read at all; a bad record inside a readable file, or an unreadable file inside a directory, is skipped and
    listed in ``ReplayResult.problems``. ``keep_steps=False`` keeps memory bounded on huge inputs (the results
    then carry no step lists). ``logger_provider`` receives the log-based GenAI events (fired monitors).
    """
    source = Path(path)
    passed_over: list[Path] = []
    if source.is_dir():
        files = directory_files(source, passed_over)
    elif source.is_file():
        files = [source]
    else:
        raise RecordError(str(source), "file", not_a_file(source))
    if format != "auto" and format not in READERS:
        raise RecordError(str(source), "format", f"unknown format {format!r}; choose auto or one of {FORMATS}")
    outcomes = load_labels(labels) if isinstance(labels, str | Path) else labels
    resolved = _resolved(scorer, rescore)
    telemetry = Telemetry(
        tracer_provider=tracer_provider, meter_provider=meter_provider, logger_provider=logger_provider
    )
    ids = telemetry.derived_ids()
    problems: list[ImportProblem] = []
    results: list[ReplayResult] = []
    seen = SeenRuns() if seen is None else seen
    for file in files:
        try:
            fmt = detect(file) if format == "auto" else format
            runs = READERS[fmt](file, problems)
            replayer = _Replayer(telemetry, ids, file_digest(file), scorer=resolved, keep_steps=keep_steps)
            for run in runs:
                if seen.duplicate(run, file, problems):
                    continue
                if outcomes is not None:
                    _apply_label(run, outcomes)
                results.append(replayer.run(run))
        except NotRuns:
            if not source.is_dir():
                raise
            passed_over.append(file)
        except RecordError as exc:
            if len(files) == 1:
                raise
            problems.append(ImportProblem(exc.path, exc.where, exc.problem))
        if progress is not None:
            progress(file, len(results))
    if (line := not_runs_problem(str(source), passed_over)) is not None:
        problems.append(line)
    for result in results:
        result.problems = problems
    return results


def replay_runs(
    runs: Iterable[ImportedRun],
    *,
    identity: str,
    scorer: str | Scorer | Callable[..., float] | None = None,
    labels: Labels | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    keep_steps: bool = True,
) -> list[ReplayResult]:
    """Replay runs already read (a trace store's, :func:`rb_otel.analysis.imported.source_runs`) as :func:`replay`
    replays a file's; ``identity`` (the source as messages show it) takes the file digest's place in the derived
    ids, so the same runs of the same source replay with the same ids."""
    telemetry = Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    digest = hashlib.sha256(identity.encode()).digest()
    replayer = _Replayer(telemetry, telemetry.derived_ids(), digest, scorer=_resolved(scorer, False),
                         keep_steps=keep_steps)  # fmt: skip
    results = []
    for run in runs:
        if labels is not None:
            _apply_label(run, labels)
        results.append(replayer.run(run))
    return results


def _resolved(scorer: str | Scorer | Callable[..., float] | None, rescore: bool) -> Scorer | None:
    # Named scorers learn their baselines here only: a replay never writes a configured store's baselines.
    if scorer == "pilot":
        return PilotScorer(baselines="memory://")
    return resolve_scorer(scorer) if scorer is not None or rescore else None


def _apply_label(run: ImportedRun, labels: Labels) -> None:
    succeeded = labels.outcome_of(run.run_id)
    if succeeded is not None:
        run.outcome = "success" if succeeded else "failure: unresolved"


@dataclass(slots=True)
class _RunTally:
    """What a replayed run's result reports, accumulated step by step."""

    keep_steps: bool
    count: int = 0
    chars: int = 0
    max_state: FSMState = FSMState.INIT
    max_composite: float = 0.0
    entered: dict[str, int] = field(default_factory=dict)
    kept: list[StepLogEntry] = field(default_factory=list)
    monitor_scores: list[dict[str, float]] = field(default_factory=list)
    prefix_chars: list[int] = field(default_factory=list)
    prefix_prompt: list[int] = field(default_factory=list)

    def add(self, step: ImportedStep, entry: StepLogEntry, evaluation: MonitorEvaluation | None) -> None:
        self.count += 1
        self.chars += len(step.thought) + len(step.action_input or "")
        if self.keep_steps:
            largest = self.prefix_prompt[-1] if self.prefix_prompt else 0
            self.prefix_chars.append(self.chars)
            self.prefix_prompt.append(max(largest, step.input_tokens or step.tokens))
        if entry.fsm_state in ("SLOW", "SKIP") and entry.fsm_state not in self.entered:
            self.entered[entry.fsm_state] = entry.step
        state = _STATES.get(entry.fsm_state)
        if state is not None and state.severity > self.max_state.severity:
            self.max_state = state
        if evaluation is not None and evaluation.composite > self.max_composite:
            self.max_composite = evaluation.composite
        if self.keep_steps:
            self.kept.append(entry)
            self.monitor_scores.append(dict(evaluation.scores) if evaluation is not None else {})


def run_kind(run: ImportedRun) -> str:
    """A recorded run's kind of agent, by the rule a live run's is inferred by
    (:func:`~rb_otel.steering.pilot.kinds.infer_agent_kind`), from the tools its steps called; ``""`` for a run
    whose steps are streamed (not known before they are read)."""
    if not isinstance(run.steps, list):
        return ""
    return infer_agent_kind(t.name for step in run.steps for t in step.tools if t.name)


def _run_info(run: ImportedRun, scorer: Scorer | None, kind: str) -> RunInfo:
    by_kind = isinstance(scorer, KindAwareScorer) and scorer.chooses_by_kind
    name = "" if scorer is None else scorer.name_for(kind) if isinstance(scorer, KindAwareScorer) else scorer.name
    fields = RunFields(
        agent_name=run.agent_name,
        framework=str(run.attributes.get(n.RB_FRAMEWORK, run.source)),
        task=run.task,
        model=run.model,
    )
    metadata = {
        k.removeprefix(n.RB_METADATA_PREFIX): v for k, v in run.attributes.items() if k.startswith(n.RB_METADATA_PREFIX)
    }
    if run.harness:
        metadata.setdefault("harness", run.harness)
    return RunInfo(
        run_id=run.run_id,
        fields=fields,
        metadata=metadata,
        source=run.source,
        synthetic_timing=run.synthetic_timing,
        scorer=name,
        agent_kind=kind if by_kind else "",
    )


class _Replayer:
    def __init__(
        self, telemetry: Telemetry, ids: DerivedIds, digest: bytes, *, scorer: Scorer | None, keep_steps: bool
    ):
        self.telemetry = telemetry
        self.ids = ids
        self.digest = digest
        self.scorer = scorer
        self.keep_steps = keep_steps

    def run(self, run: ImportedRun, *, parent: RunRecorder | None = None) -> ReplayResult:
        with self.ids.seeded(self.digest + run.run_id.encode()):
            return self._run(run, parent)

    def _run(self, run: ImportedRun, parent: RunRecorder | None) -> ReplayResult:
        kind = run_kind(run)
        info = _run_info(run, self.scorer, kind)
        recorder = self.telemetry.run(info, parent=parent, new_trace=parent is None)
        steps = iter(run.steps)
        first = next(steps, None)
        base = run.start if run.start is not None else (first.timestamp if first and first.timestamp else time.time())
        recorder.run_start(run.run_id, {}, start_time=base)
        recorder.set_run_attributes({k: v for k, v in run.attributes.items() if not k.startswith(n.RB_METADATA_PREFIX)})
        session = self._session(run, kind) if self.scorer is not None else None
        tally = _RunTally(self.keep_steps)
        clock = base
        for step in itertools.chain([first] if first else [], steps):
            entry, clock, evaluation = self._step(recorder, run, step, session, clock)
            tally.add(step, entry, evaluation)
        children = [self.run(child, parent=recorder) for _, child in run.children]
        for name, attributes in run.events:
            recorder.add_run_event(name, attributes)
        risk = None
        earlier = getattr(getattr(session, "run_scorer", None), "baseline", None)
        if session is not None:
            risk = session.risk
            session.finish(outcome_status=run.outcome)  # the scorer folds the run into its baseline
        end = run.end if run.end is not None and run.end >= clock else clock
        recorder.run_finish(run.run_id, run.outcome, risk=risk, end_time=end)
        return ReplayResult(
            run_id=run.run_id,
            source=run.source,
            step_count=tally.count,
            steps=tally.kept,
            outcome=run.outcome,
            trace_id=recorder.trace_id,
            entered=tally.entered,
            children=children,
            summary=run.summary,
            agent_name=run.agent_name,
            harness=run.harness,
            task_id=run.task_id,
            group_id=run.group_id or run.task_id or run.run_id,
            model=run.model,
            risk=risk,
            max_state=tally.max_state.value if session is not None else "",
            monitor_scores=tally.monitor_scores,
            max_composite=tally.max_composite,
            chars=tally.chars,
            prefix_chars=tally.prefix_chars,
            prefix_prompt_tokens=tally.prefix_prompt,
            agent_key=agent_key(run.agent_name, run.model) if session is not None else "",
            earlier_runs=earlier.runs if earlier is not None else None,
            scorer=info.scorer,
        )

    def _session(self, run: ImportedRun, kind: str) -> SteeringSession:
        pilot = isinstance(self.scorer, PilotScorer)
        return SteeringSession(
            score_fn=score_step,
            fsm=None if pilot else DifficultyFSM(),  # the pilot's per-run preset, relative to the agent
            state_manager=TraceStateManager(run.run_id),
            injections=create_injections(e_traces_enabled=False),
            run_id=run.run_id,
            run_metadata={"task": run.task, "task_id": run.task_id},
            # The heuristic keeps its documented text path (score_fn), exactly as a live default run.
            scorer=None if isinstance(self.scorer, HeuristicScorer) else self.scorer,
            agent=agent_key(run.agent_name, run.model),
            agent_kind=kind,
        )

    def _step(
        self,
        recorder: RunRecorder,
        run: ImportedRun,
        step: ImportedStep,
        session: SteeringSession | None,
        clock: float,
    ) -> tuple[StepLogEntry, float, MonitorEvaluation | None]:
        start = step.timestamp if step.timestamp is not None else clock
        duration = (
            step.duration_s
            if step.duration_s is not None
            else (SYNTHETIC_STEP_SECONDS if run.synthetic_timing else 0.0)
        )
        evaluation = None
        if session is not None:
            entry, evaluation = _rescored(session, step, duration)
            entry.timestamp = start
        elif step.entry is not None:
            entry = step.entry
            if step.timestamp is None:
                entry.timestamp = start
        else:
            entry = _recorded(step, start, duration)
        end = start + duration
        recorder.step(
            run.run_id,
            entry,
            composite=evaluation.composite if evaluation is not None else None,
            monitor_scores=evaluation.scores if evaluation is not None and entry.monitors_fired else None,
            end_time=end,
            response=_response(step),
            extra=_chat_extra(step),
            error_type=step.error_type,
            events=step.events,
        )
        for tool in step.tools:
            call = recorder.start_tool(
                step=entry.step,
                name=tool.name,
                call_id=tool.call_id,
                arguments=tool.arguments,
                start_time=end,
                current=False,
            )
            call.stop(tool.result, error=tool.error, end_time=end)
        return entry, max(end, clock), evaluation


def _rescored(
    session: SteeringSession, step: ImportedStep, duration: float
) -> tuple[StepLogEntry, MonitorEvaluation | None]:
    """The step steered again by ``session``, as a live run would have been."""
    # an empty first thought takes the first-call path (unscored, INIT), as a live run's first call does
    thought = step.thought or (None if session.steps_begun == 0 else "")
    decision = session.begin_step(
        thought=thought,
        action=step.action,
        action_input=step.action_input,
        observation=step.observation,
        error=step.failed,
        tokens=step.tokens,
    )
    tool_names = [t.name for t in step.tools]
    entry = session.end_step(decision, tokens=step.tokens, tool_calls=tool_names, latency_ms=duration * 1000)
    return entry, decision.evaluation


def _recorded(step: ImportedStep, start: float, duration: float) -> StepLogEntry:
    """The entry of a step whose record holds no step log entry of its own."""
    return StepLogEntry(
        step=step.index,
        fsm_state="",
        thought_preview=step.thought[:120],
        timestamp=start,
        tool_calls=[t.name for t in step.tools],
        tokens=step.tokens,
        latency_ms=duration * 1000,
    )


def _chat_extra(step: ImportedStep) -> dict[str, Any]:
    extra: dict[str, Any] = dict(step.attributes)
    if step.model:
        extra[n.GEN_AI_REQUEST_MODEL] = step.model
    if step.provider:
        extra[n.GEN_AI_PROVIDER_NAME] = step.provider
    return extra


def _response(step: ImportedStep) -> ChatResponse:
    return ChatResponse(
        response_model=step.model,
        finish_reasons=[step.finish_reason] if step.finish_reason else [],
        input_tokens=step.input_tokens,
        output_tokens=step.output_tokens,
        cache_read_tokens=step.cache_read_tokens,
        cache_creation_tokens=step.cache_creation_tokens,
        reasoning_tokens=step.reasoning_tokens,
    )
