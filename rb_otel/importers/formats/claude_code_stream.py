"""The stream-json events of a Claude Code run (``claude -p --output-format stream-json --verbose``), read from the
JSON-lines file a user saves or from an asciinema recording of the terminal it ran in; the runs they make are
:mod:`rb_otel.importers.formats.claude_code`'s.

**A terminal recording** (asciicast v2 or v3: a header line, then ``[time, "o", text]`` events) is read by joining
its output events, splitting the text into lines and removing the terminal's escape sequences, carriage returns and
whatever the terminal printed before an event on its line (a shell prompt, the harness's logs between lines). Lines
the terminal wrapped are joined again; a line that still does not parse is a damaged event, listed as a problem and
passed over, never the end of the run. A recording in which Claude Code never wrote an event (it did not start)
holds no run. Each event carries the recording's time.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rb_otel.importers.detect import STREAM_TYPES, is_recording_header
from rb_otel.importers.formats.records import json_lines
from rb_otel.importers.model import ImportProblem, RecordError

__all__ = ["StreamEvent", "recording_events", "stream_events"]

# CSI sequences (colours, cursor moves, bracketed-paste switches), OSC strings (titles) and two-byte escapes.
_ESCAPES = re.compile(
    r"\x1b\[[0-9;?<=>!]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78DEHM]"
)
_EVENT_START = '{"type":'
_DECODER = json.JSONDecoder()
#: How many following lines a wrapped event is joined with, at most, before it counts as damaged.
_WRAP_LINES = 64


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One stream-json event: where it was read (for problems) and when (seconds since the epoch, when known)."""

    where: str
    time: float | None
    event: dict[str, Any]


def stream_events(path: Path, problems: list[ImportProblem]) -> Iterator[StreamEvent]:
    """The stream-json events of ``path``: a JSON-lines file, or a terminal recording (:func:`recording_events`)."""
    with path.open("rb") as handle:
        first = handle.readline(1 << 16)
    try:
        header = json.loads(first)
    except ValueError:
        header = None
    if is_recording_header(header):
        yield from recording_events(path, problems)
        return
    for number, obj in json_lines(path, problems):
        if obj.get("type") in STREAM_TYPES:
            yield StreamEvent(f"line {number}", None, obj)


def recording_events(path: Path, problems: list[ImportProblem]) -> Iterator[StreamEvent]:
    """The stream-json events in an asciicast recording's output (module docstring)."""
    output, offsets, times = _recording_output(path, problems)
    lines = output.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    i = 0
    while i < len(lines):
        cleaned = _clean(lines[i])
        at = cleaned.find(_EVENT_START)
        if at < 0:
            i += 1
            continue
        found, used = _parse_event(cleaned[at:], lines, i)
        when = times[bisect_right(offsets, starts[i]) - 1] if offsets else None
        where = f"output line {i + 1}"
        if found is None:
            problems.append(ImportProblem(str(path), where, "a damaged stream-json event (cut by the terminal); "
                                          "passed over"))  # fmt: skip
        elif found.get("type") in STREAM_TYPES:
            yield StreamEvent(where, when, found)
        i += used


def _recording_output(path: Path, problems: list[ImportProblem]) -> tuple[str, list[int], list[float]]:
    """The recording's output text joined, with the offset and the time (seconds since the epoch, or since the
    recording began when its header has no timestamp) at which each output event begins."""
    parts: list[str] = []
    offsets: list[int] = []
    times: list[float] = []
    size = 0
    # newline="\n": only a real newline ends a line (the output text may hold other line breaks, escaped or not)
    with path.open("r", encoding="utf-8", errors="replace", newline="\n") as handle:
        header = json.loads(handle.readline())
        if not is_recording_header(header):
            raise RecordError(str(path), "line 1", "not an asciicast v2 or v3 header")
        version = header["version"]
        clock = float(header["timestamp"]) if isinstance(header.get("timestamp"), int | float) else 0.0
        elapsed = 0.0
        for number, line in enumerate(handle, 2):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
                moment, code, data = float(event[0]), event[1], event[2]
            except (ValueError, TypeError, IndexError, KeyError):
                problems.append(ImportProblem(str(path), f"line {number}", "not an asciicast event; passed over"))
                continue
            elapsed = elapsed + moment if version == 3 else moment  # v3 records the interval since the last event
            if code != "o" or not isinstance(data, str):
                continue
            offsets.append(size)
            times.append(clock + elapsed)
            parts.append(data)
            size += len(data)
    return "".join(parts), offsets, times


def _clean(line: str) -> str:
    """A line of terminal output without escape sequences and carriage returns."""
    return _ESCAPES.sub("", line).replace("\r", "")


def _parse_event(start: str, lines: list[str], i: int) -> tuple[dict[str, Any] | None, int]:
    """The event that begins with ``start`` (line ``i``), joined with the lines the terminal wrapped it onto when
    it does not parse alone, and how many lines it took."""
    candidate = start
    for used in range(1, _WRAP_LINES + 2):
        found = _event(candidate)
        if found is not None:
            return found, used
        if i + used >= len(lines):
            break
        following = _clean(lines[i + used])
        at = following.find(_EVENT_START)
        if at >= 0 and (_event(following[at:]) or {}).get("type") in STREAM_TYPES:
            break  # the next event begins on that line: this one was cut, not wrapped
        candidate += following
    return None, 1


def _event(candidate: str) -> dict[str, Any] | None:
    """The JSON object ``candidate`` begins with (what the terminal printed after it on its line aside)."""
    try:
        found, _ = _DECODER.raw_decode(candidate)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None
