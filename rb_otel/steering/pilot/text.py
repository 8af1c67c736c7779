"""What a fitted pilot reads of a step's text: tokens of what the agent did and saw, hashed into buckets.

In the spirit of PrefixGuard (arXiv 2605.06455: hashed prefix features and a small CPU-sized scorer), a step
gives a handful of tokens (:func:`step_tokens`):

* ``act:<tool>`` the tool it called (``act:none`` for a text-only turn), ``repeat`` when the call repeats one of
  the last five, ``err`` when its result was an error, ``errtype:<kind>`` for a harness error;
* for a shell command, ``cmd:<program>`` per command in a pipeline (``cd``, ``sed``, ``python``, ``pytest``);
  for structured arguments, ``arg:<key>`` per key;
* of what it saw (the bounded view of the observation a scorer gets: its head and tail), ``rc:<code>`` (exit codes),
  ``exc:<ErrorClass>`` (error and exception class names) and ``obs:<word>`` per distinct word.

**Nothing that names the benchmark.** A fitted default is meant for agents and code it never saw, so a token that
names what the agent works *on* (a repository, a package, a file, a task, a customer, a city) would be a prior of
the benchmark, not of the agent's behaviour (issue 60: SWE-bench repository names carried the largest weights).
So the words are kept only from a fixed vocabulary of behaviour (:data:`BEHAVIOUR_WORDS`: errors, failures,
retries, refusals and apologies, test outcomes, state changes), programs only from common shell and
build tools (:data:`PROGRAMS`; any other is ``cmd:other``: a script's or a repository's own tool is named by the
repository), exception classes only when Python defines them (any other, such as a package's ``FieldError``, is
``exc:other``). Ids and numbers never become tokens. :func:`normalise_text` puts placeholders for paths, URLs,
``owner/repo`` and dotted names, ids, hex and numbers: the key of a request (:mod:`rb_otel.steering.agent_keys`) is
built from it. Renaming a repository, its files or a customer leaves a run's tokens as they were (a test checks
the live score).

Thoughts are not read: what an agent writes mostly restates its task. A token's bucket is its CRC-32 masked to
``bits`` bits; a model keeps weights only for the buckets it learned (bounded memory), and
:class:`TextScore` keeps a run's running contribution with a dict update per token.
"""

from __future__ import annotations

import builtins
import math
import re
import zlib
from collections.abc import Iterable, Mapping

from rb_otel.steering.scoring.protocol import ScorerStep

__all__ = [
    "BEHAVIOUR_WORDS",
    "PROGRAMS",
    "TEXT_VALUES",
    "TextScore",
    "bucket",
    "normalise_text",
    "step_tokens",
    "text_value",
]

#: How a bucket's count in the prefix becomes its feature value: ``log`` = log1p(count), ``tf`` = count / steps.
TEXT_VALUES = ("log", "tf")
_SHELL_TOOLS = frozenset({"bash", "shell", "sh", "terminal", "run_command", "execute_bash", "cmd", "run_shell"})
_WORD = re.compile(r"\b[a-z_]{3,24}\b")  # whole words of letters and _: "user_4417" and "zx9k1" are left out
_ERROR_CLASS = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Exit|Failure))\b")
_RETURN_CODE = re.compile(r"(?:<returncode>|exit code:?|exit status:?|returncode[=:])\s*(-?\d+)", re.IGNORECASE)
_SEGMENT = re.compile(r"&&|\|\||[|;\n]")
_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]{0,30})"\s*:')
_WRAPPERS = frozenset({"sudo", "timeout", "env", "time", "nohup", "xargs"})

#: The words of an observation a token may be made of: what the agent's behaviour looks like (failing, retrying,
#: refusing, apologising, passing, changing state), in any domain; never what it works on (module docstring).
BEHAVIOUR_WORDS: frozenset[str] = frozenset(
    """
    error errors failed failure failures fail failing fatal exception exceptions traceback warning warnings
    deprecated denied permission forbidden unauthorized unauthorised refused invalid illegal unexpected unknown
    undefined unsupported missing cannot unable couldn could not no such exist exists already empty none null
    nothing timeout timed expired killed aborted abort interrupted terminated crashed crash hang retry retrying
    again conflict conflicting mismatch incorrect wrong broken corrupt violation exceeded exceeds insufficient
    limit syntax indentation unterminated unmatched expected got instead found did does doesn isn wasn passed
    pass passing passes success successful successfully succeeded ok okay done completed complete finished
    skipped xfail xfailed xpassed collected ran tests test assert assertion assertionerror usage help ignored
    ignoring created updated deleted removed modified changed unchanged applied reverted saved written wrote
    cancelled canceled confirmed approved rejected pending active inactive suspended enabled disabled available
    unavailable eligible ineligible allowed disallowed policy sorry apologize apologise apologies unfortunately
    regret transfer transferred human agent escalate escalated verify verified verification authenticate
    authenticated identity confirm please proceed would like anything else help true false yes
    modulenotfounderror importerror attributeerror typeerror valueerror keyerror indexerror nameerror
    syntaxerror indentationerror runtimeerror notimplementederror recursionerror permissionerror
    filenotfounderror zerodivisionerror stopiteration
    """.split()
)
#: Programs a ``cmd:`` token may name: shells, common Unix tools, interpreters, test runners, version control and
#: package managers. A repository's own script or tool (``runtests.py``, ``django-admin``) is ``cmd:other``.
PROGRAMS: frozenset[str] = frozenset(
    """
    cd ls cat head tail nl sed awk grep egrep rg find xargs echo printf wc sort uniq cut tr tee diff patch cmp
    cp mv rm mkdir rmdir touch chmod ln pwd which file stat du df env export source test true false sleep kill
    ps tar gzip unzip curl wget less more vi vim nano git python python3 python2 pip pip3 uv pytest tox nox
    unittest node npm npx yarn pnpm go cargo rustc gcc make cmake java javac mvn gradle ruby bundle perl php
    bash sh zsh apt apt-get conda jq perl5 docker submit
    """.split()
)
_BUILTIN_EXCEPTIONS = frozenset(
    n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)
)
# Placeholders for what names a task: URLs, paths, owner/repo, dotted names, ids with digits, hex, numbers.
_PLACEHOLDERS = (
    (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE), "<url>"),
    (re.compile(r"(?:~|\.{1,2})?(?:/[\w.@+-]+)+/?|\b[\w.-]+(?:/[\w.@+-]+)+"), "<path>"),
    (re.compile(r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b"), "<name>"),
    (re.compile(r"\b(?=\w*\d)(?=\w*[A-Za-z_])\w+\b"), "<id>"),
    (re.compile(r"\b\d+(?:\.\d+)*\b"), "<n>"),
)
_SPACE = re.compile(r"\s+")


def _programs(command: str) -> list[str]:
    out = []
    for segment in _SEGMENT.split(command[:4000]):
        words = segment.split()
        while words and (words[0] in _WRAPPERS or "=" in words[0] or words[0][:1].isdigit()):
            words = words[1:]  # `timeout 60 python`, `FOO=1 make`
        if words:
            program = words[0].rsplit("/", 1)[-1]
            out.append(program if program in PROGRAMS else "other")
    return out


def normalise_text(text: str, limit: int = 4000) -> str:
    """``text`` (its first ``limit`` characters) with what names a task replaced by placeholders (module
    docstring), lower case, whitespace collapsed: two requests that differ only in the repository, the file, the
    ids or the numbers they name come out the same."""
    out = text[:limit]
    for pattern, placeholder in _PLACEHOLDERS:
        out = pattern.sub(placeholder, out)
    return _SPACE.sub(" ", out).strip().lower()


def step_tokens(step: ScorerStep, *, repeated: bool = False) -> list[str]:
    """The tokens of one step (see the module docstring); ``repeated``: the call repeats a recent one."""
    action = step.action
    tokens = [f"act:{action or 'none'}"]
    if repeated:
        tokens.append("repeat")
    if step.error:
        tokens.append("err")
    arguments = step.action_input or ""
    if arguments:
        if arguments.lstrip()[:1] in ("{", "["):
            tokens += [f"arg:{key}" for key in dict.fromkeys(_KEY.findall(arguments[:4000]))]
        elif action is None or action.lower() in _SHELL_TOOLS or " " in arguments:
            tokens += [f"cmd:{p}" for p in dict.fromkeys(_programs(arguments))]
    seen = step.observation  # already a bounded view: its head and tail (step_scoring.OBSERVATION_VIEW)
    if seen:
        tokens += [f"rc:{code}" for code in _RETURN_CODE.findall(seen)[:2]]
        classes = (name if name in _BUILTIN_EXCEPTIONS else "other" for name in _ERROR_CLASS.findall(seen))
        tokens += [f"exc:{name}" for name in dict.fromkeys(classes)]
        tokens += [f"obs:{word}" for word in dict.fromkeys(_WORD.findall(seen.lower())) if word in BEHAVIOUR_WORDS]
    return tokens


def bucket(token: str, bits: int) -> int:
    """The token's bucket: its CRC-32 (stable across processes and versions) masked to ``bits`` bits."""
    return zlib.crc32(token.encode("utf-8", "surrogatepass")) & ((1 << bits) - 1)


def text_value(kind: str, count: int, steps: int) -> float:
    """A bucket's feature value after ``steps`` steps in which it was seen ``count`` times (the plain definition
    :class:`TextScore` keeps incrementally)."""
    return math.log1p(count) if kind == "log" else count / steps


class TextScore:
    """One run's text contribution to the logit, kept incrementally: ``add(tokens)`` once per step, in order,
    then ``value`` is ``sum(w[b] * text_value(kind, count[b], steps))`` over the model's buckets.

    Only buckets with a weight are counted, so memory is bounded by the model, not the run.
    """

    __slots__ = ("_bits", "_counts", "_kind", "_steps", "_sum", "_weights")

    def __init__(self, weights: Mapping[int, float], bits: int, kind: str) -> None:
        self._weights = weights
        self._bits = bits
        self._kind = kind
        self._counts: dict[int, int] = {}
        self._sum = 0.0  # log: the dot product itself; tf: sum of w * count (divided by steps when read)
        self._steps = 0

    def add(self, tokens: Iterable[str]) -> None:
        self._steps += 1
        weights, counts, bits, log = self._weights, self._counts, self._bits, self._kind == "log"
        for token in tokens:
            b = bucket(token, bits)
            w = weights.get(b)
            if w is None:
                continue
            c = counts.get(b, 0)
            counts[b] = c + 1
            self._sum += w * (math.log1p(c + 1) - math.log1p(c)) if log else w

    @property
    def value(self) -> float:
        if self._kind == "log" or self._steps == 0:
            return self._sum
        return self._sum / self._steps
