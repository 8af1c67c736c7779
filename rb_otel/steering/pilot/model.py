"""The pilot's model file: logistic weights over the pilot's features, the prior baseline and the FSM preset.

The versions:

* ``pilot/1`` (the shipped ``pilot_weights.json``): weights over the ten agent-relative features of
  :data:`FEATURES_V1`, trained by ``make pilot1-weights`` (``research/pilot1_weights.py``) on the development data;
* ``pilot/2`` (what ``rb-otel train`` writes for one agent): weights over :data:`FEATURES` (the same ten and
  three "beyond normal" size features) plus hashed text tokens (:mod:`rb_otel.steering.pilot.text`), fixed
  SLOW/SKIP thresholds chosen from the fit's own out-of-fold scores, and ``trained``: what it was trained on;
* ``pilot/3`` (a default fitted on several agents of one kind): the same file, the average of the model families,
  so its text weights come in more than one block, one per way of counting (``more_text``); none is shipped now;
* ``pilot/size`` (each kind's shipped default, :func:`size_default`): no fitted weight, the run size
  (:func:`run_size`) or the agent-relative size (:func:`agent_relative_size`), whichever the ship rule kept for
  the kind, written by ``make held-out`` with the kind's typical run as its prior.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rb_otel.steering.pilot.kinds import CODING, CUSTOMER_SERVICE
from rb_otel.steering.pilot.progress import PROGRESS_FEATURES
from rb_otel.steering.pilot.text import TEXT_VALUES

__all__ = [
    "DEFAULT_FOR_KIND",
    "FEATURES",
    "FEATURES_V1",
    "MODEL_FORMAT",
    "PILOT_NAME",
    "PILOT_SIZE",
    "PILOT_V2",
    "PILOT_V3",
    "RUN_SIZE_FEATURES",
    "SIGNED_FEATURES",
    "SIZE_DEFAULTS",
    "SIZE_FEATURES",
    "PilotModel",
    "TextWeights",
    "agent_relative_size",
    "run_size",
    "size_default",
]

#: ``rb.scorer`` of the shipped model (the version changes when the features or their meaning change).
PILOT_NAME = "pilot/1"
#: ``rb.scorer`` of a model fitted by ``rb-otel train``.
PILOT_V2 = "pilot/2"
#: ``rb.scorer`` of a kind's default fitted on several agents of that kind (:data:`DEFAULT_FOR_KIND`).
PILOT_V3 = "pilot/3"
#: ``rb.scorer`` of a size default (:func:`size_default`): no fitted weights, the default of a kind whose learned
#: default does not clear the cold-start floor on harnesses it never saw.
PILOT_SIZE = "pilot/size"
#: What the agent-relative size adds up: how far past this agent's finished runs the run already is in steps,
#: characters written and its largest call (each the share of the agent's runs that had ended with less).
SIZE_FEATURES: tuple[str, ...] = ("overrun_steps", "overrun_chars", "overrun_context")
#: The format of a pilot/2 or pilot/3 file.
MODEL_FORMAT = "rb-otel pilot model/2"

#: The model ``scorer="pilot"`` uses for each kind of agent (:mod:`rb_otel.steering.pilot.kinds`), a file of this
#: package. A learned default must clear the cold-start floor on every agent of every harness left out of its fit
#: (docs/signal.md, "A default pilot per kind"); where none does, the kind's default is the size default of
#: :data:`SIZE_DEFAULTS` that meets the floor on more left-out agents (:func:`size_default`, with the kind's typical
#: run as its prior). Measured this round: no learned default clears it in either kind; customer service's default
#: is the run size, coding's the agent-relative size.
DEFAULT_FOR_KIND: Mapping[str, str] = {
    CODING: "pilot_size_coding.json",
    CUSTOMER_SERVICE: "pilot_size_customer_service.json",
}
_SHIPPED = "pilot_weights.json"

#: The shipped model's inputs, in order. Each is computed from the run's steps so far and the agent's baseline.
FEATURES_V1: tuple[str, ...] = (
    "overrun_steps",  # share of the agent's normal runs that had already ended by this step
    "overrun_chars",  # the same for the characters written so far (thoughts and action inputs)
    "overrun_context",  # share of the agent's normal runs whose largest call (tokens) was smaller (else: chars)
    "overrun_hedges",  # ... that had ended with fewer hedging words than this run has written so far
    "overrun_errors",  # ... that had ended with fewer error results than this run has had so far
    "verbosity",  # log characters per step, minus the agent's normal
    "error_excess",  # share of steps whose result was an error, minus the agent's normal (shrunk early on)
    "repeat_excess",  # share of actions repeating one of the last five, minus the agent's normal
    "hedging_excess",  # hedging words per word of thought, minus the agent's normal
    "recent_errors",  # share of the last three steps that were errors
)
#: Every size and rate feature the pilot computes: the shipped ten; unbounded where those saturate at 1, how far
#: beyond the agent's median run this one already is (log ratio, 0 below it: what stops the longest runs); and
#: how fast its context grows (log tokens per step, minus the agent's normal: what warns early).
FEATURES: tuple[str, ...] = (
    *FEATURES_V1,
    "beyond_steps",
    "beyond_chars",
    "beyond_context",
    "context_rate",
    # The same-prefix size signals themselves (log1p of the steps so far, the characters written so far, the largest
    # call so far in tokens, else the characters): what a fit must at least match, in whichever direction it
    # points, so their weights have either sign (``rb-otel train``; docs/signal.md, "Never below a size baseline").
    "size_steps",
    "size_chars",
    "size_context",
    # Whether the run is making progress (rb_otel.steering.pilot.progress; docs/signal.md, "Progress signals"):
    # not its size, but whether it still changes things, repeats itself, keeps failing, passes its tests.
    *PROGRESS_FEATURES,
)
#: The features whose weight may be negative in a fit (the others: "more than normal is never evidence of health").
#: The progress signals are signed too: a passing test run (``test_state`` -1) or a high ``change_share`` may
#: point either way on an agent's runs, and the fit follows the data.
SIGNED_FEATURES: frozenset[str] = frozenset({"size_steps", "size_chars", "size_context", *PROGRESS_FEATURES})


@dataclass(frozen=True, slots=True)
class TextWeights:
    """Weights of hashed text buckets: ``value`` says how a bucket's count becomes its feature."""

    bits: int
    value: str
    weights: Mapping[int, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "bits": self.bits,
            "value": self.value,
            "weights": {str(b): round(w, 6) for b, w in sorted(self.weights.items())},
        }


@dataclass(frozen=True, slots=True)
class PilotModel:
    """Logistic weights over ``features`` (a subsequence of :data:`FEATURES`) and, optionally, text buckets;
    the prior baseline of an agent with no finished runs; the FSM preset."""

    intercept: float
    weights: tuple[float, ...]
    prior: Mapping[str, float]
    fsm: Mapping[str, float]
    version: str = PILOT_NAME
    features: tuple[str, ...] = FEATURES_V1
    text: TextWeights | None = None
    #: Further text blocks, each with its own ``value`` (an average of families counts tokens both ways).
    more_text: tuple[TextWeights, ...] = ()
    trained: Mapping[str, Any] = field(default_factory=dict)
    skip: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.weights) != len(self.features):
            raise ValueError(f"{len(self.weights)} weights for {len(self.features)} features")
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature(s) {', '.join(unknown)}")

    @property
    def text_blocks(self) -> tuple[TextWeights, ...]:
        """Every block of text weights: ``text`` (when there is one), then ``more_text``. The logit adds them all."""
        return (*(() if self.text is None else (self.text,)), *self.more_text)

    @property
    def columns(self) -> tuple[int, ...]:
        """Where each of ``features`` is in :data:`FEATURES`."""
        return tuple(FEATURES.index(f) for f in self.features)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "pilot weights") -> PilotModel:
        """A model from its JSON mapping; ``ValueError`` naming ``source`` and the problem otherwise."""
        try:
            version = str(data.get("version", PILOT_NAME))
            features = tuple(str(f) for f in data.get("features", FEATURES_V1))
            weights = data["weights"]
            dense = weights.get("dense", weights) if version != PILOT_NAME else weights
            missing = [f for f in features if f not in dense]
            if missing:
                raise ValueError(f"missing weight(s) {', '.join(missing)}")
            text = weights.get("text") if version != PILOT_NAME else None
            more_text = weights.get("more_text", []) if version != PILOT_NAME else []
            if not isinstance(more_text, list):
                raise ValueError("more_text is not a list of text blocks")
            return cls(
                intercept=float(data["intercept"]),
                weights=tuple(float(dense[f]) for f in features),
                prior={k: float(v) for k, v in data["prior"].items()},
                fsm={k: float(v) for k, v in data.get("fsm", {}).items()},
                version=version,
                features=features,
                text=None if text is None else _text_weights(text),
                more_text=tuple(_text_weights(block) for block in more_text),
                trained=dict(data.get("trained", {})),
                skip={k: float(v) for k, v in data.get("skip", {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{source}: not a pilot model ({exc})") from None

    @classmethod
    def load(cls, path: str | Path | None = None) -> PilotModel:
        """The shipped model, or the one in ``path`` (``rb-otel train``'s JSON, or ``make pilot1-weights``')."""
        if path is None:
            return cls._shipped(_SHIPPED)
        try:
            raw = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{path}: cannot read the pilot model ({exc.strerror or exc})") from None
        except UnicodeDecodeError:  # a binary file: its name, not a bare codec error
            raise ValueError(f"{path}: not a pilot model (not UTF-8 text: a binary file?)") from None
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not a pilot model (the top level is not an object)")
        return cls.from_mapping(data, source=str(path))

    @classmethod
    def default_for(cls, kind: str) -> PilotModel:
        """The default model for agents of ``kind`` (:data:`DEFAULT_FOR_KIND`); the shipped pilot/1 for a kind
        not known (``""``: not inferred)."""
        return cls._shipped(DEFAULT_FOR_KIND.get(kind, _SHIPPED))

    @classmethod
    def _shipped(cls, name: str) -> PilotModel:
        text = resources.files("rb_otel.steering.pilot").joinpath(name).read_text(encoding="utf-8")
        return cls.from_mapping(json.loads(text), source=f"rb_otel/steering/pilot/{name}")

    def as_dict(self) -> dict[str, Any]:
        """The JSON mapping ``from_mapping`` reads back (a pilot/2 file when the model has text or metadata)."""
        dense = {f: round(w, 9) for f, w in zip(self.features, self.weights, strict=True)}
        out: dict[str, Any] = {"version": self.version}
        if self.version != PILOT_NAME:
            out["format"] = MODEL_FORMAT
        out["trained"] = dict(self.trained)
        out["features"] = list(self.features)
        out["intercept"] = round(self.intercept, 9)
        out["weights"] = {"dense": dense, **({"text": self.text.as_dict()} if self.text else {})}
        if self.more_text:
            out["weights"]["more_text"] = [block.as_dict() for block in self.more_text]
        out["prior"] = {k: round(v, 6) for k, v in self.prior.items()}
        out["fsm"] = dict(self.fsm)
        out["skip"] = dict(self.skip)
        return out

    def logit(self, dense: Sequence[float], text: float = 0.0) -> float:
        """The model's log-odds for the features ``dense`` (all of :data:`FEATURES`, in order) and the text
        contribution ``text``."""
        return self.intercept + text + sum(w * dense[c] for w, c in zip(self.weights, self.columns, strict=True))

    def probability(self, features: Sequence[float]) -> float:
        """The probability for ``features`` given in the order of ``self.features`` (no text)."""
        z = self.intercept + sum(w * f for w, f in zip(self.weights, features, strict=True))
        return sigmoid(z)


#: The features of :func:`run_size`: the same-prefix sizes themselves (log steps, characters and context so far).
RUN_SIZE_FEATURES: tuple[str, ...] = ("size_steps", "size_chars", "size_context")
#: The two label-free size defaults a kind can ship (``trained["size"]`` of their files): the ship rule keeps, per
#: kind, the one that clears the cold-start floor on more left-out harnesses (docs/signal.md).
SIZE_DEFAULTS = ("agent-relative", "run")

#: Relative to the agent once it has runs: SLOW is the sustained score above the 0.85 quantile of what its earlier
#: runs reached (longer and heavier than 85% of its runs ended), SKIP off, FAST never.
_SIZE_FSM: Mapping[str, float] = {
    "fast_threshold": 0.0,  # a short run so far is no sign of an easy one: never FAST
    "slow_threshold": 0.8,
    "skip_threshold": 1.0,
    "hysteresis_margin": 0.05,
    "fast_window": 6,
    "slow_window": 3,
    "skip_window": 8,
    "slow_quantile": 0.85,
}


def agent_relative_size(prior: Mapping[str, float], *, trained: Mapping[str, Any] | None = None) -> PilotModel:
    """The agent-relative size as a model: the mean of :data:`SIZE_FEATURES` (each the share of this agent's
    finished runs, requests weighing alike, that had ended with less than this run has now; the prior's
    exponential before the agent has runs) on a logit scale, no fitted weight; SLOW relative to the agent (the
    sustained score above the 0.85 quantile of what its earlier runs reached: longer and heavier than 85% of its
    runs ended), SKIP off, FAST never. ``prior``: what a new agent's runs are expected to add up to."""
    return _size_model("agent-relative", SIZE_FEATURES, (2.0, 2.0, 2.0), intercept=-3.0, prior=prior, trained=trained)


def run_size(prior: Mapping[str, float], *, trained: Mapping[str, Any] | None = None) -> PilotModel:
    """The run's own size as a model: the sum of :data:`RUN_SIZE_FEATURES` (log steps, characters and largest
    call so far, the characters where a harness reports no tokens), each less its value for the kind's typical run
    (the ``prior``'s medians), so a run of that size scores 0.5; no fitted weight. At a given step it ranks runs
    as the sizes themselves do, with no tie and from the agent's first run, where the agent-relative size ties every
    run still short of all the agent's finished ones. States as :func:`agent_relative_size`'s: SLOW relative to the
    agent (above what 85% of its earlier runs reached), SKIP off, FAST never."""
    typical = (float(prior.get(f"median_{name}", 0.0)) for name in ("steps", "chars", "context"))
    centre = sum(math.log1p(max(0.0, value)) for value in typical)
    return _size_model("run", RUN_SIZE_FEATURES, (1.0, 1.0, 1.0), intercept=-centre, prior=prior, trained=trained)


def size_default(which: str, prior: Mapping[str, float], *, trained: Mapping[str, Any] | None = None) -> PilotModel:
    """The label-free size default ``which`` (one of :data:`SIZE_DEFAULTS`) with ``prior``."""
    if which not in SIZE_DEFAULTS:
        raise ValueError(f"size default {which!r}: one of {', '.join(SIZE_DEFAULTS)}")
    return (agent_relative_size if which == "agent-relative" else run_size)(prior, trained=trained)


def _size_model(
    size: str,
    features: tuple[str, ...],
    weights: tuple[float, ...],
    *,
    intercept: float,
    prior: Mapping[str, float],
    trained: Mapping[str, Any] | None,
) -> PilotModel:
    """A size default: no fitted weight, the states of :data:`_SIZE_FSM`, ``trained["size"]`` naming it."""
    return PilotModel(
        intercept=intercept,
        weights=weights,
        prior=dict(prior),
        fsm=dict(_SIZE_FSM),
        version=PILOT_SIZE,
        features=features,
        trained={"size": size, **(trained or {})},
    )


def sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _text_weights(data: Mapping[str, Any]) -> TextWeights:
    bits = int(data["bits"])
    value = str(data["value"])
    if not 4 <= bits <= 24 or value not in TEXT_VALUES:
        raise ValueError(f"text weights: bits {bits} (4-24) and value {value!r} ({' or '.join(TEXT_VALUES)})")
    weights = {int(b): float(w) for b, w in data["weights"].items()}
    if any(not 0 <= b < (1 << bits) for b in weights):
        raise ValueError(f"text weights: a bucket outside 0..{(1 << bits) - 1}")
    return TextWeights(bits, value, weights)
