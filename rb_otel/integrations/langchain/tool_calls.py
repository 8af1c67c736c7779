"""A tool call of a steered LangChain run, as the run-end guard reports it: its ``execute_tool`` span's end."""

from __future__ import annotations

import logging
from typing import Any

from langchain_core.messages import ToolMessage
from langgraph.errors import GraphBubbleUp

from rb_otel.integrations.langchain._messages import message_text
from rb_otel.telemetry import ToolInvocation

__all__ = ["OpenTool"]

_log = logging.getLogger("rb_otel.integrations.langchain")


class OpenTool:
    """The handle the guard keeps for one of our tools in flight."""

    __slots__ = ("tool",)

    def __init__(self, tool: ToolInvocation) -> None:
        self.tool = tool

    def end(self, output: Any, error: BaseException | None, *, end_time: float | None = None) -> None:
        """End the span (at ``end_time``, seconds, for a tool recorded after it ran): the exception the tool raised
        (an interrupt is not one) or the error text it returned; a failure to record it is logged and the span
        ended anyway."""
        tool = self.tool
        try:
            if isinstance(error, GraphBubbleUp):
                tool.interrupt()
            elif error is not None:
                tool.fail(error, end_time=end_time)
            elif isinstance(output, ToolMessage):
                failed = (message_text(output) or "tool error") if output.status == "error" else None
                tool.stop(output.content, error=failed, end_time=end_time)
            else:
                tool.stop(end_time=end_time)
        except Exception:
            tool.interrupt()  # ends the span if it is still open (a no-op otherwise)
            _log.warning("recording the tool call failed; continuing", exc_info=True)
