"""``ReasonBlocks``: the entry point. Holds the configuration shared by every run and builds middleware.

Everything is validated here, at the API boundary, so a bad threshold or routing table fails on construction
with a clear message instead of deep inside an agent run.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.pilot import PilotScorer
from rb_otel.backends.rb_api import connect
from rb_otel.facade.adapters import AdapterMethods
from rb_otel.facade.arguments import (
    DEFAULT_STEERING_BUDGET_S,
    RUN_CHECKS,
    check_arguments,
    resolve_legacy,
    warn_ignored,
)
from rb_otel.facade.scoring import resolve_scoring
from rb_otel.integrations.steered_runs import RunFactory
from rb_otel.steering.agent_keys import agent_key
from rb_otel.steering.emitters import FanOutEmitter
from rb_otel.steering.etraces.store import PatternStore
from rb_otel.steering.injections import BaseInjection, create_injections
from rb_otel.steering.monitors.local import MonitorBackend
from rb_otel.steering.outcome import checked_outcome, checked_run_id
from rb_otel.steering.pilot.kinds import checked_kind, tool_names
from rb_otel.steering.routing import parse_model_routing, routing_ids
from rb_otel.steering.scoring import Scorer
from rb_otel.steering.scoring import score_step as _score_step
from rb_otel.steering.scoring.protocol import KindAwareScorer
from rb_otel.steering.session import SteeringSession, StepEmitter
from rb_otel.steering.state import TraceStateManager
from rb_otel.telemetry import MeterProvider, Telemetry, TracerProvider
from rb_otel.telemetry.batch import DEFAULT_BATCH_WINDOW
from rb_otel.telemetry.outcomes import RECENT_RUNS, emit_outcome, parse_traceparent
from rb_otel.types import ExperimentArm, FSMState, RunFields

if TYPE_CHECKING:
    from langchain.agents.middleware import AgentMiddleware

    from rb_otel.config import ReasonBlocksConfig
    from rb_otel.integrations.langchain.middleware import ReasonBlocksMiddleware
    from rb_otel.integrations.langchain.routing import ModelRouter

__all__ = ["ReasonBlocks"]


_log = logging.getLogger("rb_otel")


class ReasonBlocks(AdapterMethods):
    """Steering for LLM agents, exported as OpenTelemetry. One per configuration; it makes every adapter.

    Arguments, by what they configure (all keyword-only but ``api_key``):

    * **rb-api**: ``api_key`` (none: everything runs embedded, local monitors and the shipped pattern library;
      nothing is sent anywhere but the OpenTelemetry providers), ``base_url`` (else ``REASONBLOCKS_BASE_URL``),
      ``steering_budget_s`` (the time rb-api calls may take per step before failing open),
      ``export_runs_to_api`` (also send run events to rb-api).
    * **steering**: ``task_profile``, ``fsm_thresholds``, ``model_routing``, ``token_budget``,
      ``e_traces_enabled``, ``monitor_weights``, ``monitor_backend``, ``pattern_store``.
    * **scoring**: ``scorer`` (``"heuristic"``, the default; ``"pilot"``; a ``Scorer``; a ``fn(thought)`` or
      ``fn(step, steps_so_far)``); with the pilot, ``pilot_model`` (a file ``rb-otel train`` wrote; default: the
      pilot of the run's kind of agent), ``agent_kind`` (``"coding"`` or ``"customer_service"``; default: inferred
      per run from the agent's tools, a shell, code-running, file-editing or code-reading tool meaning coding and no
      tools meaning not known, the generic pilot; recorded as ``rb.agent.kind``)
      and ``baselines`` (``sqlite:///path.db``, ``redis://host:port/db``; default ``RB_OTEL_PILOT_BASELINES``, else
      ``RB_OTEL_STORE``, the store ``rb-otel train --watch`` writes learned models to, else memory; ``docs/fleet.md``).
    * **telemetry**: ``tracer_provider``, ``meter_provider``, ``logger_provider`` (else the global ones),
      ``capture_content`` (else ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), ``telemetry_enabled``
      (``False``: nothing is exported, steering is unchanged), ``telemetry_batch_window`` (a run stepping faster
      than this many seconds does its finished spans' and measurements' work in batches; ``0``: at once),
      ``evaluation_events``: where ``gen_ai.evaluation.result`` (and, when content is captured as events,
      ``gen_ai.client.inference.operation.details``) go: ``"logs"`` (log-based events parented to their span,
      the conventions' form), ``"span"`` (span events, the previous release's form) or ``"both"`` (the default for
      this release, so nothing that reads span events breaks; it becomes ``"logs"`` in the next),
      ``completion_hook`` (a GenAI ``CompletionHook`` each model call's messages are handed to, e.g. to upload
      them; default: the one ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK`` names; the ``upload`` extra).

    A wrong type or value is a ``TypeError`` or ``ValueError`` naming the keyword and what it accepts; a
    contradictory or ignored combination is an error or a warning here, never a silent no-op. ReasonBlocks' own
    ``live_streaming_enabled`` (use ``telemetry_enabled``) and ``monitor_names`` (it never did anything) are
    accepted with a ``DeprecationWarning``.
    """

    score_step = staticmethod(_score_step)

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        steering_budget_s: float = DEFAULT_STEERING_BUDGET_S,
        export_runs_to_api: bool = False,
        task_profile: str = "coding",
        fsm_thresholds: Mapping[str, Any] | None = None,
        model_routing: Mapping[Any, Any] | None = None,
        token_budget: int | None = None,
        e_traces_enabled: bool = True,
        monitor_weights: Mapping[str, float] | None = None,
        monitor_backend: MonitorBackend | None = None,
        pattern_store: PatternStore | None = None,
        scorer: str | Scorer | Callable[..., float] | None = None,
        pilot_model: str | Path | None = None,
        baselines: str | Path | BaselineCache | None = None,
        agent_kind: str | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        logger_provider: Any = None,
        capture_content: bool | str | None = None,
        telemetry_enabled: bool = True,
        telemetry_batch_window: float = DEFAULT_BATCH_WINDOW,
        evaluation_events: str = "both",
        completion_hook: Any = None,
        live_streaming_enabled: bool | None = None,
        monitor_names: list[str] | None = None,
    ) -> None:
        check_arguments({name: value for name, value in locals().items() if name != "self"})  # every keyword, first
        telemetry_enabled = resolve_legacy(live_streaming_enabled, telemetry_enabled, monitor_names)
        warn_ignored(
            api_key=api_key,
            base_url=base_url,
            steering_budget_s=steering_budget_s,
            export_runs_to_api=export_runs_to_api,
            telemetry_enabled=telemetry_enabled,
            capture_content=capture_content,
            e_traces_enabled=e_traces_enabled,
            pattern_store=pattern_store,
        )
        self._api_key = api_key
        self.steering_budget_s = steering_budget_s
        self.token_budget = token_budget
        TraceStateManager(token_budget=token_budget)  # validates the budget
        self.e_traces_enabled = bool(e_traces_enabled)
        self.telemetry_enabled = bool(telemetry_enabled)
        self.task_profile = task_profile
        self.monitor_weights = dict(monitor_weights) if monitor_weights else None
        self._connect(base_url, export_runs_to_api, monitor_backend, pattern_store)
        self.agent_kind = checked_kind(agent_kind)
        self._resolve_scoring(scorer, fsm_thresholds, baselines, pilot_model)
        self.telemetry = Telemetry(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
            capture_content=capture_content,
            enabled=self.telemetry_enabled,
            batch_window=telemetry_batch_window,
            evaluation_events=evaluation_events,
            completion_hook=completion_hook,
        )
        if isinstance(self.scorer, PilotScorer):
            if isinstance(self.scorer.baselines, BaselineCache):
                self.scorer.baselines.add_listener(self.telemetry.instruments.baseline_event)
            instruments = self.telemetry.instruments  # the backends tell, telemetry counts (rb.models.loaded)
            self.scorer.add_model_listener(lambda record: instruments.model_loaded(record.agent, record.name))
        self._configure_runs(model_routing)

    def _connect(
        self,
        base_url: str | None,
        export_runs_to_api: bool,
        monitor_backend: MonitorBackend | None,
        pattern_store: PatternStore | None,
    ) -> None:
        """rb-api: remote monitors and patterns, failing open to the embedded ones within the step budget."""
        export = export_runs_to_api and self.telemetry_enabled
        remote = connect(self._api_key, base_url, export, monitor_backend, pattern_store)
        self.client, self.run_exporter, self.base_url = remote.client, remote.run_exporter, remote.base_url
        self.monitor_backend, self.pattern_store = remote.monitor_backend, remote.pattern_store

    def _resolve_scoring(
        self,
        scorer: str | Scorer | Callable[..., float] | None,
        fsm_thresholds: Mapping[str, Any] | None,
        baselines: str | Path | BaselineCache | None,
        pilot_model: str | Path | None,
    ) -> None:
        """The scorer every run shares, its name, the text scorer and the FSM (``facade/scoring.py``)."""
        scoring = resolve_scoring(scorer, fsm_thresholds, baselines, pilot_model, self.agent_kind)
        self.scorer, self.score_fn, self.scorer_name = scoring.scorer, scoring.score_fn, scoring.scorer_name
        self.fsm, self._per_run_fsm = scoring.fsm, scoring.per_run_fsm

    def _configure_runs(self, model_routing: Mapping[Any, Any] | None) -> None:
        self.model_routing: dict[FSMState, Any] = parse_model_routing(model_routing)
        self.runs = RunFactory(
            telemetry=self.telemetry,
            new_session=self.new_session,
            task_profile=self.task_profile,
            scorer_name=self.scorer_name,
            model_routing=self.model_routing,
            routing_ids=routing_ids(self.model_routing),
            agent_kind=self.agent_kind,
            scorer_name_for=self.scorer.name_for if isinstance(self.scorer, KindAwareScorer) else None,
        )
        self._langchain_router: Any = None
        self._forced_runs: RunFactory | None = None
        self._config: ReasonBlocksConfig | None = None  # set by from_config
        if any(not isinstance(v, str) for v in self.model_routing.values()):
            self._langchain_models()  # model objects are LangChain chat models here: checked now, not mid-run

    @property
    def live_streaming_enabled(self) -> bool:
        """The previous release's name of :attr:`telemetry_enabled` (read-only)."""
        return self.telemetry_enabled

    @classmethod
    def from_config(
        cls, config: ReasonBlocksConfig, /, *, agent_name: str = "", **kwargs: Any
    ) -> list[AgentMiddleware[Any, Any, Any]]:
        """The middleware a :class:`~rb_otel.config.ReasonBlocksConfig` asks for (the configuration-file path), in the
        documented order (docs/experiments.md, "ReasonBlocksConfig and build_middleware"): the steering middleware (its
        E-tiers and monitor steering as the config says), the
        general monitor, token saving. ``kwargs`` are this class's (providers, scorer, ...); the config gives the
        task profile and monitor weights."""
        from rb_otel.config import ReasonBlocksConfig

        if not isinstance(config, ReasonBlocksConfig):
            raise TypeError(f"config must be a ReasonBlocksConfig, got {type(config).__name__}")
        if "e_traces_enabled" in kwargs:
            _log.warning(
                "from_config(e_traces_enabled=...) is ignored: the config's enable_e1, enable_e2 and enable_e3 decide"
            )
        kwargs.setdefault("task_profile", config.monitor_task_profile)
        if config.monitor_weights is not None:
            kwargs.setdefault("monitor_weights", config.monitor_weights)
        rb = cls(**kwargs)
        rb._config = config
        steering = [rb.middleware(agent_name=agent_name)] if config.steering else []
        return [*steering, *config.companions()]

    def __repr__(self) -> str:
        # Never show the key.
        key = "set" if self._api_key else "none"
        return f"ReasonBlocks(api_key=<{key}>, task_profile={self.task_profile!r}, fsm={self.fsm!r})"

    def _langchain_models(self) -> ModelRouter:
        """The LangChain chat models of ``model_routing``, built once and shared by every middleware made here."""
        if self._langchain_router is None:
            from rb_otel.integrations.langchain.routing import ModelRouter

            self._langchain_router = ModelRouter(self.model_routing)
        router: ModelRouter = self._langchain_router
        return router

    # -- factories -----------------------------------------------------------------------------------------

    def new_injections(self) -> list[BaseInjection]:
        """A fresh injection pipeline for one run (injections count their own calls)."""
        if self._config is not None:
            return self._config.injections(self)
        return create_injections(self.monitor_backend, self.pattern_store, self.e_traces_enabled)

    def new_session(
        self,
        *,
        run_id: str | None = None,
        emitter: StepEmitter | None = None,
        run_metadata: Mapping[str, Any] | None = None,
        routing_ids: Mapping[FSMState, str] | None = None,
        steer: bool = True,
    ) -> SteeringSession:
        """A ``SteeringSession`` configured like this object's middleware (not exporting unless ``emitter`` does);
        ``routing_ids`` are the model ids it reports for routed states (default: ``model_routing``'s own).
        ``steer=False`` (an experiment's ``off`` arm) scores every step and moves the FSM, but injects nothing
        and routes nowhere."""
        metadata = {"task_profile": self.task_profile, **dict(run_metadata or {})}
        kind = str(metadata.pop("agent_kind", "") or self.agent_kind or "")
        agent = (
            agent_key(str(metadata.get("agent_name") or ""), str(metadata.get("model") or ""))
            if isinstance(self.scorer, PilotScorer)
            else "|".join(str(metadata.get(k) or "") for k in ("agent_name", "model"))
        )
        if self.monitor_weights:
            metadata["monitor_weights"] = self.monitor_weights
        return SteeringSession(
            score_fn=self.score_fn,
            fsm=None if self._per_run_fsm else self.fsm,
            state_manager=TraceStateManager(run_id, token_budget=self.token_budget),
            injections=self.new_injections() if steer else [],
            model_routing=None
            if not steer
            else dict(routing_ids)
            if routing_ids is not None
            else self.runs.routing_ids,
            emitter=self._with_api_events(emitter),
            run_id=run_id,
            run_metadata=metadata,
            step_budget_s=self.steering_budget_s if self.client is not None else None,
            scorer=self.scorer,
            agent=agent,
            agent_kind=kind,
        )

    def _with_api_events(self, emitter: StepEmitter | None) -> StepEmitter | None:
        if self.run_exporter is None:
            return emitter
        api = self.run_exporter.for_run()
        return FanOutEmitter([emitter, api]) if emitter is not None else api

    def session(
        self,
        *,
        run_id: str | None = None,
        agent_name: str = "",
        task: str = "",
        framework: str = "custom",
        model: str = "",
        tools: Iterable[Any] | None = None,
        **metadata: Any,
    ) -> SteeringSession:
        """A ``SteeringSession`` exporting to OpenTelemetry, for agent loops without LangChain. ``tools`` are the
        agent's tools (names, tool objects or their schemas): they say its kind of agent when ``agent_kind`` was
        not given (rb_otel.steering.pilot.kinds); without them the kind is not known and the pilot's generic
        default scores the run."""
        check_arguments({"run_id": run_id, "tools": tools}, RUN_CHECKS)
        fields = RunFields(agent_name=agent_name, task=task, framework=framework, model=model)
        self.runs.watch_agent(agent_name)
        names = tool_names(tools) if tools is not None else None
        return self.runs.open(fields, run_id=run_id, metadata=metadata, tools=names).session

    def middleware(
        self,
        *,
        run_id: str | None = None,
        agent_name: str = "",
        task: str = "",
        framework: str = "langchain",
        model: str = "",
        codebase_id: str = "",
        org_id: str = "default",
        project_id: str = "default",
        metadata: Mapping[str, Any] | None = None,
        step_log_in_state: bool = True,
        on_skip: str = "escalate",
        steer: bool = True,
        _experiment: ExperimentArm | None = None,
    ) -> ReasonBlocksMiddleware:
        """A LangChain ``AgentMiddleware``; put it last in ``create_agent(middleware=[...])``.

        Each run's steps come back in ``invoke``'s result as ``rb_step_log`` (with ``rb_run_id``), and from
        ``mw.step_log_for(run_id)``; the run id is the LangChain run id (``config={"run_id": ...}``) unless
        ``run_id=`` names the first run. ``step_log_in_state=False`` drops the two state fields (and the
        per-step state update that fills them); neither variant adds a graph node. ``on_skip``: what a run that
        reaches SKIP does: ``"escalate"`` (the default: guidance, and the SKIP route of ``model_routing``) or
        ``"stop"`` (the model is not called again; the run ends with a final message ``was_stopped()``
        recognises, and ``rb.outcome`` ``stopped``). ``steer=False`` observes only: every step is scored, the FSM
        moves and the run is recorded as usual, but requests reach the model exactly as they came in (no guidance, no
        routing, no stop), as in an experiment's ``off`` arm.
        """
        from rb_otel.integrations.langchain.middleware import ReasonBlocksMiddleware
        from rb_otel.integrations.langchain.state import StatefulReasonBlocksMiddleware

        check_arguments({"run_id": run_id, "step_log_in_state": step_log_in_state, "steer": steer}, RUN_CHECKS)
        fields = RunFields(
            agent_name=agent_name,
            task=task,
            framework=framework,
            model=model,
            codebase_id=codebase_id,
            org_id=org_id,
            project_id=project_id,
        )
        cls = StatefulReasonBlocksMiddleware if step_log_in_state else ReasonBlocksMiddleware
        runs = self.runs if _experiment is None else self._experiment_runs()
        return cls(
            runs,
            router=self._langchain_models(),
            run_id=run_id,
            fields=fields,
            metadata=metadata,
            experiment=_experiment,
            on_skip=on_skip,
            steer=steer,
        )

    def ab_middleware(
        self,
        experiment_id: str,
        unit_id: str | None = None,
        on_fraction: float = 0.5,
        **middleware_kwargs: Any,
    ) -> ReasonBlocksMiddleware:
        """``middleware(**middleware_kwargs)`` in one arm of A/B experiment ``experiment_id`` (``mw.arm``).

        The arm is ``assign_arm(experiment_id, unit_id, on_fraction)``: the same unit always lands in the same arm.
        ``unit_id`` defaults to the run id (``run_id=``, else a fresh id that then names the first run). ``on``
        steers as usual; ``off`` passes every model request through exactly as it came in (no guidance, no
        routing, no cache marks) while scoring and recording. Telemetry is on in both arms even with
        ``live_streaming_enabled=False``, and every run span carries ``rb.experiment.id`` / ``.arm`` / ``.unit``.
        """
        from rb_otel.ab.assign import assign_arm, check_experiment

        check_experiment(experiment_id, on_fraction)
        run_id = middleware_kwargs.get("run_id")
        unit = unit_id or run_id or str(uuid.uuid4())
        if unit_id is None and run_id is None:
            middleware_kwargs["run_id"] = unit  # the unit is this run: its id names the run too
        arm = assign_arm(experiment_id, unit, on_fraction)
        experiment = ExperimentArm(experiment_id, arm, unit, on_fraction=float(on_fraction))
        return self.middleware(**middleware_kwargs, _experiment=experiment)

    def _experiment_runs(self) -> RunFactory:
        """The run factory of experiment runs: this one, recording even when live streaming is off."""
        telemetry = self.telemetry.always_on()
        if telemetry is self.telemetry:
            return self.runs
        if self._forced_runs is None:
            self._forced_runs = self.runs.with_telemetry(telemetry)
        return self._forced_runs

    def record_outcome(
        self,
        run_id: str,
        outcome: str | bool,
        *,
        score: float | None = None,
        reason: str | None = None,
        traceparent: str | None = None,
    ) -> None:
        """Record run ``run_id``'s outcome, known now: minutes or days after it ended, in this process or another.

        ``outcome`` is ``"success"``, ``"failure"`` or a bool (``True``: success); ``score`` an optional number
        (any scale: your evaluator's), ``reason`` optional free text (recorded only when content capture is on: a
        failure message can quote anything). It becomes a ``gen_ai.evaluation.result`` log event
        (``gen_ai.evaluation.name`` ``rb.run.outcome``, with ``rb.run_id``; docs/telemetry.md, "Outcomes") on this
        object's logger provider, in the trace of the run's ``invoke_agent`` span when it is known: ``traceparent``
        (what :meth:`traceparent` gave for the run where it ran), else a run this process ran (among its last
        4,096), else none: readers join on ``rb.run_id``. ``rb-otel train`` and ``evaluate`` read these events
        where the traces live. With ``telemetry_enabled=False`` nothing is emitted. A bad argument raises
        ``ValueError``/``TypeError`` naming it; an export that fails is logged by the provider, never raised. Call
        :meth:`flush` (or :meth:`close`) before a short-lived process exits."""
        checked = checked_outcome(run_id, outcome, score, reason)
        where = parse_traceparent(traceparent) if traceparent is not None else RECENT_RUNS.get(checked.run_id)
        if emit_outcome(self.telemetry.events.logger, checked, where, content=self.telemetry.content):
            self.telemetry.instruments.outcome_recorded(checked.outcome, where.agent_name if where else "")

    def traceparent(self, run_id: str) -> str | None:
        """The W3C ``traceparent`` of run ``run_id``'s ``invoke_agent`` span (its latest part), when this process
        ran it (among its last 4,096 runs) with telemetry on; keep it beside the run id to parent an outcome
        recorded in another process (:meth:`record_outcome`)."""
        known = RECENT_RUNS.get(checked_run_id(run_id))
        return known.traceparent if known is not None else None

    def close(self, timeout: float = 5.0) -> None:
        """Drain the rb-api run exporter (if any), write the pilot's queued baselines (a shared store's), flush the
        providers and close the HTTP client."""
        if self.run_exporter is not None:
            self.run_exporter.close(timeout)
        if isinstance(self.scorer, PilotScorer) and isinstance(self.scorer.baselines, BaselineCache):
            self.scorer.baselines.flush(timeout)
        self.flush(timeout)
        self.telemetry.shutdown_uploads(timeout)
        if self.client is not None:
            self.client.close()

    def flush(self, timeout: float = 5.0) -> None:
        """Do the finished work runs in flight are batching, then force-flush the providers (when they can)."""
        self.telemetry.flush_providers(timeout)
