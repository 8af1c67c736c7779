"""The Anthropic Messages API adapter (``pip install rb-otel[anthropic]``): a steered, recorded tool loop."""

from rb_otel.integrations.anthropic.loop import Dispatch, arun_messages_agent_loop, run_messages_agent_loop

__all__ = ["Dispatch", "arun_messages_agent_loop", "run_messages_agent_loop"]
