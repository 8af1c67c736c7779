"""Our deterministic heuristics for the six v1 monitor names (docs/steering.md, "Monitors"; the algorithms are ours).

Each scorer reads the trailing window of ``StepRecord`` features (newest last; a suffix of the run's features,
linked to earlier steps by ``features.RunLinks``) and returns a score in [0, 1], 1 = worst. They are cheap (set
operations on cached features and links) and fire, with the default threshold 0.6, on:

* ``semantic_loop``: the newest action repeats at least two of the previous 12 actions of the same tool with
  paraphrased input (stemmed-word Jaccard >= 0.6 over the input's values). ``min(repeats / 3, 1)``.
* ``verification_skip``: the agent declares it is done (a whole word such as "done", "fixed", "completed" or a
  phrase such as "should now work", "all set"), or calls a submit tool, after an edit with no test or read since
  that edit (0.9); 0.3 when four or more steps passed since an unverified edit.
* ``cyclic_compression``: re-summarising ("to summarize", "let me recap", "step back", ...) or a thought that
  restates one of the previous five (Jaccard >= 0.6) without new action; ``min(cycles / 3, 1)`` over 6 steps.
* ``late_sprawl``: with >= 9 actions in the window, tools and paths that first appear in its last third:
  ``min((new_tools + new_paths / 2) / 3, 1)``.
* ``silent_topic_drift``: after 6 steps, the last three steps share few words with the task (or, without a
  task, with the first two thoughts); halved when the agent announces the change of direction.
* ``claim_contradiction``: a claim in the newest thought negates an earlier one ("X is Y" vs "X is not Y",
  1.0), or retraction phrases ("I was wrong", "scratch that", ...): 0.4 for the newest, 0.2 per earlier one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rb_otel.steering.monitors.features import StepFeatures
from rb_otel.steering.text import content_words, jaccard

__all__ = ["V1_SCORERS"]

Scorer = Callable[[Sequence[StepFeatures], frozenset[str]], float]


def semantic_loop(window: Sequence[StepFeatures], task_words: frozenset[str]) -> float:
    newest = window[-1]
    if not newest.action:
        return 0.0
    repeats = 0
    for earlier in window[-13:-1]:
        if earlier.action != newest.action:
            continue
        if newest.input_words == earlier.input_words or jaccard(newest.input_words, earlier.input_words) >= 0.6:
            repeats += 1
    return min(repeats / 3.0, 1.0)


def verification_skip(window: Sequence[StepFeatures], task_words: frozenset[str]) -> float:
    # The newest edit counts when no test or read (that is not itself an edit) came after it: scan back from the
    # newest step and stop at the first edit, test or read, usually a few steps back.
    last_edit = -1
    for i in range(len(window) - 1, -1, -1):
        f = window[i]
        if f.is_edit:
            last_edit = i
            break
        if f.is_test or f.is_read:
            return 0.0
    if last_edit < 0:
        return 0.0
    newest = window[-1]
    if newest.is_submit or newest.declares_done:
        return 0.9
    return 0.3 if len(window) - 1 - last_edit >= 4 else 0.0


def cyclic_compression(window: Sequence[StepFeatures], task_words: frozenset[str]) -> float:
    recent = window[-6:]
    cycles = 0
    for i, f in enumerate(recent):
        cycles += f.recaps
        if 0 < f.restates <= i:  # the step it restates is within the last six too
            cycles += 1
    return min(cycles / 3.0, 1.0)


def late_sprawl(window: Sequence[StepFeatures], task_words: frozenset[str]) -> float:
    acting = [i for i, f in enumerate(window) if f.action]
    if len(acting) < 9:
        return 0.0
    first = acting[0]
    new_tools = new_paths = 0
    # A tool (path) is new in the last third when none of the window's acting steps before its first use there
    # used it: the link to its previous use points before the window's first acting step, or nowhere.
    for i in acting[len(acting) * 2 // 3 :]:
        f = window[i]
        reach = i - first
        if not f.tool_gap or f.tool_gap > reach:
            new_tools += 1
        for gap in f.path_gaps:
            if not gap or gap > reach:
                new_paths += 1
    return min((new_tools + new_paths / 2.0) / 3.0, 1.0)


def silent_topic_drift(window: Sequence[StepFeatures], task_words: frozenset[str]) -> float:
    if len(window) < 6:
        return 0.0
    anchor = task_words or (window[0].thought_words | window[1].thought_words)
    if len(anchor) < 3:
        return 0.0
    recent = window[-3:]
    seen: set[str] = set()
    for f in recent:  # intersect with the (small) anchor first instead of building the steps' whole vocabulary
        seen |= anchor & f.thought_words
        seen |= anchor & f.input_words
    overlap = len(seen) / min(len(anchor), 8)
    if overlap >= 0.25:
        return 0.0
    score = 1.0 - overlap / 0.25
    if any(f.announces_switch for f in recent):
        score /= 2.0
    return score


def claim_contradiction(window: Sequence[StepFeatures], task_words: frozenset[str]) -> float:
    newest = window[-1]
    if newest.claims:
        flipped = {(subject, predicate, not negated) for subject, predicate, negated in newest.claims}
        for earlier in window[-13:-1]:
            if not flipped.isdisjoint(earlier.claims):
                return 1.0
    newest_retractions = newest.retractions
    if not newest_retractions:
        return 0.0
    earlier_retractions = sum(f.retractions for f in window[-5:-1])
    return min(0.4 * newest_retractions + 0.2 * earlier_retractions, 1.0)


V1_SCORERS: dict[str, Scorer] = {
    "claim_contradiction": claim_contradiction,
    "semantic_loop": semantic_loop,
    "verification_skip": verification_skip,
    "cyclic_compression": cyclic_compression,
    "late_sprawl": late_sprawl,
    "silent_topic_drift": silent_topic_drift,
}


def task_words_of(task: str) -> frozenset[str]:
    """The anchor words ``silent_topic_drift`` compares recent steps against."""
    return content_words(task)
