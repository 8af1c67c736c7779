"""Per-step features the local monitors read, computed once per ``StepRecord`` and cached.

Tool vocabularies (our choice, documented in the README): edit tools are the v0 list; test, read and submit
tools are matched on the action name, and shell actions count as tests when their input runs a test runner.
Bash-only agents edit through the shell: a shell action (``SHELL_TOOLS``) counts as an edit when its command
writes a file (``sed -i``, ``perl -i``, ``tee``, ``patch``, ``git apply``, or a ``>``/``>>`` redirection into a
named file, heredocs included), and the paths a shell action touches are read from the command itself, never from
the body of a heredoc (code the agent writes names modules, not files it touches).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rb_otel.steering.memo import IdentityMemo
from rb_otel.steering.text import MAX_TEXT_CHARS, Memo, content_words, jaccard, names_a_path, text_view, tokens
from rb_otel.types import StepRecord

__all__ = [
    "EDIT_TOOLS",
    "SHELL_TOOLS",
    "FeatureCache",
    "RunLinks",
    "StepFeatures",
    "linked",
    "shell_command",
    "shell_paths",
]

EDIT_TOOLS = frozenset(
    {"edit", "write", "str_replace", "str_replace_editor", "patch", "apply_patch", "create_file", "overwrite"}
)
TEST_TOOLS = frozenset({"pytest", "test", "run_tests", "npm test", "cargo test", "run_test", "tests"})
READ_TOOLS = frozenset({"read", "read_file", "cat", "view", "open", "open_file", "view_file", "show_file"})
SUBMIT_TOOLS = frozenset({"submit", "finish", "final_answer", "done", "complete", "answer"})

SHELL_TOOLS = frozenset({"bash", "sh", "shell", "execute_bash", "run_shell", "terminal", "execute_command", "cmd"})
_SHELL_EDIT = re.compile(
    r"\bsed\s+(?:-[a-z]*\s+)*-[a-z]*i|\bperl\s+-[a-z]*i|\btee\b|\bpatch\b|\bgit\s+apply\b"
    r"|(?<![0-9&<>])>>?\s*(?!&|/dev/null)['\"]?[\w./-]*\w\.\w+"
)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n.*?(?:\n\2\b|\Z)", re.DOTALL)
_TEST_INPUT = re.compile(r"\b(?:pytest|unittest|tox|nox|npm (?:run )?test|cargo test|go test|make test|jest)\b")
_TEST_KEYS = ("pytest", "unittest", "tox", "nox", "test", "jest")
# Substrings, not words: "KeyError" and "errors" count too. Cheap on long observations.
_ERROR_KEYS = ("error", "exception", "traceback", "failed", "failure", "fatal")


# Declaring done, recapping, announcing a switch: a word that counts on its own when it is a whole token (``done``,
# ``recap``, ``instead``; stripped punctuation around it keeps the regex's ``\b`` true, so no regex is needed), or a
# phrase, looked for with its regex only when its gate words are all tokens: most thoughts hold "should" or "all",
# few "should" and "work".
class _Phrases(NamedTuple):
    """``words`` count when one is a token; ``regex`` runs when one gate of ``gates`` has all its words as tokens."""

    words: frozenset[str]
    gates: tuple[frozenset[str], ...]
    regex: re.Pattern[str]

    def found(self, present: frozenset[str], lowered: str) -> bool:
        if not present.isdisjoint(self.words):
            return True
        for gate in self.gates:
            if gate <= present:
                return self.regex.search(lowered) is not None
        return False


def _phrases(words: str, gates: str, regex: str) -> _Phrases:
    return _Phrases(frozenset(words.split()), tuple(frozenset(g.split("+")) for g in gates.split()), re.compile(regex))


_DONE = _phrases(
    "done fixed complete completed finished resolved submit submitting",
    "should+work final+answer all+set",
    r"\b(?:should (?:now )?work|final answer|all set)\b",
)
_RECAP = _phrases(
    "recap reread re-read",
    "summarize summarise summary step+back going+back once+again start+over said mentioned reiterate rederive "
    "re-derive rethink re-think",
    r"\b(?:to summari[sz]e|in summary|let me summari[sz]e|step back|going back|once again|start over|as i said|"
    r"as mentioned|to reiterate|let me re-?derive|let me re-?think)\b",
)
_SWITCH = _phrases(
    "instead switching",
    "moving+on new+approach different+approach change+plan",
    r"\b(?:moving on|new approach|different approach|change of plan)\b",
)
# Word gates: the regexes below run only on thoughts holding one of their words (a C-speed set test).
_RETRACTION_GATE = frozenset(
    "wrong mind nevermind disregard scratch actually incorrect misread mistake contrary cause right".split()
)
_CLAIM_GATE = frozenset("is are was were isn't aren't wasn't weren't".split())
_RETRACTION = re.compile(
    r"\b(?:i was wrong|that was wrong|never ?mind|disregard (?:that|this|my)|scratch that|actually,? no|"
    r"that(?:'s| is) (?:not right|incorrect|wrong)|i misread|my mistake|contrary to what i|is actually not|"
    r"isn't actually|not the cause after all)\b"
)
# "<subject> is [not] <predicate>": the claims claim_contradiction compares across steps. The plain pattern is
# ``\b([a-z_][\w.]{2,}) (?:is|are|was|were)( not|n't)? (?:in |the |a |an |at )*([a-z_][\w.]{2,})``; run as it is,
# it is tried at every letter of the thought. Instead, _CLAIM_TAIL finds the verb and what follows it (it starts
# with a space, which the regex engine scans for at C speed), and _SUBJECT the subject that must end right before
# it: the plain pattern's matches exactly (property-tested), ~2.4x faster.
_CLAIM_TAIL = re.compile(r" (?:is|are|was|were)( not|n't)? (?:in |the |a |an |at )*([a-z_][\w.]{2,})")
# The subject is matched possessively (``{2,}+``): giving characters back could not help, so backtracking is skipped.
_SUBJECT = re.compile(r"\b[a-z_][\w.]{2,}+\Z")
_PUNCT = "\"'`.,;:!?()[]{}<>"


# ``json.loads`` is ``raw_decode`` plus a check that only JSON whitespace follows; called directly it skips a
# Python layer, which shows cold, as it runs inside an agent: this function ~73 against ~92 µs (warm 6 against 8).
_DECODE = json.JSONDecoder().raw_decode
_JSON_SPACE = " \t\n\r"


def _input_text(action_input: str) -> str:
    """The values of a JSON-object input (its keys say nothing about what was asked), else the text."""
    if action_input.startswith("{"):
        try:
            parsed, end = _DECODE(action_input)
        except ValueError:
            return action_input
        if action_input[end:].strip(_JSON_SPACE):  # extra data: not one JSON document
            return action_input
        if isinstance(parsed, dict):
            return " ".join(_value_text(v) for v in parsed.values())
    return action_input


def _value_text(value: object) -> str:
    # Numbers read the same through str() and json.dumps() (the text is lower-cased); str() is cheaper.
    if isinstance(value, str):
        return value
    return str(value) if isinstance(value, int | float) else json.dumps(value)


def _has_any(text: str, keys: tuple[str, ...]) -> bool:
    # A C-speed substring pre-check: the regexes below only run on texts that could match. A plain loop, not
    # any(<generator>): this runs twice per step and the generator costs more than the searches on short texts.
    for key in keys:  # noqa: SIM110 (see above)
        if key in text:
            return True
    return False


def _claim_matches(thought: str) -> list[tuple[str, str, str]]:
    """What ``re.findall`` of the plain claim pattern gives: ``(subject, " not" | "n't" | "", predicate)``."""
    found = []
    pos = taken = 0  # where the next search starts; the end of the last match (matches do not overlap)
    while (tail := _CLAIM_TAIL.search(thought, pos)) is not None:
        verb_at = tail.start()
        # ``endpos`` makes ``\Z`` mean "right before the verb"; ``\b`` still sees the character before ``pos``.
        subject = _SUBJECT.search(thought, max(taken, thought.rfind(" ", 0, verb_at) + 1), verb_at)
        if subject is None:
            pos = verb_at + 1  # the predicate may yet be the next claim's subject
            continue
        found.append((subject.group(), tail.group(1) or "", tail.group(2)))
        pos = taken = tail.end()
    return found


def _claims(thought: str) -> frozenset[tuple[str, str, bool]]:
    return frozenset((subj.rstrip("."), pred.rstrip("."), bool(neg)) for subj, neg, pred in _claim_matches(thought))


_NO_PATHS: frozenset[str] = frozenset()


def _path_of(token: str) -> str:
    """The token as a path or dotted name (punctuation stripped), or ``""`` when it is neither."""
    word = token.strip(_PUNCT)
    return word if names_a_path(word) else ""


_PATH_OF: Memo[str] = Memo(_path_of, name="monitors.path_of")


def _paths(text: str) -> frozenset[str]:
    if "/" not in text and "." not in text:
        return _NO_PATHS
    return frozenset(filter(None, map(_PATH_OF.__getitem__, text.split())))


@dataclass(slots=True)
class StepFeatures:
    """What the monitors read of one step; read-only by convention (not ``frozen``: that makes it ~4x dearer to build,
    and it is built once per step; slots keep field reads as fast as they get, which the monitors do often)."""

    action: str
    thought_words: frozenset[str]
    input_words: frozenset[str]
    paths: frozenset[str]
    declares_done: bool
    recaps: bool
    announces_switch: bool
    retractions: int
    claims: frozenset[tuple[str, str, bool]]
    is_edit: bool
    is_test: bool
    is_read: bool
    is_submit: bool
    is_error: bool
    # Links to earlier steps of the run, set by :class:`RunLinks` as the step joins the run, so a scorer reads in
    # O(1) what it would otherwise recompute across its whole window at every step (0 and () mean "none").
    #: Steps back (1-5) to the nearest step with the same action and input whose thought this one restates
    #: (stemmed-word Jaccard >= 0.6, this thought having at least 5 words).
    restates: int = 0
    #: For an acting step: steps back to the previous acting step with the same action.
    tool_gap: int = 0
    #: For an acting step, one per path: steps back to the previous acting step that named the path.
    path_gaps: tuple[int, ...] = ()


_QUOTED_ARGUMENT = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")


def shell_paths(command: str) -> frozenset[str]:
    """The paths a shell command touches: its unquoted arguments that name a path, heredoc bodies and quoted
    arguments (patterns, sed scripts, inline code) left out, options and ``/dev/null`` too."""
    bare = _QUOTED_ARGUMENT.sub(" ", shell_command(command))
    if "/" not in bare and "." not in bare:
        return _NO_PATHS
    found = (p for p in map(_PATH_OF.__getitem__, bare.split()) if p)
    return frozenset(p for p in found if not p.startswith("-") and p != "/dev/null")


def shell_command(action_input: str) -> str:
    """A shell command with heredoc bodies removed (the ``<<EOF`` line and what follows it on that line stay)."""
    if "<<" not in action_input:
        return action_input
    return _HEREDOC.sub(lambda m: f"<< {m.group(3)}", action_input)


def _compute(record: StepRecord) -> StepFeatures:
    action = (record.action or "").strip().lower()
    action_input = (record.action_input or "")[:MAX_TEXT_CHARS].lower()
    shell = action in SHELL_TOOLS
    command = shell_command(action_input) if shell else action_input  # what the edit test reads
    observation = (record.observation or "")[:MAX_TEXT_CHARS].lower()
    text = text_view(record.thought)  # a long thought's head and tail, as the heuristic scorer reads it
    thought, words = tokens(text)  # usually already tokenised by the scorer
    present = frozenset(words)
    return StepFeatures(
        action=action,
        thought_words=content_words(text),
        input_words=content_words(_input_text(action_input)),
        paths=shell_paths(action_input) if shell else _paths(action_input),
        declares_done=_DONE.found(present, thought),
        recaps=_RECAP.found(present, thought),
        announces_switch=_SWITCH.found(present, thought),
        retractions=len(_RETRACTION.findall(thought)) if not present.isdisjoint(_RETRACTION_GATE) else 0,
        claims=_claims(thought) if not present.isdisjoint(_CLAIM_GATE) else frozenset(),
        is_edit=action in EDIT_TOOLS or (shell and _SHELL_EDIT.search(command) is not None),
        is_test=action in TEST_TOOLS or (_has_any(action_input, _TEST_KEYS) and bool(_TEST_INPUT.search(action_input))),
        is_read=action in READ_TOOLS,
        is_submit=action in SUBMIT_TOOLS,
        is_error=_has_any(observation, _ERROR_KEYS),
    )


#: How far back a thought may restate an earlier one (``cyclic_compression`` reads the last six steps).
RESTATE_REACH = 5


class RunLinks:
    """Sets each new step's links (``restates``, ``tool_gap``, ``path_gaps``) from the steps before it.

    Steps are linked in run order, each once; the last position of every action and path is kept per run.
    """

    __slots__ = ("_last_path", "_last_tool")

    def __init__(self) -> None:
        self._last_tool: dict[str, int] = {}
        self._last_path: dict[str, int] = {}

    def link(self, feats: list[StepFeatures], i: int) -> None:
        """Link ``feats[i]``, the step after ``feats[:i]`` (all linked already)."""
        f = feats[i]
        if len(f.thought_words) >= 5:
            for back in range(1, min(RESTATE_REACH, i) + 1):
                earlier = feats[i - back]
                if (
                    earlier.action == f.action
                    and earlier.input_words == f.input_words
                    and jaccard(f.thought_words, earlier.thought_words) >= 0.6
                ):
                    f.restates = back
                    break
        if not f.action:
            return
        last = self._last_tool.get(f.action)
        f.tool_gap = 0 if last is None else i - last
        self._last_tool[f.action] = i
        if f.paths:
            last_path = self._last_path
            gaps = []
            for path in f.paths:
                last = last_path.get(path)
                gaps.append(0 if last is None else i - last)
                last_path[path] = i
            f.path_gaps = tuple(gaps)


def linked(feats: list[StepFeatures]) -> list[StepFeatures]:
    """Link ``feats`` as the steps of one run, in order (in place); returns it."""
    links = RunLinks()
    for i in range(len(feats)):
        links.link(feats, i)
    return feats


class RunFeatures:
    """Features of one run's steps, extended (and linked) incrementally as the run grows.

    A step's observation may be attached after it was first evaluated (``end_step(observation=...)``), so the
    newest two steps are re-checked by observation identity on every call; a recomputed step keeps its links (an
    observation changes none of what they are made of).
    """

    __slots__ = ("features", "links", "observations", "steps")

    def __init__(self, steps: Sequence[StepRecord]) -> None:
        self.steps = steps
        self.features: list[StepFeatures] = []
        self.observations: list[str | None] = []
        self.links = RunLinks()

    def update(self) -> list[StepFeatures]:
        steps, feats, observations = self.steps, self.features, self.observations
        for i in range(max(len(feats) - 2, 0), len(feats)):
            if steps[i].observation is not observations[i]:
                old, new = feats[i], _compute(steps[i])
                new.restates, new.tool_gap, new.path_gaps = old.restates, old.tool_gap, old.path_gaps
                feats[i] = new
                observations[i] = steps[i].observation
        for i in range(len(feats), len(steps)):
            feats.append(_compute(steps[i]))
            observations.append(steps[i].observation)
            self.links.link(feats, i)
        return feats


class FeatureCache:
    """Bounded map from a run's step list (by identity) to its :class:`RunFeatures`; thread-safe.

    At most ``capacity`` runs are kept (oldest evicted first); an evicted run is recomputed if it comes back,
    so the bound costs time, never correctness (``features(steps) == [_compute(s) for s in steps]`` up to the
    links between steps, which ``RunFeatures`` keeps).
    """

    def __init__(self, capacity: int = 256) -> None:
        self._runs: IdentityMemo[Sequence[StepRecord], RunFeatures] = IdentityMemo("monitors.run_features", capacity)

    def features(self, steps: Sequence[StepRecord]) -> list[StepFeatures]:
        run = self._runs.get(steps)
        if run is None:
            run = self._runs.put(steps, RunFeatures(steps))
        return run.update()
