"""A model-based judge as a scorer: every ``every`` steps a (cheap) LLM is asked whether the run is on track.

The judge is an extension point, not a default: the pilot stays offline. ``ask`` is any ``fn(prompt) -> str``
(for a LangChain chat model: ``lambda p: model.invoke(p).text``); the reply must contain a probability of
failure between 0 and 1 (the first number in it). Between questions, and whenever the judge fails (an
exception, no number, a number outside [0, 1]), the score is the ``base`` scorer's; a judged score is
``weight * judge + (1 - weight) * base``. Prompts carry the task-free step summaries below, so they hold the
agent's own thoughts and commands: only point ``ask`` at a model you may send them to.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from collections.abc import Callable

from rb_otel.steering.checks import check_int, check_number, expected
from rb_otel.steering.scoring.scorers import RunScorer, Scorer, ScorerStep, resolve_scorer

__all__ = ["JUDGE_PROMPT", "JudgeScorer"]

_log = logging.getLogger("rb_otel.steering")
_NUMBER = re.compile(r"(?<![\d.])(?:0(?:\.\d+)?|1(?:\.0+)?|\.\d+)(?![\d.])")

JUDGE_PROMPT = (
    "You watch an AI agent work. Here are its latest steps, oldest first.\n\n{steps}\n\n"
    "How likely is it that this run is failing (going wrong, stuck or looping)? "
    "Answer with one number between 0 and 1."
)


class _JudgedRun:
    def __init__(self, judge: JudgeScorer, base: RunScorer) -> None:
        self._judge = judge
        self._base = base
        self._recent: deque[ScorerStep] = deque(maxlen=judge.window)
        self._steps = 0
        self._last: float | None = None

    def score(self, step: ScorerStep) -> float:
        base = self._base.score(step)
        self._recent.append(step)
        self._steps += 1
        value = base
        if self._steps % self._judge.every == 0:
            verdict = self._judge.verdict(list(self._recent))
            if verdict is not None:
                value = self._judge.weight * verdict + (1.0 - self._judge.weight) * base
        self._last = value
        return value

    def risk(self) -> float | None:
        return self._last

    def finish(self) -> None:
        self._base.finish()


class JudgeScorer:
    """Asks ``ask`` every ``every`` steps (from the ``every``-th), over the last ``window`` steps."""

    def __init__(
        self,
        ask: Callable[[str], str],
        *,
        every: int = 5,
        window: int = 5,
        weight: float = 0.5,
        base: str | Scorer = "pilot",
        preview_chars: int = 400,
    ) -> None:
        if not callable(ask):
            raise expected("ask", "a callable fn(prompt) -> str", ask)
        check_int("every", every, low=1)
        check_int("window", window, low=1)
        check_number("weight", weight, low=0.0, high=1.0)
        check_int("preview_chars", preview_chars, low=1)
        if not isinstance(base, str) and not callable(getattr(base, "start_run", None)):
            raise expected("base", "'heuristic', 'pilot' or a Scorer", base)
        self.ask = ask
        self.every, self.window, self.weight = every, window, weight
        try:
            self.base = resolve_scorer(base)
        except ValueError as error:
            raise ValueError(f"base: {error}") from None
        self.preview_chars = preview_chars
        self.name = f"judge+{self.base.name}"

    def start_run(self, agent: str = "", task_id: str = "") -> RunScorer:
        return _JudgedRun(self, self.base.start_run(agent, task_id))

    def prompt(self, steps: list[ScorerStep]) -> str:
        limit = self.preview_chars
        lines = []
        for i, step in enumerate(steps, 1):
            parts = [f"{i}. thought: {step.thought[:limit]!r}"]
            if step.action:
                parts.append(f"action: {step.action} {(step.action_input or '')[:limit]!r}")
            if step.observation:
                parts.append(f"result{' (error)' if step.error else ''}: {step.observation[:limit]!r}")
            lines.append("; ".join(parts))
        return JUDGE_PROMPT.format(steps="\n".join(lines))

    def verdict(self, steps: list[ScorerStep]) -> float | None:
        """The judge's probability of failure, or ``None`` when it could not give one (logged)."""
        try:
            reply = self.ask(self.prompt(steps))
        except Exception as exc:  # the judge is optional: the run goes on with the base score
            _log.warning("judge failed (%s); using the base score", type(exc).__name__)
            return None
        match = _NUMBER.search(str(reply))
        if match is None:
            _log.warning("judge gave no probability in [0, 1]; using the base score")
            return None
        return float(match.group(0))
