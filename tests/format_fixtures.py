"""The hand-written fixtures in ``tests/fixtures/formats`` (README there: ours, written for the tests, one quirk
list per file): their paths, and io_harness stores built from their SQL scripts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["FORMAT_FIXTURES", "fixture", "io_harness_store"]

FORMAT_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "formats"


def fixture(relative: str) -> Path:
    """``tests/fixtures/formats/<relative>``; a missing fixture is an error, never a skip (they ship with the tree)."""
    path = FORMAT_FIXTURES / relative
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such hand-written fixture (tests/fixtures/formats/README.md lists them)")
    return path


def io_harness_store(script: str, path: Path) -> Path:
    """An io_harness SQLite store at ``path``, built by the fixture SQL script ``io_harness/<script>``."""
    connection = sqlite3.connect(path)
    try:
        connection.executescript(fixture(f"io_harness/{script}").read_text(encoding="utf-8"))
        connection.commit()
    finally:
        connection.close()
    return path
