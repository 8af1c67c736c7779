"""The data manifest: every file of every development source with its origin and SHA-256, generated from the
shared data (``python -m rb_otel.datasets manifest``) and read by ``make data`` to fetch and check the same files.

``manifest.json`` (beside this module) is ``{"version": 1, "sources": [...]}``; a source is its folder ``name``,
``repository``, ``commit``, ``licence``, ``licence_files`` and ``files``, each ``{"path", "sha256", "size"}``, plus
``"origin"`` where the file's path in the repository is not ``path`` and ``"extract"`` (``{"line": N}`` or
``{"element": N}``) for a record that is part of its origin file. One file a line, so a change reads as a diff.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rb_otel.datasets.origins import ORIGINS, Extract, Origin
from rb_otel.datasets.unpack import source_folder

__all__ = [
    "MANIFEST",
    "ManifestFile",
    "ManifestSource",
    "build_manifest",
    "load_manifest",
    "manifest_text",
    "sha256_of",
]

#: The manifest shipped with rb-otel.
MANIFEST = Path(__file__).with_name("manifest.json")
_VERSION = 1


@dataclass(frozen=True, slots=True)
class ManifestFile:
    path: str  # in the source's folder
    origin: str  # in the repository
    sha256: str
    size: int
    extract: Extract | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "sha256": self.sha256, "size": self.size}
        if self.origin != self.path:
            out["origin"] = self.origin
        if self.extract is not None:
            out["extract"] = self.extract.as_dict()
        return out


@dataclass(frozen=True, slots=True)
class ManifestSource:
    name: str
    repository: str
    commit: str
    licence: str
    licence_files: tuple[str, ...]
    files: tuple[ManifestFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "repository": self.repository,
            "commit": self.commit,
            "licence": self.licence,
            "licence_files": list(self.licence_files),
            "files": [f.as_dict() for f in self.files],
        }


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_manifest(path: Path = MANIFEST) -> list[ManifestSource]:
    """The sources of a manifest file; ``ValueError`` naming the file and the place for a malformed one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != _VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {_VERSION}")
        return [_source(raw) for raw in data["sources"]]
    except (OSError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"{path}: not a data manifest ({exc})") from None


def _source(raw: dict[str, Any]) -> ManifestSource:
    files = tuple(
        ManifestFile(
            path=str(f["path"]),
            origin=str(f.get("origin") or f["path"]),
            sha256=str(f["sha256"]),
            size=int(f["size"]),
            extract=Extract(**f["extract"]) if f.get("extract") else None,
        )
        for f in raw["files"]
    )
    return ManifestSource(
        name=str(raw["name"]),
        repository=str(raw["repository"]),
        commit=str(raw["commit"]),
        licence=str(raw["licence"]),
        licence_files=tuple(raw["licence_files"]),
        files=files,
    )


def manifest_text(sources: list[ManifestSource]) -> str:
    """The manifest file's text: one source's header a few lines, then one line per file."""
    blocks = []
    for source in sources:
        head = {k: v for k, v in source.as_dict().items() if k != "files"}
        files = ",\n".join("  " + json.dumps(f.as_dict(), separators=(",", ":")) for f in source.files)
        blocks.append(json.dumps(head, indent=1)[:-2] + ',\n "files": [\n' + files + "\n ]}")
    return f'{{"version": {_VERSION}, "sources": [\n' + ",\n".join(blocks) + "\n]}\n"


def build_manifest(root: Path) -> list[ManifestSource]:
    """Every source of :data:`~rb_otel.datasets.origins.ORIGINS` as it is under the data root ``root`` (archives
    unpacked): each file with an origin, its hash and size. ``ValueError`` when a file the origins table does not
    know is found, so a source that changed cannot be half described."""
    return [_described(origin, source_folder(origin.name, root)) for origin in ORIGINS]


def _described(origin: Origin, folder: Path) -> ManifestSource:
    files = []
    for path in _files(folder):
        relative = path.relative_to(folder).as_posix()
        if relative.endswith(("-wal", "-shm")):
            continue  # SQLite's files beside a store it opened, not part of the record
        found = origin.origin_of(relative)
        if found is None and relative not in ("labels.csv",) and not relative.endswith("/submission.json"):
            raise ValueError(f"{origin.name}: {relative}: the origins table does not say where this file is from")
        if found is None:
            continue
        files.append(ManifestFile(relative, found[0], sha256_of(path), path.stat().st_size, found[1]))
    return ManifestSource(
        origin.name, origin.repository, origin.commit, origin.licence, origin.licence_files, tuple(files)
    )


def _files(folder: Path) -> Iterator[Path]:
    yield from sorted(p for p in folder.rglob("*") if p.is_file())
