"""``ReasonBlocksConfig`` and ``build_middleware`` (docs/experiments.md, "ReasonBlocksConfig and build_middleware"):
the alternate assembly path, one config to a list.

``build_middleware(config, api, score_fn=..., fsm=..., state_manager=...)`` returns, in this order:

1. ``ReasonBlocksMiddleware``, if any of ``enable_e1``, ``enable_e2``, ``enable_e3``, ``enable_monitor_steering``
   (then ``score_fn``, ``fsm`` and ``state_manager`` are required: ``ValueError`` otherwise);
2. ``GeneralMonitorMiddleware``, if ``enable_general_monitor``;
3. ``TokenSavingMiddleware`` (always last), if ``enable_token_saving``.

It shares no state with ``rb.middleware()``: its own run factory, injection pipeline and FSM. ``api`` is the
``ReasonBlocks`` whose telemetry providers and backends it uses (``None``: embedded, global providers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from rb_otel.config import ReasonBlocksConfig
from rb_otel.deprecation import deprecated
from rb_otel.facade.reasonblocks import ReasonBlocks
from rb_otel.integrations.langchain.state import StatefulReasonBlocksMiddleware
from rb_otel.integrations.steered_runs import RunFactory
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.scoring import text_scorer_name
from rb_otel.steering.session import SteeringSession, StepEmitter
from rb_otel.steering.state import TraceStateManager
from rb_otel.types import FSMState, RunFields

__all__ = ["ReasonBlocksConfig", "build_middleware"]


def _session_builder(
    config: ReasonBlocksConfig,
    api: ReasonBlocks,
    *,
    score_fn: Callable[[str], float],
    fsm: DifficultyFSM,
    state_manager: TraceStateManager,
) -> Callable[..., SteeringSession]:
    """The factory's ``new_session``: the given state manager serves the first run, later runs get fresh ones."""
    managers = [state_manager]
    budget = state_manager.state.token_budget

    def new_session(
        *,
        run_id: str | None = None,
        emitter: StepEmitter | None = None,
        run_metadata: Mapping[str, Any] | None = None,
        routing_ids: Mapping[FSMState, str] | None = None,
        steer: bool = True,
    ) -> SteeringSession:
        manager = managers.pop() if managers else TraceStateManager(run_id, token_budget=budget)
        metadata = {"task_profile": config.monitor_task_profile, **dict(run_metadata or {})}
        if config.monitor_weights:
            metadata["monitor_weights"] = dict(config.monitor_weights)
        return SteeringSession(
            score_fn=score_fn,
            fsm=fsm,
            state_manager=manager,
            injections=config.injections(api) if steer else [],
            model_routing=dict(routing_ids or {}) if steer else None,
            emitter=emitter,
            run_id=run_id,
            run_metadata=metadata,
        )

    return new_session


def build_middleware(
    config: ReasonBlocksConfig,
    api: ReasonBlocks | None = None,
    *,
    score_fn: Callable[[str], float] | None = None,
    fsm: DifficultyFSM | None = None,
    state_manager: TraceStateManager | None = None,
    run_id: str | None = None,
    run_metadata: Mapping[str, Any] | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The middleware ``config`` asks for, in the documented order (see the module docstring). Deprecated: one
    way builds the middleware, ``ReasonBlocks.from_config(config, ...)`` (this path's sessions had no scorer, agent
    key, step budget or rb-api events of their own)."""
    deprecated("rb_otel.build_middleware()", instead="ReasonBlocks.from_config(config, ...)")
    if not isinstance(config, ReasonBlocksConfig):
        raise TypeError(f"config must be a ReasonBlocksConfig, got {type(config).__name__}")
    api = api if api is not None else ReasonBlocks(task_profile=config.monitor_task_profile)
    middleware: list[AgentMiddleware[Any, Any, Any]] = []
    if config.steering:
        missing = [n for n, v in (("score_fn", score_fn), ("fsm", fsm), ("state_manager", state_manager)) if v is None]
        if missing or score_fn is None or fsm is None or state_manager is None:
            raise ValueError(f"build_middleware: steering is enabled, so {', '.join(missing)} must be given")
        runs = RunFactory(
            telemetry=api.telemetry,
            new_session=_session_builder(config, api, score_fn=score_fn, fsm=fsm, state_manager=state_manager),
            task_profile=config.monitor_task_profile,
            scorer_name=text_scorer_name(score_fn),
            model_routing=api.model_routing,
            routing_ids=api.runs.routing_ids,
        )
        meta = dict(run_metadata or {})
        fields = RunFields(**{"framework": "langchain", **{k: str(meta.pop(k)) for k in RunFields.NAMES if k in meta}})
        middleware.append(StatefulReasonBlocksMiddleware(runs, run_id=run_id, fields=fields, metadata=meta))
    middleware += config.companions()
    return middleware
