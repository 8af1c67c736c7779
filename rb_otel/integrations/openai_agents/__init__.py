"""The OpenAI Agents SDK adapter (``pip install rb-otel[openai-agents]``): a steered ``Model`` and telemetry
``RunHooks``, built by ``rb.openai_model(...)`` and ``rb.openai_hooks(...)``."""

from rb_otel.integrations.openai_agents.hooks import ReasonBlocksRunHooks
from rb_otel.integrations.openai_agents.model import SteeredOpenAIModel

__all__ = ["ReasonBlocksRunHooks", "SteeredOpenAIModel"]
