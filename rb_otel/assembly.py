"""``ReasonBlocksConfig`` and ``build_middleware`` (spec 1.9): the alternate assembly path, one config to a list.

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
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import AgentMiddleware

from rb_otel.integrations.langchain.general_monitor import GeneralMonitorMiddleware
from rb_otel.integrations.langchain.state import StatefulReasonBlocksMiddleware
from rb_otel.integrations.langchain.token_saving import TokenSavingMiddleware
from rb_otel.integrations.steered_runs import RunFactory
from rb_otel.reasonblocks import ReasonBlocks
from rb_otel.steering.checks import check_int
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.injections import BaseInjection, E1Injection, E2Injection, E3Injection, create_injections
from rb_otel.steering.monitors.profiles import resolve_weights
from rb_otel.steering.scorers import text_scorer_name
from rb_otel.steering.session import SteeringSession, StepEmitter
from rb_otel.steering.state import TraceStateManager
from rb_otel.steering.token_saving import WordClassifier
from rb_otel.types import FSMState, RunFields

__all__ = ["ReasonBlocksConfig", "build_middleware"]


@dataclass(frozen=True, slots=True)
class ReasonBlocksConfig:
    """Every switch of the alternate assembly path, with the spec's defaults (spec 1.9)."""

    enable_e1: bool = True
    enable_e2: bool = True
    enable_e3: bool = True
    enable_monitor_steering: bool = True
    enable_general_monitor: bool = False
    enable_token_saving: bool = True
    enable_distillation: bool = True  # reserved by the spec; does nothing
    e1_top_k: int = 1
    e2_top_k: int = 2
    e3_max_patterns: int = 32
    e1_sim_gate_doc: float = 0.80  # documentation only (enforced by rb-api)
    e2_sim_gate_doc: float = 0.70  # documentation only
    monitor_task_profile: str = "coding"
    monitor_weights: Mapping[str, float] | None = None
    gm_max_tool_calls: int = 30
    gm_cooldown: int = 8
    ts_compress_threshold_chars: int = 1800
    ts_head_keep_chars: int = 900
    ts_tail_keep_chars: int = 700
    ts_keep_recent_tool_messages: int = 2
    ts_enable_compression: bool = True
    ts_enable_early_exit: bool = True
    ts_early_exit_min_call_index: int = 40
    ts_signals_fn: Callable[[list[dict[str, Any]]], Mapping[str, float]] | None = None
    ts_enable_perplexity_compression: bool = False
    ts_perplexity_classifier: WordClassifier | None = None
    ts_perplexity_recent_cutoff: int = 3
    ts_perplexity_mid_cutoff: int = 10
    ts_perplexity_keep_ratio_mid: float = 0.55
    ts_perplexity_keep_ratio_old: float = 0.30
    ts_perplexity_window_words: int = 50

    def __post_init__(self) -> None:
        for name in ("e1_top_k", "e2_top_k", "e3_max_patterns"):
            check_int(name, getattr(self, name), low=1)
        resolve_weights(self.monitor_task_profile, self.monitor_weights)  # unknown profile or bad weight: now

    @property
    def steering(self) -> bool:
        return self.enable_e1 or self.enable_e2 or self.enable_e3 or self.enable_monitor_steering

    def injections(self, api: ReasonBlocks) -> list[BaseInjection]:
        """This config's pipeline for one run: monitor steering and the enabled E-trace tiers."""
        pipeline = create_injections(
            api.monitor_backend,
            api.pattern_store,
            e_traces_enabled=True,
            monitors_enabled=self.enable_monitor_steering,
            e1_top_k=self.e1_top_k,
            e2_top_k=self.e2_top_k,
            e3_max_patterns=self.e3_max_patterns,
        )
        enabled: dict[type[BaseInjection], bool] = {
            E1Injection: self.enable_e1,
            E2Injection: self.enable_e2,
            E3Injection: self.enable_e3,
        }
        return [i for i in pipeline if enabled.get(type(i), True)]


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
    """The middleware ``config`` asks for, in the documented order (see the module docstring)."""
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
    if config.enable_general_monitor:
        middleware.append(GeneralMonitorMiddleware(config.gm_max_tool_calls, cooldown=config.gm_cooldown))
    if config.enable_token_saving:
        middleware.append(
            TokenSavingMiddleware(
                compress_threshold_chars=config.ts_compress_threshold_chars,
                head_keep_chars=config.ts_head_keep_chars,
                tail_keep_chars=config.ts_tail_keep_chars,
                keep_recent_tool_messages=config.ts_keep_recent_tool_messages,
                enable_compression=config.ts_enable_compression,
                enable_early_exit=config.ts_enable_early_exit,
                early_exit_min_call_index=config.ts_early_exit_min_call_index,
                signals_fn=config.ts_signals_fn,
                enable_perplexity_compression=config.ts_enable_perplexity_compression,
                perplexity_classifier=config.ts_perplexity_classifier,
                perplexity_recent_cutoff=config.ts_perplexity_recent_cutoff,
                perplexity_mid_cutoff=config.ts_perplexity_mid_cutoff,
                perplexity_keep_ratio_mid=config.ts_perplexity_keep_ratio_mid,
                perplexity_keep_ratio_old=config.ts_perplexity_keep_ratio_old,
                perplexity_window_words=config.ts_perplexity_window_words,
            )
        )
    return middleware
