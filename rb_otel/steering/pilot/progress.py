"""Whether a run is making progress: signals that are not its size, from the steps a scorer already sees.

A run that fails rarely fails by being long; it fails by going round: it stops changing the workspace, repeats
what it did, keeps seeing errors, runs the tests and sees them fail, re-reads what it already read, or (a
customer-service agent) refuses the same request again. :class:`ProgressTracker` keeps those as O(1)-per-step
aggregates of each :class:`~rb_otel.steering.scoring.protocol.ScorerStep`, so a live run (the middleware's step)
and a replayed one (``rb-otel train``, ``evaluate``) compute the same values from the same steps: no model call,
no network, no clock. docs/signal.md ("Progress signals") has a row for each of :data:`PROGRESS_FEATURES`.

What counts, in one place (each rule a small function below, tested on hand-made runs):

* a **change** is a call that writes: a tool whose name starts with a writing verb (``edit_file``,
  ``str_replace``, ``update_reservation``, ``cancel_order``; an editor tool with a writing ``command``), or a
  shell command that writes (``sed -i``, a redirect into a file, ``tee``, ``mv``/``cp``/``rm``, ``patch``,
  ``git apply``/``checkout``, a heredoc into a file, a script that opens a file for writing);
* a **repeat** is a call whose normalised form (tool, arguments with whitespace collapsed and digits dropped)
  was made before in the run;
* a **failing observation** is an error result, a non-zero exit code, a traceback, or a result that starts
  with ``error``;
* a **test run** is a shell command that runs a test runner (``pytest``, ``tox``, ``manage.py test``,
  ``runtests.py``, ``python -m unittest``, ``go test``, ``cargo test``, ``npm test``, ...), passing when its
  exit code is 0 (without one: when no failure is reported);
* a **read** is a call that only looks (``cat``/``head``/``tail``/``nl``/``sed -n``/``less`` of a file, a
  ``view`` command, a tool named ``get_``/``read_``/``view_``/``list_``/``search_``/``find_``...); a **re-read**
  reads a target it read before;
* a **refusal** is a text-only turn that declines (``I'm sorry, but I can't``, ``unable to``, ``not able to``,
  ``against (our) policy``, ``not allowed``); a refusal right after a refusal is the customer asking again.

Memory is bounded: the keys of earlier calls and reads are kept for the last :data:`KEYS_KEPT` distinct ones.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence

from rb_otel.steering.scoring.protocol import ScorerStep

__all__ = [
    "KEYS_KEPT",
    "PROGRESS_FEATURES",
    "DriftScore",
    "ProgressTracker",
    "call_writes",
    "command_segments",
    "json_arguments",
    "return_code",
    "runs_check",
]

#: The progress signals, in the order :meth:`ProgressTracker.values` returns them (docs/signal.md has their rows).
PROGRESS_FEATURES: tuple[str, ...] = (
    "since_change",  # log1p(steps since the last call that wrote; all steps so far before the first one)
    "change_share",  # calls that wrote, per step
    "repeat_share",  # calls repeating an earlier call of the run (normalised), per call
    "repeat_streak",  # log1p(the current run of consecutive repeated calls)
    "fail_streak",  # log1p(the current run of consecutive failing observations)
    "fail_share",  # failing observations, per call
    "tests_run",  # log1p(test runs so far)
    "test_state",  # the last test run: 1 failed, -1 passed, 0 none yet
    "reread_share",  # reads of a target read before, per read
    "refusals",  # log1p(text-only turns that decline)
    "refusal_repeats",  # log1p(refusals right after a refusal: the same request again)
    "drift",  # similarity of the thought to the last few (0 unless an embedder is given: DriftScore)
)
#: Distinct call and read keys a run keeps (the oldest forgotten first): bounds memory on a very long run.
KEYS_KEPT = 512

_WRITE_VERBS = frozenset(
    "edit write create replace insert patch apply save delete remove rename move update cancel book modify send "
    "transfer refund exchange return add set enable disable refuel reset change place submit toggle issue pay "
    "append overwrite put post upsert commit".split()
)
_READ_VERBS = frozenset("get read view list search find show open cat look fetch check lookup query".split())
_EDITOR_WRITE_COMMANDS = frozenset({"create", "str_replace", "insert", "undo_edit", "write", "append", "edit"})
_SHELL_TOOLS = frozenset({"bash", "shell", "sh", "terminal", "run_command", "execute_bash", "cmd", "run_shell"})
_SEGMENT = re.compile(r"&&|\|\||[|;\n]")
_REDIRECT = re.compile(r"(?<![0-9&<])>>?\s*(?![&>])(['\"]?)(?!/dev/null\1(?:\s|$))[\w./~$-]")
_SHELL_WRITE_PROGRAMS = frozenset({"tee", "mv", "cp", "rm", "touch", "mkdir", "patch", "truncate", "ln", "install"})
_GIT_WRITES = frozenset({"apply", "checkout", "restore", "stash", "reset", "am", "cherry-pick", "revert", "mv", "rm"})
_SCRIPT_WRITE = re.compile(r"open\([^)]*['\"][wa]\+?['\"]|\.write_text\(|\.write\(")
_READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "view"})
_TEST_PROGRAMS = frozenset({"pytest", "py.test", "tox", "nox", "runtests.py", "unittest", "nosetests", "trial"})
_TEST_MODULES = re.compile(r"-m\s+(?:pytest|unittest|nose|tox)\b|manage\.py\s+test\b|runtests\.py|\bbin/test\b")
_TEST_TOOLS = re.compile(r"\b(?:go|cargo|npm|yarn|pnpm|make|mvn|gradle|dotnet|mix|bundle exec rspec)\s+test\b")
_RETURN_CODE = re.compile(r"(?:<returncode>|exit code:?|exit status:?|returncode[=:])\s*(-?\d+)", re.IGNORECASE)
_TRACEBACK = "Traceback (most recent call last)"
_TEST_FAILED = re.compile(r"\b(?:FAILED|FAILURES|ERRORS?)\b|\b\d+ failed\b|\bfailed\b.*\btests?\b")
_REFUSAL = re.compile(
    r"\b(?:i(?:'|’)?m sorry,? but|i (?:am )?(?:unable|not able) to|i can(?:'|’)?not|i can(?:'|’)?t|"
    r"(?:is|are) not (?:allowed|permitted|eligible)|against (?:our |the )?polic(?:y|ies)|"
    r"(?:our |the )?policy (?:does not|doesn(?:'|’)?t) (?:allow|permit))",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
_WORD_SPLIT = re.compile(r"[_\-.\s]|(?<=[a-z])(?=[A-Z])")
_ARG_VIEW = 2000  # characters of a call's arguments its rules read (a heredoc's body is not a command)


def _first_word(name: str) -> str:
    words = [w for w in _WORD_SPLIT.split(name) if w]
    return words[0].lower() if words else ""


def command_segments(command: str) -> list[list[str]]:
    """The words of each command of a pipeline or list (``a && b | c``), wrappers such as ``timeout 60`` left."""
    out = []
    for segment in _SEGMENT.split(command[:_ARG_VIEW]):
        words = segment.split()
        while words and (words[0] in {"sudo", "timeout", "env", "time", "nohup"} or "=" in words[0]):
            words = words[1:]
        while words and words[0][:1].isdigit():
            words = words[1:]  # the `60` of `timeout 60`
        if words:
            out.append(words)
    return out


def shell_writes(command: str) -> bool:
    """Whether a shell command changes files: a redirect into a file, ``sed -i``, a writing program, a writing
    ``git`` subcommand, or a script that opens a file for writing."""
    # `cat <<'EOF' > f` writes on its first line; the heredoc's body is text, not commands
    head = command.split("\n", 1)[0] if "<<" in command else command
    if _REDIRECT.search(head[:_ARG_VIEW]):
        return True
    for words in command_segments(command):
        program = words[0].rsplit("/", 1)[-1]
        if program in _SHELL_WRITE_PROGRAMS:
            return True
        if program in {"sed", "perl"} and any(w.startswith("-i") or w == "-pi" for w in words[1:4]):
            return True
        if program == "git" and len(words) > 1 and words[1] in _GIT_WRITES:
            return True
    return bool(_SCRIPT_WRITE.search(command[:_ARG_VIEW]))


def json_arguments(text: str) -> dict[str, object] | None:
    """A tool call's arguments as the JSON object they are, or ``None`` when they are not one."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def is_shell(action: str, arguments: str) -> bool:
    """A call whose arguments are a shell command (a shell tool, or plain text arguments with a space)."""
    return action.lower() in _SHELL_TOOLS or (not arguments.lstrip().startswith("{") and " " in arguments)


def call_writes(action: str, arguments: str) -> bool:
    """Whether a call changes the workspace or the domain's state (module docstring: a *change*)."""
    parsed = json_arguments(arguments)
    if is_shell(action, arguments):
        return shell_writes(str(parsed.get("command", "")) if parsed else arguments)
    if parsed is not None and isinstance(parsed.get("command"), str):
        command = str(parsed["command"])
        if command in _EDITOR_WRITE_COMMANDS:
            return True
        if command in {"view", "read", "cat", "list", "search", "find"}:
            return False
        if " " in command:  # a shell command inside a structured call (OpenHands `execute_bash`)
            return shell_writes(command)
    return _first_word(action) in _WRITE_VERBS


def _read_target(action: str, arguments: str) -> str | None:
    """What a call reads (a file, or the call itself for a read tool); ``None`` for a call that does not read."""
    if is_shell(action, arguments):
        parsed = json_arguments(arguments)
        command = str(parsed.get("command", "")) if parsed else arguments
        for words in command_segments(command):
            program = words[0].rsplit("/", 1)[-1]
            files = [w.strip("'\"") for w in words[1:] if not w.startswith("-") and not w[:1].isdigit()]
            if program == "sed" and "-n" in words[1:3]:
                files = files[1:]  # the range expression
            if (program in _READERS or (program == "sed" and "-n" in words[1:3])) and files:
                return "file:" + files[-1]
        return None
    parsed = json_arguments(arguments)
    if parsed is not None and parsed.get("command") == "view" and isinstance(parsed.get("path"), str):
        return "file:" + str(parsed["path"])
    if _first_word(action) in _READ_VERBS:
        return "call:" + action + ":" + _SPACE.sub(" ", arguments[:_ARG_VIEW])
    return None


def _runs_tests(action: str, arguments: str) -> bool:
    if not is_shell(action, arguments):
        return False
    parsed = json_arguments(arguments)
    command = str(parsed.get("command", "")) if parsed else arguments
    command = command[:_ARG_VIEW]
    if _TEST_MODULES.search(command) or _TEST_TOOLS.search(command):
        return True
    return any(words[0].rsplit("/", 1)[-1] in _TEST_PROGRAMS for words in command_segments(command))


#: A command that runs code: ``python script.py``, ``python -c ...``, ``python -m module`` (not pip).
_RUNS_PYTHON = re.compile(r"^(?:python3?(?:\.\d+)?|pypy3?)$")


def runs_check(action: str, arguments: str) -> bool:
    """Whether a call checks the work: it runs the tests (a *test run*) or runs code (``python script.py``,
    ``python -c``, ``python -m`` anything but pip)."""
    if _runs_tests(action, arguments):
        return True
    if not is_shell(action, arguments):
        return False
    parsed = json_arguments(arguments)
    command = str(parsed.get("command", "")) if parsed else arguments
    for words in command_segments(command):
        if _RUNS_PYTHON.match(words[0].rsplit("/", 1)[-1]) and len(words) > 1:
            target = words[2] if words[1] == "-m" and len(words) > 2 else words[1]
            if target not in {"pip", "-V", "--version"}:
                return True
    return False


def return_code(observation: str) -> int | None:
    """The exit code an observation reports (``<returncode>1</returncode>``, ``exit code: 1``), if any."""
    found = _RETURN_CODE.search(observation)
    return int(found.group(1)) if found else None


def observation_fails(step: ScorerStep) -> bool:
    """Whether a call's result is a failure (module docstring: a *failing observation*)."""
    if step.error:
        return True
    seen = step.observation or ""
    code = return_code(seen)
    if code is not None and code != 0:
        return True
    return _TRACEBACK in seen or seen.lstrip()[:5].lower() == "error"


def is_refusal(thought: str) -> bool:
    """Whether a text-only turn declines what was asked (module docstring: a *refusal*)."""
    return bool(_REFUSAL.search(thought[:_ARG_VIEW]))


class _BoundedKeys:
    """The last :data:`KEYS_KEPT` distinct keys (a dict keeps insertion order: the oldest go first)."""

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: dict[str, None] = {}

    def seen_then_add(self, key: str) -> bool:
        keys = self._keys
        seen = key in keys
        if seen:
            del keys[key]  # refreshed: now the newest
        elif len(keys) >= KEYS_KEPT:
            del keys[next(iter(keys))]
        keys[key] = None
        return seen


class DriftScore:
    """How alike a step's thought is to the last ``window`` thoughts: the largest cosine similarity of their
    embeddings (1: the agent is writing what it wrote before; 0 before a second thought). ``embed`` maps a
    text to a vector; ``rb_otel.backends.embeddings`` gives one that runs a small sentence model on the CPU
    (the optional ``[drift]`` extra). Kept out of the default pilot: docs/signal.md has its cost per step."""

    __slots__ = ("_embed", "_recent", "_window")

    def __init__(self, embed: Callable[[str], Sequence[float]], window: int = 3) -> None:
        self._embed = embed
        self._window = window
        self._recent: list[Sequence[float]] = []

    def add(self, thought: str) -> float:
        """Fold in one thought; its drift value (the largest similarity to the last ``window``)."""
        if not thought.strip():
            return 0.0
        vector = self._embed(thought)
        best = max((_cosine(vector, earlier) for earlier in self._recent), default=0.0)
        self._recent.append(vector)
        if len(self._recent) > self._window:
            del self._recent[0]
        return best


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm > 0 else 0.0


class ProgressTracker:
    """One run's progress aggregates: :meth:`add` once per step, in order, then :meth:`values` (in the order of
    :data:`PROGRESS_FEATURES`). The plain definitions are the module's rules, applied to the steps so far."""

    __slots__ = (
        "_calls",
        "_changes",
        "_drift",
        "_drift_value",
        "_fail_streak",
        "_fails",
        "_last_refusal",
        "_read_keys",
        "_reads",
        "_refusal_repeats",
        "_refusals",
        "_repeat_streak",
        "_repeats",
        "_rereads",
        "_seen_calls",
        "_since_change",
        "_steps",
        "_test_state",
        "_tests",
    )

    def __init__(self, drift: DriftScore | None = None) -> None:
        self._steps = self._calls = self._changes = self._since_change = 0
        self._repeats = self._repeat_streak = self._fails = self._fail_streak = 0
        self._tests = self._test_state = self._reads = self._rereads = 0
        self._refusals = self._refusal_repeats = 0
        self._last_refusal = False
        self._seen_calls = _BoundedKeys()
        self._read_keys = _BoundedKeys()
        self._drift = drift
        self._drift_value = 0.0

    def add(self, step: ScorerStep) -> None:
        """Fold one step in."""
        self._steps += 1
        if self._drift is not None:
            self._drift_value = self._drift.add(step.thought or "")
        action = step.action
        if action is None:
            refused = is_refusal(step.thought or "")
            if refused:
                self._refusals += 1
                self._refusal_repeats += self._last_refusal
            self._last_refusal = refused
            self._since_change += 1
            return
        self._last_refusal = False
        self._calls += 1
        arguments = step.action_input or ""
        if call_writes(action, arguments):
            self._changes += 1
            self._since_change = 0
        else:
            self._since_change += 1
        key = action + "\x00" + _DIGITS.sub("0", _SPACE.sub(" ", arguments[:_ARG_VIEW]).strip())
        if self._seen_calls.seen_then_add(key):
            self._repeats += 1
            self._repeat_streak += 1
        else:
            self._repeat_streak = 0
        failing = observation_fails(step)
        self._fails += failing
        self._fail_streak = self._fail_streak + 1 if failing else 0
        if _runs_tests(action, arguments):
            self._tests += 1
            seen = step.observation or ""
            code = return_code(seen)
            failed = code != 0 if code is not None else bool(step.error or _TEST_FAILED.search(seen))
            self._test_state = 1 if failed else -1
        target = _read_target(action, arguments)
        if target is not None:
            self._reads += 1
            self._rereads += self._read_keys.seen_then_add(target)

    def values(self) -> list[float]:
        """The signals after the steps so far, in the order of :data:`PROGRESS_FEATURES`."""
        steps, calls = max(self._steps, 1), max(self._calls, 1)
        return [
            math.log1p(self._since_change),
            self._changes / steps,
            self._repeats / calls,
            math.log1p(self._repeat_streak),
            math.log1p(self._fail_streak),
            self._fails / calls,
            math.log1p(self._tests),
            float(self._test_state),
            self._rereads / self._reads if self._reads else 0.0,
            math.log1p(self._refusals),
            math.log1p(self._refusal_repeats),
            self._drift_value,
        ]
