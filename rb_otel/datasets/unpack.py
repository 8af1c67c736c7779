"""A data source as a folder, whether the data root holds the folder or a ``.tar.xz`` archive of it.

Archives are unpacked once per machine into a cache outside the repository (``RB_OTEL_DATA_CACHE``, else
``rb-otel-data-<uid>`` in the system's temporary folder), keyed by the archive's name, size and modification time,
so the tests' parallel workers and later runs share one copy. Unpacking happens in a scratch folder renamed into
place under a lock: a folder in the cache is complete or absent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

from rb_otel.datasets.root import FETCH_COMMAND, DataNotFound, data_root

__all__ = ["CACHE_ENV", "cache_folder", "source_folder"]

CACHE_ENV = "RB_OTEL_DATA_CACHE"
"""Where archived sources are unpacked (default: ``rb-otel-data-<uid>`` in the temporary folder)."""

ARCHIVE_SUFFIX = ".tar.xz"


def cache_folder() -> Path:
    chosen = os.environ.get(CACHE_ENV, "").strip()
    if chosen:
        return Path(chosen).expanduser()
    return Path(tempfile.gettempdir()) / f"rb-otel-data-{os.getuid()}"


def source_folder(name: str, root: Path | None = None) -> Path:
    """The folder of source ``name`` (``"signal/tau2_grok"``, ``"swe_agent"``) under the data root: the folder
    itself, or its archive ``name + ".tar.xz"`` unpacked into the cache. :class:`DataNotFound` when neither is
    there."""
    base = data_root() if root is None else root
    folder = base / name
    if folder.is_dir():
        return folder
    archive = base / (name + ARCHIVE_SUFFIX)
    if archive.is_file():
        return _unpacked(archive)
    raise DataNotFound(f"{name}: neither {folder} nor {archive} exists; run `{FETCH_COMMAND}`")


def _unpacked(archive: Path) -> Path:
    stat = archive.stat()
    stem = archive.name.removesuffix(ARCHIVE_SUFFIX)
    key = hashlib.sha256(f"{archive.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    cache = cache_folder()
    cache.mkdir(parents=True, exist_ok=True)
    final = cache / f"{stem}-{key}"
    if (final / stem).is_dir():
        return final / stem
    with _locked(cache / f"{stem}.lock"):
        if (final / stem).is_dir():  # another process unpacked it while this one waited
            return final / stem
        scratch = Path(tempfile.mkdtemp(prefix=f".{stem}-", dir=cache))
        try:
            with tarfile.open(archive) as tar:
                if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: refuse links and paths out of the folder
                    tar.extractall(scratch, filter="data")
                else:  # pragma: no cover - older 3.11 releases
                    tar.extractall(scratch)
            if not (scratch / stem).is_dir():
                raise DataNotFound(f"{archive}: the archive does not hold a folder named {stem}")
            os.replace(scratch, final)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return final / stem


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
