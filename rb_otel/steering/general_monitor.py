"""The general monitor's five rules (docs/experiments.md, "GeneralMonitorMiddleware", "v1 rule-firing pack"), over the
steps of a run so far.

ReasonBlocks names the rules and leaves their logic and hint texts open; ours, in priority order:

1. ``semantic_loop``: the last three steps repeat one (action, input), or their thoughts (five content words
   or more) are near copies.
2. ``verification_skip``: three or more edits since the agent last ran a verify tool (tests, a linter).
3. ``sprawl``: past half the tool-call budget, the last eight calls touched eight different targets and none
   changed anything.
4. ``idle_response``: past half the budget, the last three thoughts are empty or a few words.
5. ``low_novelty_tail``: past the budget, the last five observations say almost nothing the run had not seen.

Steps are the dicts of ``build_steps_from_messages`` (docs/experiments.md, "TokenSavingMiddleware"). Pure functions;
the middleware decides
cooldowns and where the hint goes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rb_otel.steering.text import content_words, jaccard

__all__ = ["DEFAULT_SUBMIT_TOOLS", "DEFAULT_VERIFY_TOOLS", "HINTS", "RULES", "first_rule"]

Step = Mapping[str, Any]

DEFAULT_VERIFY_TOOLS = frozenset({"run_tests", "pytest", "test", "lint", "check", "verify"})
DEFAULT_SUBMIT_TOOLS = frozenset({"submit", "finish", "final_answer", "done"})
_EDIT_WORDS = ("edit", "write", "patch", "replace", "create", "apply", "insert", "modify")

HINTS = {
    "semantic_loop": "You are repeating the same action without new results. Stop and try a different approach, "
    "or explain what you expect this attempt to show.",
    "verification_skip": "You have made several edits without running the tests. Run them now before more changes.",
    "sprawl": "You are spreading over many files without changing anything. Pick the most likely cause and focus "
    "on it.",
    "idle_response": "Your recent replies say little. State your plan in one or two sentences before the next "
    "tool call.",
    "low_novelty_tail": "Your recent tool calls brought no new information. Submit your best answer now or take "
    "one decisive step.",
}


def _key(step: Step) -> tuple[str, str]:
    return str(step.get("action", "")), repr(step.get("action_input", {}))


def _is_edit(step: Step) -> bool:
    action = str(step.get("action", "")).lower()
    return any(word in action for word in _EDIT_WORDS)


def semantic_loop(steps: Sequence[Step], *, budget: int, verify: frozenset[str]) -> bool:
    last = steps[-3:]
    if len(last) < 3:
        return False
    if len({_key(s) for s in last}) == 1 and last[0].get("action"):
        return True
    # near-copy thoughts count only when there is enough of them to compare (a few words match by chance)
    words = [content_words(str(s.get("thought", ""))) for s in last]
    return all(len(w) >= 5 for w in words) and all(jaccard(words[0], w) >= 0.8 for w in words[1:])


def verification_skip(steps: Sequence[Step], *, budget: int, verify: frozenset[str]) -> bool:
    edits = 0
    for step in reversed(steps):
        if str(step.get("action", "")) in verify:
            break
        edits += _is_edit(step)
    return edits >= 3


def sprawl(steps: Sequence[Step], *, budget: int, verify: frozenset[str]) -> bool:
    calls = [s for s in steps if s.get("action")]
    if len(calls) <= budget // 2:
        return False
    last = calls[-8:]
    return len(last) == 8 and len({_key(s) for s in last}) == 8 and not any(_is_edit(s) for s in last)


def idle_response(steps: Sequence[Step], *, budget: int, verify: frozenset[str]) -> bool:
    if sum(bool(s.get("action")) for s in steps) <= budget // 2:
        return False
    last = steps[-3:]
    return len(last) == 3 and all(len(str(s.get("thought", "")).split()) < 4 for s in last)


def low_novelty_tail(steps: Sequence[Step], *, budget: int, verify: frozenset[str]) -> bool:
    if sum(bool(s.get("action")) for s in steps) <= budget or len(steps) < 10:
        return False
    seen = content_words(" ".join(str(s.get("observation", "")) for s in steps[:-5]))
    if not seen:
        return False
    tail = [content_words(str(s.get("observation", ""))) for s in steps[-5:]]
    return all(len(words - seen) <= max(1, len(words) // 10) for words in tail)


RULES: dict[str, Callable[..., bool]] = {
    "semantic_loop": semantic_loop,
    "verification_skip": verification_skip,
    "sprawl": sprawl,
    "idle_response": idle_response,
    "low_novelty_tail": low_novelty_tail,
}


def first_rule(
    steps: Sequence[Step],
    *,
    budget: int,
    verify: frozenset[str] = DEFAULT_VERIFY_TOOLS,
    cooling: frozenset[str] = frozenset(),
) -> str | None:
    """The highest-priority rule that holds and is not ``cooling`` down, else ``None``."""
    for name, rule in RULES.items():
        if name not in cooling and rule(steps, budget=budget, verify=verify):
            return name
    return None
