"""Model prices for the experiment report: USD per million tokens, input / output / cache-read, per model.

A price file is JSON: ``{"claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cache_read": 0.3}, ...}``. A model
is matched by its exact name, else by the longest price key it starts with (``gpt-4o`` prices
``gpt-4o-2024-08-06``), ignoring any ``provider:`` prefix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ModelPrice", "Prices", "load_prices"]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    input: float
    output: float
    cache_read: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0) -> float:
        """The USD cost of one call (cache reads are priced separately from, and are not part of, input)."""
        return (input_tokens * self.input + output_tokens * self.output + cache_read_tokens * self.cache_read) / 1e6


class Prices:
    """A price table; :meth:`of` finds a model's price (``None`` when it has none)."""

    def __init__(self, table: Mapping[str, ModelPrice]) -> None:
        self._table = dict(table)
        self._by_length = sorted(self._table, key=len, reverse=True)

    def of(self, model: str) -> ModelPrice | None:
        name = model.split(":", 1)[1] if ":" in model else model
        if name in self._table:
            return self._table[name]
        for key in self._by_length:
            if name.startswith(key):
                return self._table[key]
        return None


def load_prices(path: str | Path) -> Prices:
    """Read a price file; a bad one raises ``ValueError`` naming the file, the model and the problem."""
    source = Path(path)
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{source}: cannot read the price file ({exc})") from None
    except UnicodeDecodeError:  # a binary file: its name, not a bare codec error
        raise ValueError(f"{source}: not a price file (not UTF-8 text: a binary file?)") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{source}: expected an object of model -> {{input, output, cache_read}}")
    table = {}
    for model, entry in raw.items():
        if not isinstance(entry, dict) or not {"input", "output"} <= set(entry):
            raise ValueError(f"{source}: {model!r}: expected {{'input': ..., 'output': ...[, 'cache_read': ...]}}")
        values = {k: entry.get(k, 0.0) for k in ("input", "output", "cache_read")}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{source}: {model!r}: {key} must be a non-negative number of USD per 1M tokens")
        table[str(model)] = ModelPrice(float(values["input"]), float(values["output"]), float(values["cache_read"]))
    return Prices(table)
