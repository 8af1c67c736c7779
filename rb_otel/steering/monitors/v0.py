"""The historical v0 local monitor suite, as specified in ReasonBlocks' history (docs/steering.md, "Monitors").

``evaluate_all(steps, weights=None, fire_threshold=0.6)`` over step dicts of the ``signals_fn`` shape
(``step_index, action, action_input, thought, observation, is_error``); :func:`v0_signals` is usable directly as
a ``signals_fn``. Where ReasonBlocks is open we chose (docs/steering.md, "Choices where ReasonBlocks leaves them open"):

* ``streak``: "identical" means the same action name and the same input; a run below 2 scores 0.0
  (docs/steering.md, "`streak` on a short run").
* ``edit_revert``: the last three edits are compared, whatever their paths; an edit's path is its input's
  ``path``/``file_path``/``file`` key or its first path-like token; an "error observation" is ``is_error`` or
  error words in the observation of any step between the two edits.
* ``test_repeat``: the failure signature is the normalised failure lines of the observation.
* ``hedge``: the early-half density is floored at 0.01 so a single late hedge in an otherwise plain run does
  not count as an infinite ratio.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_FIRE_THRESHOLD", "DEFAULT_WEIGHTS", "V0_PROFILES", "evaluate_all", "v0_signals"]

DEFAULT_FIRE_THRESHOLD = 0.6
DEFAULT_WEIGHTS: Mapping[str, float] = {
    "streak": 0.35,
    "call_count": 0.15,
    "edit_revert": 0.15,
    "test_repeat": 0.15,
    "diversity": 0.10,
    "hedge": 0.10,
}
V0_PROFILES: Mapping[str, Mapping[str, float]] = {
    "coding": DEFAULT_WEIGHTS,
    "pr_review": {
        "streak": 0.45,
        "call_count": 0.15,
        "edit_revert": 0.0,
        "test_repeat": 0.0,
        "diversity": 0.20,
        "hedge": 0.20,
    },
    "qa": {
        "streak": 0.30,
        "call_count": 0.05,
        "edit_revert": 0.05,
        "test_repeat": 0.10,
        "diversity": 0.15,
        "hedge": 0.35,
    },
}

_EDIT_TOOLS = frozenset(
    {"edit", "write", "str_replace", "str_replace_editor", "patch", "apply_patch", "create_file", "overwrite"}
)
_TEST_TOOLS = frozenset({"pytest", "test", "run_tests", "npm test", "cargo test"})
_TEST_OBSERVATION = ("assertionerror", "failed", "failures=")
_RETRACTIONS = re.compile(r"\b(?:i was wrong|never ?mind|disregard that|the bug is actually not)\b")
_HEDGES = re.compile(r"\b(?:maybe|perhaps|might|not sure|on second thought|possibly|probably|unsure|i think)\b")
_WORDS = re.compile(r"\w+")
_ERROR_WORDS = re.compile(r"\b(?:error|exception|traceback|failed|fatal)\b|\w+error\b")
_PATH_TOKEN = re.compile(r"[\w.\-]*/[\w.\-/]+|\b\w+\.\w{1,5}\b")
_NOISE = (
    (re.compile(r"/tmp/[^\s:'\"]+|/var/folders/[^\s:'\"]+"), "<tmp>"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-f]+\b"), "<addr>"),
    (re.compile(r"\bpid[ =:]*\d+\b"), "<pid>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(?:\.\d+)?"), "<time>"),
    (re.compile(r"\d{2}:\d{2}:\d{2}(?:\.\d+)?"), "<time>"),
    (re.compile(r"\d{4,}"), "<n>"),
)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _acting(steps: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [s for s in steps if s.get("action")]


def streak(steps: Sequence[Mapping[str, Any]]) -> float:
    run, key = 0, None
    for step in reversed(_acting(steps)):
        this = (step.get("action"), _text(step.get("action_input")))
        if key is None:
            key = this
        if this != key:
            break
        run += 1
    return 0.0 if run < 2 else min(run / 5.0, 1.0)


def call_count(steps: Sequence[Mapping[str, Any]]) -> float:
    return min(len(_acting(steps)) / 20.0, 1.0)


def _trigrams(text: str) -> frozenset[str]:
    return frozenset(text[i : i + 3] for i in range(max(len(text) - 2, 0)))


def _trigram_jaccard(a: str, b: str) -> float:
    ta, tb = _trigrams(a), _trigrams(b)
    union = ta | tb
    return len(ta & tb) / len(union) if union else 1.0


def _edit_path(action_input: Any) -> str:
    if isinstance(action_input, Mapping):
        for key in ("path", "file_path", "file", "filename"):
            if action_input.get(key):
                return str(action_input[key])
    match = _PATH_TOKEN.search(_text(action_input))
    return match.group(0) if match else ""


def _is_error_step(step: Mapping[str, Any]) -> bool:
    return bool(step.get("is_error")) or bool(_ERROR_WORDS.search(_text(step.get("observation")).lower()))


def edit_revert(steps: Sequence[Mapping[str, Any]]) -> float:
    edits = [s for s in steps if str(s.get("action") or "").lower() in _EDIT_TOOLS]
    if len(edits) >= 3:
        newest, previous, two_back = (_text(e.get("action_input")) for e in (edits[-1], edits[-2], edits[-3]))
        if _trigram_jaccard(newest, two_back) - _trigram_jaccard(newest, previous) >= 0.10:
            return 1.0
    # edit P -> error observation -> edit P again, twice on the same path
    pending_error: dict[str, bool] = {}
    cycles: dict[str, int] = {}
    for step in steps:
        if str(step.get("action") or "").lower() in _EDIT_TOOLS:
            path = _edit_path(step.get("action_input"))
            if pending_error.get(path):
                cycles[path] = cycles.get(path, 0) + 1
                if cycles[path] >= 2:
                    return 1.0
            pending_error[path] = _is_error_step(step)
        elif _is_error_step(step):
            for path in pending_error:
                pending_error[path] = True
    return 0.0


def _failure_signature(observation: str) -> str:
    text = observation.lower()
    for pattern, replacement in _NOISE:
        text = pattern.sub(replacement, text)
    lines = [ln.strip() for ln in text.splitlines() if any(w in ln for w in ("fail", "error", "assert"))]
    return "\n".join(lines) if lines else text.strip()[:500]


def _is_test_step(step: Mapping[str, Any]) -> bool:
    if str(step.get("action") or "").lower() in _TEST_TOOLS:
        return True
    observation = _text(step.get("observation")).lower()
    return any(marker in observation for marker in _TEST_OBSERVATION)


def test_repeat(steps: Sequence[Mapping[str, Any]]) -> float:
    previous: str | None = None
    for step in steps:
        if not _is_test_step(step):
            continue
        signature = _failure_signature(_text(step.get("observation")))
        if signature and signature == previous:
            return 1.0
        previous = signature
    return 0.0


test_repeat.__test__ = False  # type: ignore[attr-defined]  # not a pytest test despite its name


def diversity(steps: Sequence[Mapping[str, Any]]) -> float:
    acting = _acting(steps)
    if len(acting) < 8:
        return 0.0
    last = [str(s.get("action")) for s in acting[-5:]]
    distinct = set(last)
    if len(distinct) == 1:
        return 1.0
    if len(distinct) == 2:
        alternating = all(last[i] != last[i + 1] for i in range(len(last) - 1))
        return 0.0 if alternating else 0.7
    return 0.0


def _hedge_density(thoughts: Sequence[str]) -> float:
    words = sum(len(_WORDS.findall(t)) for t in thoughts)
    hits = sum(len(_HEDGES.findall(t)) for t in thoughts)
    return hits / words if words else 0.0


def hedge(steps: Sequence[Mapping[str, Any]]) -> float:
    thoughts = [_text(s.get("thought")).lower() for s in steps if s.get("thought")]
    if any(_RETRACTIONS.search(t) for t in thoughts):
        return 1.0
    if len(thoughts) < 4:
        return min(_hedge_density(thoughts), 1.0)
    half = len(thoughts) // 2
    early = max(_hedge_density(thoughts[:half]), 0.01)
    ratio = _hedge_density(thoughts[half:]) / early
    return min(max((ratio - 2.0) / 2.0, 0.0), 1.0)


_SCORERS = {
    "streak": streak,
    "call_count": call_count,
    "edit_revert": edit_revert,
    "test_repeat": test_repeat,
    "diversity": diversity,
    "hedge": hedge,
}


def v0_signals(steps: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Every v0 score for ``steps``; usable as TokenSaving's ``signals_fn``."""
    return {name: scorer(steps) for name, scorer in _SCORERS.items()}


def evaluate_all(
    steps: Sequence[Mapping[str, Any]],
    weights: Mapping[str, float] | None = None,
    fire_threshold: float = DEFAULT_FIRE_THRESHOLD,
) -> dict[str, Any]:
    """Score ``steps`` with the v0 suite: ``{"scores", "total", "fired", "weights"}``.

    A partial ``weights`` dict is merged over :data:`DEFAULT_WEIGHTS`; a monitor fires at ``score >=
    fire_threshold``.
    """
    resolved = dict(DEFAULT_WEIGHTS)
    for name, value in (weights or {}).items():
        if name in resolved:
            resolved[name] = min(max(float(value), 0.0), 1.0)
    scores = v0_signals(steps)
    return {
        "scores": scores,
        "total": sum(resolved[n] * s for n, s in scores.items()),
        "fired": [n for n, s in scores.items() if s >= fire_threshold],
        "weights": resolved,
    }
