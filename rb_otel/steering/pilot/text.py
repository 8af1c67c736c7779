"""What a fitted pilot reads of a step's text: tokens of what the agent did and saw, hashed into buckets.

In the spirit of PrefixGuard (arXiv 2605.06455: hashed prefix features and a small CPU-sized scorer), a step
gives a handful of tokens (:func:`step_tokens`):

* ``act:<tool>`` the tool it called (``act:none`` for a text-only turn), ``repeat`` when the call repeats one of
  the last five, ``err`` when its result was an error, ``errtype:<kind>`` for a harness error;
* for a shell command, ``cmd:<program>`` per command in a pipeline (``cd``, ``sed``, ``python``, ``pytest``);
  for structured arguments, ``arg:<key>`` per key;
* of what it saw (the bounded view of the observation a scorer gets: its head and tail), ``rc:<code>`` (exit codes),
  ``exc:<ErrorClass>`` (error and exception class names) and ``obs:<word>`` per distinct word (letters and
  ``_`` only, so ids and numbers, which name one task, are left out).

Thoughts are not read: what an agent writes mostly restates its task. A token's bucket is its CRC-32 masked to
``bits`` bits; a model keeps weights only for the buckets it learned (bounded memory), and
:class:`TextScore` keeps a run's running contribution with a dict update per token.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterable, Mapping

from rb_otel.steering.scoring.protocol import ScorerStep

__all__ = ["TEXT_VALUES", "TextScore", "bucket", "step_tokens", "text_value"]

#: How a bucket's count in the prefix becomes its feature value: ``log`` = log1p(count), ``tf`` = count / steps.
TEXT_VALUES = ("log", "tf")
_SHELL_TOOLS = frozenset({"bash", "shell", "sh", "terminal", "run_command", "execute_bash", "cmd", "run_shell"})
_WORD = re.compile(r"\b[a-z_]{3,24}\b")  # whole words of letters and _: "user_4417" and "zx9k1" are left out
_ERROR_CLASS = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Exit|Failure))\b")
_RETURN_CODE = re.compile(r"(?:<returncode>|exit code:?|exit status:?|returncode[=:])\s*(-?\d+)", re.IGNORECASE)
_SEGMENT = re.compile(r"&&|\|\||[|;\n]")
_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]{0,30})"\s*:')
_WRAPPERS = frozenset({"sudo", "timeout", "env", "time", "nohup", "xargs"})


def _programs(command: str) -> list[str]:
    out = []
    for segment in _SEGMENT.split(command[:4000]):
        words = segment.split()
        while words and (words[0] in _WRAPPERS or "=" in words[0] or words[0][:1].isdigit()):
            words = words[1:]  # `timeout 60 python`, `FOO=1 make`
        if words:
            out.append(words[0].rsplit("/", 1)[-1][:24])
    return out


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
            tokens += [f"cmd:{p}" for p in _programs(arguments)]
    seen = step.observation  # already a bounded view: its head and tail (step_scoring.OBSERVATION_VIEW)
    if seen:
        tokens += [f"rc:{code}" for code in _RETURN_CODE.findall(seen)[:2]]
        tokens += [f"exc:{name}" for name in dict.fromkeys(_ERROR_CLASS.findall(seen))]
        tokens += [f"obs:{word}" for word in dict.fromkeys(_WORD.findall(seen.lower()))]
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
