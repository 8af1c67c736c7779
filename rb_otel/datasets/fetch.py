"""``make data``: fetch every development source from its public origin at the pinned commit, check it, and write
the data root ``data/`` that tests and research scripts read when ``../shared/data`` is not beside the checkout.

For each source of the manifest (:mod:`rb_otel.datasets.manifest`): the origin files are downloaded from
``{mirror}/{repository}/raw/{commit}/{path}`` (GitHub by default), every file of the source is checked against its
SHA-256 and size, and only then does the source's folder appear, renamed into place whole. So a source folder is
complete or absent. Work in progress lives in ``data/.partial/<source>/``: origin files already downloaded and a
``.part`` of the one in flight, which the next run continues with an HTTP range request. Each source's licence
files go to ``data/LICENSES/<source>/`` and ``data/SOURCES.md`` lists every origin present.

Failures end as soon as they are known, each in one line naming the file (or the host) and the cause:

- the mirror cannot be reached at all (its name does not resolve, the connection is refused or not answered):
  :class:`Unreachable`, and the whole run stops, since no other file or source could come either;
- a file that fails for good (an HTTP error such as 404, a hash mismatch): its source stops there, the downloads
  still queued for it are not started, and the next source is tried; a mismatching download is deleted so that
  the next run fetches it anew;
- a transfer cut off midway, a 5xx or a 429: tried again from where it stopped, up to :data:`ATTEMPTS` tries with
  a backoff of at most a few seconds in all.

Whatever happens, a run leaves no empty folder behind it, and a ``data/`` it created and filled with nothing is
removed again, so a failed run never makes the data root (:mod:`rb_otel.datasets.root`) look like a source.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote, urlsplit

import httpx

from rb_otel.datasets.manifest import ManifestFile, ManifestSource, sha256_of

__all__ = ["ATTEMPTS", "DEFAULT_MIRROR", "FetchError", "SourceResult", "Unreachable", "fetch"]

DEFAULT_MIRROR = "https://github.com"
#: Tries per file when a transfer breaks off midway (or the server answers 5xx or 429); after the first, each
#: continues where the last one stopped. A failure that another try cannot mend is not tried again.
ATTEMPTS = 4
#: Seconds waited before the second, third, ... try (3.5 s in all at most).
BACKOFF_S = (0.5, 1.0, 2.0)
_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
#: HTTP statuses another try may mend; every other status that is not 200 or 206 fails the file at once.
_TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})


class FetchError(Exception):
    """One file could not be fetched or did not check; the message names the file and the problem."""


class Unreachable(FetchError):
    """The mirror cannot be reached at all (its name does not resolve, or the connection is refused or not
    answered): the message names the host and the cause. No other file could come either, so :func:`fetch` stops
    the whole run and raises it."""


class _Stopped(Exception):
    """Another download of the same source failed for good: this one stops (its ``.part`` is kept)."""


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
    """Fetch ``sources`` into the folder ``into``; one result per source, each also given to ``progress``.

    :class:`Unreachable` when the mirror cannot be reached: the run stops at once. Either way no empty folder is
    left, and ``into`` itself is removed when this run created it and nothing was fetched into it."""
    chosen = list(sources)
    created = not into.exists()
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
            except Unreachable:
                raise  # every source after this one would fail the same way: the caller says why, once
            except FetchError as exc:
                results.append(SourceResult(source.name, False, f"{head}: {exc}"))
            progress(results[-1].line)
    finally:
        if own:
            http.close()
        _write_sources(into, chosen)
        _tidy(into, remove_if_empty=created)
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
        self._download_all(sorted({f.origin for f in self.source.files}))
        tree = self.staging / "tree"
        shutil.rmtree(tree, ignore_errors=True)
        for file in self.source.files:
            self._place(file, tree / file.path)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tree, self.final)
        shutil.rmtree(self.staging, ignore_errors=True)
        return "fetched and checked" + self._licences(self.final)

    def _download_all(self, origins: list[str]) -> None:
        """Every origin file, ``jobs`` at a time; at the first that fails for good the others stop (those queued
        are not started, those in flight stop at their next chunk) and its error is raised."""
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            futures = [pool.submit(self._download, origin, stop) for origin in origins]
            try:
                wait(futures, return_when=FIRST_EXCEPTION)
            finally:  # a failure, or Ctrl-C in this thread: nothing more starts, what runs stops
                stop.set()
                for future in futures:
                    future.cancel()
        _raise_first_failure(futures)

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

    def _download(self, origin: str, stop: threading.Event) -> None:
        target = self._origin_path(origin)
        if target.is_file():
            return  # downloaded by an earlier run; checked when placed
        try:
            download(self.http, self._url(origin), target, what=origin, stop=stop)
        except BaseException:
            stop.set()  # here, before this future ends: the worker's next download must not start
            raise

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


def _raise_first_failure(futures: list[Future[None]]) -> None:
    """Raise the error of the first future (in order) that failed for its own reason, an unreachable host before
    any other: one that only stopped because another failed, or was cancelled, is not the cause."""
    errors = [e for f in futures if f.done() and not f.cancelled() and (e := f.exception()) is not None]
    if errors:
        raise min(errors, key=lambda e: (not isinstance(e, Unreachable), isinstance(e, _Stopped)))


def download(http: httpx.Client, url: str, target: Path, *, what: str, stop: threading.Event | None = None) -> None:
    """``url`` into ``target``, through ``target.part``: continued with a range request where a ``.part`` is
    already there (from a try that broke off, now or in an earlier run). :class:`Unreachable` at once when the host
    cannot be reached, :class:`FetchError` at once on an HTTP error another try cannot mend (404), and after
    :data:`ATTEMPTS` tries (waiting :data:`BACKOFF_S` between them) when transfers keep breaking off or the server
    keeps answering 5xx or 429. ``stop``, once set, ends the download between two chunks."""
    part = target.with_name(target.name + ".part")
    last = ""
    stop = stop or threading.Event()  # never set: waits out each backoff
    for attempt in range(ATTEMPTS):
        if stop.wait(BACKOFF_S[min(attempt, len(BACKOFF_S)) - 1] if attempt else 0):
            raise _Stopped(what)
        have = part.stat().st_size if part.is_file() else 0
        # identity: a range counts bytes of the file itself, not of a compressed form of it
        headers = {"Accept-Encoding": "identity", **({"Range": f"bytes={have}-"} if have else {})}
        try:
            with http.stream("GET", url, headers=headers) as response:
                if response.status_code == 416 and have:
                    break  # nothing left to send: the .part is whole
                if response.status_code in _TRANSIENT:
                    last = f"HTTP {response.status_code}"
                    continue
                if response.status_code not in (200, 206):
                    raise FetchError(f"{what}: HTTP {response.status_code} from {url}")
                part.parent.mkdir(parents=True, exist_ok=True)  # only now: a failed run leaves no empty folders
                with part.open("ab" if response.status_code == 206 else "wb") as out:
                    for chunk in response.iter_raw():  # as it arrives, so a cut-off transfer keeps what came
                        out.write(chunk)
                        if stop.is_set():
                            raise _Stopped(what)
            break
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:  # no server to talk to: nothing else will come
            raise Unreachable(_unreachable(url, exc)) from None
        except httpx.TransportError as exc:  # cut off or stalled mid-transfer: try again from there
            last = f"{type(exc).__name__}: {exc}"
    else:
        raise FetchError(f"{what}: gave up after {ATTEMPTS} tries ({last}) at {url}")
    os.replace(part, target)


def _unreachable(url: str, exc: httpx.TransportError) -> str:
    """One line: which host, and why it cannot be reached, in words (the socket error's own, not httpx's)."""
    host = urlsplit(url).netloc
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(exc, httpx.ConnectTimeout):
        why = f"no answer within {_TIMEOUT.connect:.0f} s"
    elif isinstance(cause, socket.gaierror):
        why = f"the name does not resolve ({cause.strerror or cause}); offline, or a wrong --mirror?"
    elif isinstance(cause, ConnectionRefusedError):
        why = "the connection was refused; is the mirror up?"
    else:
        why = str(cause or exc) or type(exc).__name__
    return f"cannot reach {host}: {why}; the run stops here (what was fetched is kept; run `make data` again)"


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


def _tidy(into: Path, *, remove_if_empty: bool) -> None:
    """Remove the empty folders under ``into/.partial`` (the staging a failed run may leave) and ``.partial``
    itself when nothing is left in it; then ``into`` when ``remove_if_empty`` and it is empty."""
    staging = into / ".partial"
    if staging.is_dir():
        for folder, _, _ in sorted(os.walk(staging), key=lambda entry: -len(entry[0])):  # the deepest first
            with contextlib.suppress(OSError):  # not empty: it holds a download the next run continues
                os.rmdir(folder)
    if remove_if_empty:
        with contextlib.suppress(OSError):
            into.rmdir()


def _write_sources(into: Path, sources: list[ManifestSource]) -> None:
    """``into/SOURCES.md``: every source present (not written when none is)."""
    present = [s for s in sources if (into / s.name).is_dir()]
    if not present:
        return
    lines = [
        "# Development records fetched by `make data`",
        "",
        "Other projects' published agent runs, fetched from their origins and checked file by file; nobody on",
        "rb-otel wrote them. Each source's licence text is in `LICENSES/<source>/`.",
        "",
        "| source | origin | licence | files |",
        "|---|---|---|---|",
    ]
    lines += [f"| {s.name} | github.com/{s.repository} @ {s.commit} | {s.licence} | {len(s.files)} |" for s in present]
    scratch = into / "SOURCES.md.part"
    scratch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(scratch, into / "SOURCES.md")
