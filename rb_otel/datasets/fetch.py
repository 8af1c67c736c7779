"""``make data``: fetch every development source from its public origin at the pinned commit, check it, and write
the data root ``data/`` that tests and research scripts read when ``../shared/data`` is not beside the checkout.

For each source of the manifest (:mod:`rb_otel.datasets.manifest`): the origin files are downloaded from
``{mirror}/{repository}/raw/{commit}/{path}`` (GitHub by default), every file of the source is checked against its
SHA-256 and size, and only then does the source's folder appear, renamed into place whole. So a source folder is
complete or absent. Work in progress lives in ``data/.partial/<source>/``: origin files already downloaded and a
``.part`` of the one in flight, which the next run continues with an HTTP range request (an interrupted transfer is
also resumed at once, up to :data:`ATTEMPTS` tries). A missing file, an HTTP error or a hash mismatch is one line
naming the source and the file; a mismatching download is deleted so that the next run fetches it anew. Each
source's licence files go to ``data/LICENSES/<source>/`` and ``data/SOURCES.md`` lists every origin.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

import httpx

from rb_otel.datasets.manifest import ManifestFile, ManifestSource, sha256_of

__all__ = ["ATTEMPTS", "DEFAULT_MIRROR", "FetchError", "SourceResult", "fetch"]

DEFAULT_MIRROR = "https://github.com"
#: Tries per file; after the first, each continues where the last one stopped.
ATTEMPTS = 4
_TIMEOUT = httpx.Timeout(60.0, connect=10.0)


class FetchError(Exception):
    """One file could not be fetched or did not check; the message names the file and the problem."""


@dataclass(frozen=True, slots=True)
class SourceResult:
    name: str
    ok: bool
    line: str  # the progress line, or the one line saying what went wrong


def fetch(
    sources: Iterable[ManifestSource],
    into: Path,
    *,
    mirror: str = DEFAULT_MIRROR,
    jobs: int = 8,
    progress: Callable[[str], None] = lambda line: None,
    client: httpx.Client | None = None,
) -> list[SourceResult]:
    """Fetch ``sources`` into the folder ``into``; one result per source, each also given to ``progress``."""
    chosen = list(sources)
    into.mkdir(parents=True, exist_ok=True)
    own = client is None
    http = client or httpx.Client(follow_redirects=True, timeout=_TIMEOUT)
    results = []
    try:
        for number, source in enumerate(chosen, 1):
            started = time.monotonic()
            head = f"[{number}/{len(chosen)}] {source.name}"
            progress(f"{head}: {len(source.files)} files, {source.size / 1e6:.1f} MB from {_where(source)}")
            try:
                done = _Source(source, into, mirror.rstrip("/"), http, jobs).fetch()
                line = f"{head}: {done} ({time.monotonic() - started:.1f} s)"
                results.append(SourceResult(source.name, True, line))
            except FetchError as exc:
                results.append(SourceResult(source.name, False, f"{head}: {exc}"))
            progress(results[-1].line)
    finally:
        if own:
            http.close()
    _write_sources(into, chosen)
    return results


def _where(source: ManifestSource) -> str:
    return f"{source.repository}@{source.commit[:7]}"


class _Source:
    """One source's fetch: origins into ``.partial/<name>/origins``, the checked tree into ``.../tree``, then the
    tree renamed into place."""

    def __init__(self, source: ManifestSource, into: Path, mirror: str, http: httpx.Client, jobs: int) -> None:
        self.source, self.into, self.mirror, self.http, self.jobs = source, into, mirror, http, jobs
        self.final = into / source.name
        self.staging = into / ".partial" / source.name

    def fetch(self) -> str:
        if self.final.is_dir():
            self._check_present()
            return "already there, checked"
        origins = sorted({f.origin for f in self.source.files})
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            for future in [pool.submit(self._download, origin) for origin in origins]:
                future.result()
        tree = self.staging / "tree"
        shutil.rmtree(tree, ignore_errors=True)
        for file in self.source.files:
            self._place(file, tree / file.path)
        licences = self._licences(tree)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tree, self.final)
        shutil.rmtree(self.staging, ignore_errors=True)
        return "fetched and checked" + licences

    def _check_present(self) -> None:
        for file in self.source.files:
            path = self.final / file.path
            if not path.is_file():
                raise FetchError(f"{file.path}: missing from {self.final} (delete the folder to fetch it again)")
            if path.stat().st_size != file.size or sha256_of(path) != file.sha256:
                raise FetchError(f"{file.path}: changed since it was fetched (delete {self.final} to fetch it again)")

    def _origin_path(self, origin: str) -> Path:
        return self.staging / "origins" / origin

    def _url(self, path: str) -> str:
        return f"{self.mirror}/{self.source.repository}/raw/{self.source.commit}/{quote(path, safe='/')}"

    def _download(self, origin: str) -> None:
        target = self._origin_path(origin)
        if target.is_file():
            return  # downloaded by an earlier run; checked when placed
        target.parent.mkdir(parents=True, exist_ok=True)
        download(self.http, self._url(origin), target, what=origin)

    def _place(self, file: ManifestFile, destination: Path) -> None:
        origin = self._origin_path(file.origin)
        destination.parent.mkdir(parents=True, exist_ok=True)
        if file.extract is None:
            if not _matches(origin, file):
                _mismatch(origin, file)
            os.replace(origin, destination)
            return
        scratch = destination.with_name(destination.name + ".part")
        try:
            scratch.write_bytes(_extracted(origin, file))
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            raise FetchError(f"{file.path}: {file.origin} does not hold the record ({exc})") from None
        if not _matches(scratch, file):
            scratch.unlink()
            _mismatch(origin, file)
        os.replace(scratch, destination)

    def _licences(self, tree: Path) -> str:
        folder = self.into / "LICENSES" / self.source.name
        folder.mkdir(parents=True, exist_ok=True)
        unchecked = []
        for name in self.source.licence_files:
            if (tree / name).is_file():  # part of the source, so checked with it
                shutil.copyfile(tree / name, folder / Path(name).name)
                continue
            try:
                download(self.http, self._url(name), folder / Path(name).name, what=name)
                unchecked.append(name)
            except FetchError as exc:
                return f"; licence file not fetched ({exc}): {self.source.licence}, see SOURCES.md"
        if unchecked:
            return f"; licence {', '.join(unchecked)} fetched, not hash-checked (the shared data holds no copy)"
        return ""


def download(http: httpx.Client, url: str, target: Path, *, what: str) -> None:
    """``url`` into ``target``, through ``target.part``: continued with a range request where a ``.part`` is
    already there (from a try that broke off, now or in an earlier run); :class:`FetchError` on an HTTP error or
    after :data:`ATTEMPTS` broken transfers."""
    part = target.with_name(target.name + ".part")
    last: Exception | None = None
    for _ in range(ATTEMPTS):
        have = part.stat().st_size if part.is_file() else 0
        # identity: a range counts bytes of the file itself, not of a compressed form of it
        headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={have}-"} if have else {})}
        try:
            with http.stream("GET", url, headers=headers) as response:
                if response.status_code == 416 and have:
                    break  # nothing left to send: the .part is whole
                if response.status_code not in (200, 206):
                    raise FetchError(f"{what}: HTTP {response.status_code} from {url}")
                with part.open("ab" if response.status_code == 206 else "wb") as out:
                    for chunk in response.iter_raw():  # as it arrives, so a cut-off transfer keeps what came
                        out.write(chunk)
            break
        except httpx.TransportError as exc:  # refused, timed out or cut off mid-transfer: try again from there
            last = exc
    else:
        raise FetchError(f"{what}: gave up after {ATTEMPTS} tries ({type(last).__name__}: {last}) at {url}")
    os.replace(part, target)


def _matches(path: Path, file: ManifestFile) -> bool:
    return path.stat().st_size == file.size and sha256_of(path) == file.sha256


def _mismatch(origin: Path, file: ManifestFile) -> NoReturn:
    got = sha256_of(origin)
    origin.unlink()  # so that the next run downloads it anew
    raise FetchError(
        f"{file.path}: SHA-256 mismatch (expected {file.sha256[:12]}..., got {got[:12]}...); "
        "the download was deleted, run `make data` again to fetch it anew"
    )


def _extracted(origin: Path, file: ManifestFile) -> bytes:
    extract = file.extract
    assert extract is not None
    if extract.line is not None:
        with origin.open("rb") as handle:
            for number, line in enumerate(handle, 1):
                if number == extract.line:
                    return line
        raise IndexError(f"it has fewer than {extract.line} lines")
    if extract.element is None:
        raise ValueError("the manifest names neither a line nor an element")
    elements = json.loads(origin.read_text(encoding="utf-8"))
    return json.dumps(elements[extract.element], indent=1).encode()


def _write_sources(into: Path, sources: list[ManifestSource]) -> None:
    lines = [
        "# Development records fetched by `make data`",
        "",
        "Other projects' published agent runs, fetched from their origins and checked file by file; nobody on",
        "rb-otel wrote them. Each source's licence text is in `LICENSES/<source>/`.",
        "",
        "| source | origin | licence | files |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {s.name} | github.com/{s.repository} @ {s.commit} | {s.licence} | {len(s.files)} |"
        for s in sources
        if (into / s.name).is_dir()
    ]
    scratch = into / "SOURCES.md.part"
    scratch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(scratch, into / "SOURCES.md")
