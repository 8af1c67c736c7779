"""tau2-bench results files of the voice-era runner: ``{timestamp, info, tasks, simulations, simulation_index}``.

The layout differs from ``tau2_bench`` in what a simulation may hold: a ``mode`` (``half_duplex`` turns, or
``full_duplex`` with the conversation in ``ticks``), and messages with streaming and audio fields. Here:

- a message streamed in chunks (``is_final_chunk: false`` on every chunk but the last) is one message: the
  chunks' text joined, their tool calls together, the last chunk's other fields;
- an audio message without text (``is_audio`` with ``content: null``) has its ``audio_script_gold`` as text when
  the file kept it;
- a full-duplex simulation without ``messages`` is a problem (listed), not a run: its ticks are not turns.

Everything else (runs, outcome, agent) is :mod:`rb_otel.importers.formats.tau2_common`'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import load_json, text
from rb_otel.importers.formats.tau2_common import simulation_runs, simulations
from rb_otel.importers.model import ImportedRun, ImportProblem

__all__ = ["joined_chunks", "read"]


def joined_chunks(messages: list[Any]) -> list[Any]:
    """The messages with each streamed message's chunks joined into one (module docstring)."""
    out: list[Any] = []
    pending: list[dict[str, Any]] = []
    for raw in messages:
        if not isinstance(raw, dict):
            out.append(raw)
            continue
        message = raw
        if raw.get("content") is None and raw.get("is_audio") and raw.get("audio_script_gold"):
            message = {**raw, "content": raw["audio_script_gold"]}
        if pending and message.get("role") != pending[0].get("role"):
            out.append(_merged(pending))  # a stream the file never finished: what it has is the message
            pending = []
        if message.get("is_final_chunk") is False:
            pending.append(message)
            continue
        if pending:
            out.append(_merged([*pending, message]))
            pending = []
        else:
            out.append(message)
    if pending:
        out.append(_merged(pending))
    return out


def _merged(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    calls = [call for chunk in chunks for call in chunk.get("tool_calls") or []]
    content = "".join(text(chunk.get("content")) for chunk in chunks)
    return {**chunks[-1], "content": content or None, "tool_calls": calls or None}


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    found = simulations(path, data, problems, prepare=joined_chunks)
    yield from simulation_runs(path, data, problems, source="tau2_indexed", simulations=found)
