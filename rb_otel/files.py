"""Writing a file whole or not at all: the one atomic writer (a reader never sees half a model or a report)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (its folder made if needed) through a temporary file beside it, named for this
    process so concurrent writers never share one, then renamed over ``path`` in one step."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path
