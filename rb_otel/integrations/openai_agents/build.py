"""Building the OpenAI Agents SDK adapters of one ``ReasonBlocks`` (its ``openai_model`` / ``openai_hooks``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agents.models.interface import Model

from rb_otel.types import RunFields

from .hooks import ReasonBlocksRunHooks
from .model import SteeredOpenAIModel
from .runs import OpenAIRuns

__all__ = ["run_hooks", "steered_model"]

_FRAMEWORK = "openai-agents"


def run_hooks(
    runs: OpenAIRuns, *, agent_name: str, task: str, model: str, metadata: Mapping[str, Any]
) -> ReasonBlocksRunHooks:
    """Telemetry ``RunHooks`` recording the runs of ``runs``' configuration."""
    runs.factory.watch_agent(agent_name)
    fields = RunFields(agent_name=agent_name, task=task, framework=_FRAMEWORK, model=model)
    return ReasonBlocksRunHooks(runs, fields, metadata)


def steered_model(
    runs: OpenAIRuns,
    model: Any,
    *,
    model_factory: Callable[[str], Any] | None,
    agent_name: str,
    task: str,
    metadata: Mapping[str, Any],
) -> SteeredOpenAIModel:
    """``model`` steered on every response; the arguments are checked here, at the boundary."""
    if not isinstance(model, Model):
        raise TypeError(f"openai_model() wraps an agents Model (e.g. OpenAIResponsesModel), got {type(model).__name__}")
    if model_factory is not None and not callable(model_factory):
        raise TypeError("model_factory must be a callable: model id -> agents Model")
    runs.factory.watch_agent(agent_name)
    fields = RunFields(agent_name=agent_name, task=task, framework=_FRAMEWORK, model=getattr(model, "model", "") or "")
    return SteeredOpenAIModel(model, runs, fields, metadata=metadata, model_factory=model_factory)
