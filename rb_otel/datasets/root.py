"""Where the development records are: one data root for tests, research scripts and ``make`` targets.

The records other projects published (trajectories, result files, stores) are never part of this repository. A
checkout finds them, in this order:

1. ``RB_OTEL_DATA``, a folder, when the variable is set (a set variable that names no folder is an error, not a
   reason to look elsewhere);
2. ``../shared/data`` beside the repository (where the project's developers and CI have them);
3. ``data/`` in the repository, which ``make data`` writes from the records' public origins.

The layout is the same in all three: ``io_harness/``, ``openhands/``, ``swe_agent/``, ``tau_bench/`` and
``signal/``, where each signal source is a folder or a ``.tar.xz`` archive of that folder
(:func:`rb_otel.datasets.source_folder` reads either).

A folder counts only when it holds at least one source (:func:`holds_records`): ``make data`` puts a source in
place whole or not at all, so a ``data/`` that an interrupted or offline run left with nothing but work in progress
(``data/.partial/``) is not a data root, and the tests that need records skip, naming what to run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "DATA_ENV",
    "FETCH_COMMAND",
    "SOURCE_FOLDERS",
    "DataNotFound",
    "data_root",
    "find_data_root",
    "holds_records",
    "repository_root",
]

DATA_ENV = "RB_OTEL_DATA"
"""A folder holding the development records, in the layout of ``../shared/data`` (or of what ``make data``
writes). Takes precedence over the folders looked for by default."""

#: What gets the records on a machine that has none (the hint every "not found" message ends with).
FETCH_COMMAND = "make data"

#: The data root's sources outside ``signal/`` (each a folder); under ``signal/`` each is a folder or a ``.tar.xz``.
SOURCE_FOLDERS = ("io_harness", "openhands", "swe_agent", "tau_bench")
_ARCHIVE = ".tar.xz"


class DataNotFound(LookupError):
    """No development records where they were looked for; the message says where that was and what to run."""


def repository_root() -> Path | None:
    """The checkout this package is imported from, or ``None`` when it is installed from a wheel."""
    candidate = Path(__file__).resolve().parents[2]
    return candidate if (candidate / "pyproject.toml").is_file() and (candidate / "rb_otel").is_dir() else None


def _candidates() -> list[tuple[str, Path]]:
    repository = repository_root()
    if repository is None:
        return []
    return [
        ("the shared data beside the repository", repository.parent / "shared" / "data"),
        (f"`{FETCH_COMMAND}`'s folder", repository / "data"),
    ]


def holds_records(folder: Path) -> bool:
    """Whether ``folder`` holds at least one development source: one of :data:`SOURCE_FOLDERS`, or a folder or
    ``.tar.xz`` under ``signal/``. (A source's folder appears only whole, so one that is there is complete.)"""
    if any((folder / name).is_dir() for name in SOURCE_FOLDERS):
        return True
    signal = folder / "signal"
    try:
        entries = list(signal.iterdir()) if signal.is_dir() else []
    except OSError:
        return False
    return any(e.is_dir() or (e.name.endswith(_ARCHIVE) and e.is_file()) for e in entries)


def find_data_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The data root, or ``None`` when there is none (a folder that holds no source is none); :class:`DataNotFound`
    when ``RB_OTEL_DATA`` is set to something that is not a folder, or to one that holds no source."""
    environ = os.environ if environ is None else environ
    chosen = environ.get(DATA_ENV, "").strip()
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_dir():
            raise DataNotFound(f"{DATA_ENV}={chosen} is not a folder")
        if not holds_records(path):
            raise DataNotFound(
                f"{DATA_ENV}={chosen} holds no development source (none of {', '.join(SOURCE_FOLDERS)} or "
                f"signal/*); run `{FETCH_COMMAND}` or point it at a data root"
            )
        return path
    return next((path for _, path in _candidates() if path.is_dir() and holds_records(path)), None)


def data_root(environ: Mapping[str, str] | None = None) -> Path:
    """The data root; :class:`DataNotFound` naming every place looked at and the command that gets the records."""
    environ = os.environ if environ is None else environ
    found = find_data_root(environ)
    if found is not None:
        return found
    looked = [f"{DATA_ENV} (not set)"] + [
        f"{path} ({what}{', no complete source in it' if path.is_dir() else ''})" for what, path in _candidates()
    ]
    raise DataNotFound(
        f"no development records: looked at {', '.join(looked)}; run `{FETCH_COMMAND}` to download them "
        f"from their public origins, or set {DATA_ENV}"
    )
