"""``ReasonBlocksConfig``: every switch of the configuration-file path (docs/experiments.md, "ReasonBlocksConfig and
build_middleware"), with the documented defaults.

``ReasonBlocks.from_config(config, **kwargs)`` (or ReasonBlocks' ``build_middleware(config, rb, ...)``) turns it into
the middleware list, in the documented order: the steering middleware (when any of ``enable_e1``, ``enable_e2``,
``enable_e3``, ``enable_monitor_steering``), the general monitor (``enable_general_monitor``), token saving
(``enable_token_saving``, always last).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Protocol

from langchain.agents.middleware import AgentMiddleware

from rb_otel.deprecation import deprecated
from rb_otel.facade.arguments import check_monitor_weights
from rb_otel.integrations.langchain.general_monitor import GeneralMonitorMiddleware
from rb_otel.integrations.langchain.token_saving import TokenSavingMiddleware
from rb_otel.steering.checks import check_bool, check_int, check_number, check_str, expected
from rb_otel.steering.etraces.store import PatternStore
from rb_otel.steering.injections import BaseInjection, E1Injection, E2Injection, E3Injection, create_injections
from rb_otel.steering.monitors.local import MonitorBackend
from rb_otel.steering.monitors.profiles import resolve_weights
from rb_otel.steering.token_saving import WordClassifier

__all__ = ["ReasonBlocksConfig"]

#: Fields ReasonBlocks' configuration reserves that do nothing here, with their defaults: setting another value warns.
_INERT = {"enable_distillation": True, "e1_sim_gate_doc": 0.80, "e2_sim_gate_doc": 0.70}

#: The least value of each int field that is not 0 (counts, windows and sizes: 0 is allowed for the others).
_LEAST = {"e1_top_k": 1, "e2_top_k": 1, "e3_max_patterns": 1, "gm_max_tool_calls": 1, "gm_cooldown": 1}
_LEAST |= {"ts_perplexity_window_words": 1}


class Backends(Protocol):
    """What a config's injections need of the ``ReasonBlocks`` they run under."""

    monitor_backend: MonitorBackend | None
    pattern_store: PatternStore | None


@dataclass(frozen=True, slots=True)
class ReasonBlocksConfig:
    """Every switch of the alternate assembly path, with the documented defaults (docs/experiments.md,
    "ReasonBlocksConfig and build_middleware")."""

    enable_e1: bool = True
    enable_e2: bool = True
    enable_e3: bool = True
    enable_monitor_steering: bool = True
    enable_general_monitor: bool = False
    enable_token_saving: bool = True
    enable_distillation: bool = True  # deprecated: reserved by ReasonBlocks' configuration, does nothing
    e1_top_k: int = 1
    e2_top_k: int = 2
    e3_max_patterns: int = 32
    e1_sim_gate_doc: float = 0.80  # deprecated: documentation of rb-api's gate only, does nothing here
    e2_sim_gate_doc: float = 0.70  # deprecated: the same
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
        """Each field checked by its kind, failing with its name and what it accepts (``TypeError`` or
        ``ValueError``): a bool is ``True`` or ``False``, a count an int of at least 0 (see ``_LEAST``), a ratio or
        gate a number in [0, 1]."""
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type == "bool":
                check_bool(field.name, value)
            elif field.type == "int":
                check_int(field.name, value, low=_LEAST.get(field.name, 0))
            elif field.type == "float":
                check_number(field.name, value, low=0.0, high=1.0)
        check_str("monitor_task_profile", self.monitor_task_profile, empty=False)
        check_monitor_weights("monitor_weights", self.monitor_weights)
        try:
            resolve_weights(self.monitor_task_profile)  # an unknown profile: now, with the known ones
        except ValueError as error:
            raise ValueError(f"monitor_task_profile: {error}") from None
        for name in ("ts_signals_fn", "ts_perplexity_classifier"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise expected(name, "a function or None", getattr(self, name))
        changed = [name for name, default in _INERT.items() if getattr(self, name) != default]
        if changed:
            deprecated(
                f"ReasonBlocksConfig({', '.join(changed)}=...)",
                because="does nothing (reserved by ReasonBlocks' configuration)",
                advice="remove it",
            )

    @property
    def steering(self) -> bool:
        return self.enable_e1 or self.enable_e2 or self.enable_e3 or self.enable_monitor_steering

    def injections(self, api: Backends) -> list[BaseInjection]:
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

    def companions(self) -> list[AgentMiddleware[Any, Any, Any]]:
        """The companion middleware this config enables, in the documented order (general monitor, token saving)."""
        config = self
        middleware: list[AgentMiddleware[Any, Any, Any]] = []
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
