"""The demo's A/B experiment: a few dozen scripted runs split into arms, then the report from their traces.

The model is scripted, and says so: it loops on the struggling scenario's reasoning until its system message
carries ``[REASONBLOCKS]`` guidance, then answers two calls later. The on arm also runs ``TokenSavingMiddleware``
(with thresholds small enough for the demo's short tool outputs), as docs/experiments.md says: companions go in the on
arm only. So the experiment shows the pipeline end to end (assignment,
the off arm's passthrough, the telemetry, the report); the effect size is the script's, not a measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult
from pydantic import PrivateAttr

from rb_otel.ab.experiment_report import report
from rb_otel.ab.table import format_report
from rb_otel.demo.scenarios import GAVE_UP, SCENARIOS, demo_tools
from rb_otel.facade.reasonblocks import ReasonBlocks
from rb_otel.integrations.langchain.token_saving import TokenSavingMiddleware
from rb_otel.testing import ScriptedChatModel

__all__ = ["EXPERIMENT_ID", "GuidanceTakingModel", "run_experiment"]

EXPERIMENT_ID = "demo-experiment"
_ANSWER = AIMessage("Done: the timeout handling in src/auth.py is fixed.")
_GAVE_UP = AIMessage("I could not find the cause; giving up.")


class GuidanceTakingModel(ScriptedChatModel):
    """A scripted model that follows its script until it is sent guidance, and then answers on its next call."""

    _guided_at: int | None = PrivateAttr(default=None)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        system = next((m for m in messages if isinstance(m, SystemMessage)), None)
        if self._guided_at is None and system is not None and "[REASONBLOCKS]" in system.text:
            calls = sum(isinstance(m, AIMessage) for m in messages)
            self._guided_at = calls
            self.script = [*self.script[: calls + 2], _ANSWER]
        return super()._generate(messages, stop, run_manager, **kwargs)


def run_experiment(rb: ReasonBlocks, traces: Path | None, *, units: int, say: Callable[[str], None]) -> None:
    """Run ``units`` users through ``EXPERIMENT_ID`` (half in each arm) and print the report read back from
    ``traces`` (the OTLP/JSON file holding the spans the demo exported so far; ``None`` when they do not go to a
    file, over OTLP say: no report)."""
    scenario = SCENARIOS["struggling"]()
    say(f"running experiment {EXPERIMENT_ID}: {units} users, on_fraction 0.5 ...")
    for i in range(units):
        mw = rb.ab_middleware(EXPERIMENT_ID, f"user-{i}", agent_name="demo-experiment", task=scenario.task)
        gives_up = i % 3 == 0  # a third of the users' tasks defeat the unguided agent
        script = [*scenario.script[:-1], _GAVE_UP] if gives_up else scenario.script
        model = GuidanceTakingModel(script=script, model_name="agent-1")
        companions = [
            TokenSavingMiddleware(
                compress_threshold_chars=40, head_keep_chars=20, tail_keep_chars=10, keep_recent_tool_messages=1
            )
        ]
        agent = create_agent(model, demo_tools(), middleware=[mw, *(companions if mw.arm == "on" else [])])
        with mw:
            out = agent.invoke({"messages": [HumanMessage(scenario.task)]}, {"recursion_limit": 200})
            if out["messages"][-1].content == _GAVE_UP.content:
                mw.mark_failure(GAVE_UP)
    rb.flush()
    if traces is None:
        say("experiment runs exported, not to a file; run `rb-otel ab-report` on the Collector's file export")
        return
    say(format_report(report([traces], EXPERIMENT_ID)))
