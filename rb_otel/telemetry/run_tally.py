"""What a run adds up to, written on its ``invoke_agent`` span when it ends (``rb.steps``, ``rb.max_state``, ...)."""

from __future__ import annotations

from dataclasses import dataclass

from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import Attributes, ChatResponse
from rb_otel.types import FSMState, StepLogEntry

__all__ = ["RunTally"]


@dataclass(slots=True)
class RunTally:
    """Counts and states of one run, updated per step and per transition."""

    state: FSMState = FSMState.INIT
    max_state: FSMState = FSMState.INIT
    steps: int = 0
    tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    monitor_injections: int = 0
    entered_skip: bool = False
    risk: float | None = None  # the scorer's run-level risk, reported just before the end
    saved_chars: int = 0  # TokenSavingMiddleware's work, when it runs in this run
    compressions: int = 0
    early_exits: int = 0
    token_saving_seen: bool = False
    calls_with_usage: int = 0  # model calls whose usage the provider reported
    calls_without_usage: int = 0  # ... and those that reported none (left out of the totals, not counted as 0)

    def count(self, entry: StepLogEntry, response: ChatResponse | None) -> None:
        """Add one step."""
        self.steps += 1
        self.monitor_injections += entry.injection_sources.count("MonitorSteeringInjection")
        self.add_usage(entry.tokens, response)

    def add_usage(self, tokens: int, response: ChatResponse | None) -> None:
        """Add one model call's usage (a step's, or a call another middleware or a tool made in the run)."""
        if response is not None and not response.usage_reported and not tokens:
            self.calls_without_usage += 1
            return
        self.calls_with_usage += 1
        self.tokens += tokens
        if response is not None:
            self.input_tokens += response.input_tokens or 0
            self.output_tokens += response.output_tokens or 0

    @property
    def usage_known(self) -> bool:
        """Some model call of the run reported its usage, or none was made: the totals mean something."""
        return self.calls_with_usage > 0 or self.calls_without_usage == 0

    def token_saving(self, chars_saved: int, compressions: int, early_exits: int) -> None:
        self.token_saving_seen = True
        self.saved_chars += chars_saved
        self.compressions += compressions
        self.early_exits += early_exits

    def enter(self, state: FSMState) -> bool:
        """Record a transition to ``state``; true the first time the run enters SKIP."""
        self.state = state
        if state.severity > self.max_state.severity:
            self.max_state = state
        first_skip = state is FSMState.SKIP and not self.entered_skip
        self.entered_skip = self.entered_skip or first_skip
        return first_skip

    def attributes(self, outcome: str) -> Attributes:
        attrs: Attributes = {
            n.RB_OUTCOME: outcome,
            n.RB_STEPS: self.steps,
            n.RB_FINAL_STATE: self.state.value,
            n.RB_MAX_STATE: self.max_state.value,
            n.RB_ENTERED_SKIP: self.entered_skip,
            n.RB_MONITOR_INJECTIONS: self.monitor_injections,
        }
        if self.usage_known:  # no call reported usage: no totals (unknown), rather than a cost of zero
            attrs[n.RB_TOKENS] = self.tokens
            attrs[n.GEN_AI_USAGE_INPUT_TOKENS] = self.input_tokens
            attrs[n.GEN_AI_USAGE_OUTPUT_TOKENS] = self.output_tokens
        if self.calls_without_usage:
            attrs[n.RB_USAGE_UNREPORTED] = self.calls_without_usage
        if self.risk is not None:
            attrs[n.RB_RISK] = self.risk
        if self.token_saving_seen:
            attrs[n.RB_TOKEN_SAVING_CHARS_SAVED] = self.saved_chars
            attrs[n.RB_TOKEN_SAVING_COMPRESSIONS] = self.compressions
            attrs[n.RB_TOKEN_SAVING_EARLY_EXITS] = self.early_exits
        return attrs
