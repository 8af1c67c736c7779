"""The Claude Agent SDK adapter (``pip install rb-otel[claude-agent]``): ``query()`` streams recorded as runs."""

from rb_otel.integrations.claude_agent.telemetry import claude_agent_telemetry

__all__ = ["claude_agent_telemetry"]
