"""What every format reader shares: JSON and JSON-lines files read with located errors, and the coercions of a
record's fields (text, integers, timestamps, a kept view of an observation)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from rb_otel.importers.model import ImportProblem, RecordError
from rb_otel.steering.text import bounded_view

__all__ = [
    "OBSERVATION_KEPT",
    "as_int",
    "dump",
    "iso_seconds",
    "json_lines",
    "load_json",
    "observation",
    "remember_document",
    "text",
]

#: What an imported step keeps of a long observation: its head and tail (a scorer reads a smaller view of them).
OBSERVATION_KEPT = (2000, 2000)


def observation(value: str | None) -> str | None:
    """The part of a tool result or reply an imported step keeps; ``None`` for nothing."""
    return bounded_view(value, *OBSERVATION_KEPT) if value else None


# The document format detection parsed last, on this thread: the reader that follows takes it instead of parsing
# the file again (a trajectory is read twice otherwise). Keyed by the file's path, size and modification time.
_last = threading.local()


def remember_document(path: Path, document: Any) -> None:
    """Keep ``document`` (``path`` parsed) for the next :func:`load_json` of the same, unchanged file."""
    _last.entry = (_file_key(path), document)


def _file_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return str(path), stat.st_size, stat.st_mtime_ns


def load_json(path: Path) -> Any:
    """The JSON document in ``path`` (the one detection just parsed, when it is that unchanged file);
    :class:`RecordError` naming the place and the problem when it is none (an empty file, text that is not JSON or
    not UTF-8)."""
    remembered = getattr(_last, "entry", None)
    _last.entry = None
    if remembered is not None:
        try:
            if remembered[0] == _file_key(path):
                return remembered[1]
        except OSError:
            pass
    try:
        text = path.read_text(encoding="utf-8")
        if not text.strip():
            raise RecordError(str(path), "file", "empty: no records in it")
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(str(path), f"line {exc.lineno} column {exc.colno}", f"not valid JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise RecordError(str(path), f"byte {exc.start}", "not UTF-8 text") from None


#: How much of a JSON lines file is looked at for a NUL byte: a binary file is one error, not a problem per "line".
_BINARY_SNIFF = 1 << 16


def json_lines(path: Path, problems: list[ImportProblem]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each line holding a JSON object; bad lines become problems, not errors. A
    binary file raises :class:`RecordError` (before the first line is read)."""
    with path.open("rb") as raw:
        if b"\x00" in raw.read(_BINARY_SNIFF):
            raise RecordError(str(path), "format", "a binary file, not JSON lines")
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(ImportProblem(str(path), f"line {number}", f"not valid JSON ({exc.msg})"))
                continue
            if not isinstance(value, dict):
                problems.append(ImportProblem(str(path), f"line {number}", "expected a JSON object"))
                continue
            yield number, value


def text(value: Any) -> str:
    """Message content as text: strings as is, lists of blocks joined, anything else JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [b.get("text", "") if isinstance(b, dict) else str(b) for b in value]
        return " ".join(p for p in parts if p)
    return dump(value)


def dump(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def as_int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return default


def iso_seconds(value: Any) -> float | None:
    """Seconds since the epoch for an ISO-8601 timestamp (``Z`` or offset or naive UTC), else ``None``."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        from datetime import UTC

        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
