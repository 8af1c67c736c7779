"""Writing a file whole or not at all: the one atomic writer (a reader never sees half a model or a report), the
check that a path can be written before any work is done, and :class:`OutputError`, the one-line reason a path
cannot be written."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from pathlib import Path

__all__ = ["OutputError", "check_writable", "publish", "temporary_beside", "write_atomically"]

#: What an ``errno`` means for a path the user asked rb-otel to write.
_REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EISDIR: "it is a folder; name a file in it",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EFBIG: "the file is larger than this process may write",
}


class OutputError(OSError):
    """``path`` cannot be written; ``str()`` is one line naming the path and the reason (never a temporary file's
    name, never a second error from cleaning up). An ``OSError``, so code that catches those still does."""

    def __init__(self, path: str | Path, reason: str, code: int = 0) -> None:
        super().__init__(code, reason, str(path))
        self.path, self.reason = str(path), reason

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"

    @classmethod
    def of(cls, path: str | Path, exc: OSError) -> OutputError:
        """The :class:`OutputError` for ``exc``, met while writing ``path`` (its temporary file included)."""
        if isinstance(exc, OutputError):
            return exc
        code = exc.errno or 0
        return cls(path, _REASONS.get(code) or exc.strerror or type(exc).__name__, code)


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(".")


def check_writable(path: str | Path) -> Path:
    """Raise :class:`OutputError` when ``path`` surely cannot be written as a file: it is a folder, a part of its
    folder is a file, or the nearest folder that exists is read-only or not ours to write. Creates nothing, so a
    command checks every output before it starts its work; the write itself still reports what this cannot
    foresee (a full disk). Returns ``path``."""
    target = Path(path)
    if target.is_dir():
        raise OutputError(target, _REASONS[errno.EISDIR], errno.EISDIR)
    folder = _nearest_existing(target.parent)
    if not folder.is_dir():
        raise OutputError(target, f"{folder} is a file, not a folder", errno.ENOTDIR)
    if not os.access(folder, os.W_OK | os.X_OK):
        # access(2) answers for this user, root included, and says EROFS on a read-only mount
        probe = os.statvfs(folder)
        if probe.f_flag & os.ST_RDONLY:
            raise OutputError(target, f"{folder} is on a read-only file system", errno.EROFS)
        raise OutputError(target, f"{folder} is not writable (permission denied)", errno.EACCES)
    return target


def temporary_beside(path: Path) -> Path:
    """The temporary file ``path`` is written to before :func:`publish` renames it into place: beside it (so the
    rename is one step on one file system), named for this process and thread so concurrent writers never share
    one."""
    return path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def publish(tmp: Path, path: Path) -> None:
    """Rename ``tmp`` over ``path`` in one step; on failure ``tmp`` is removed (quietly: the first error is the
    one reported) and :class:`OutputError` names ``path``."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OutputError.of(path, exc) from None


def write_atomically(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (its folder made if needed) through a temporary file beside it, then renamed over
    ``path`` in one step: a reader sees the old file or the new one, never half of one. Raises
    :class:`OutputError` (one line, the path the caller named) when it cannot; ``path`` is then as it was."""
    path = Path(path)
    check_writable(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError.of(path, exc) from None
    tmp = temporary_beside(path)
    try:
        tmp.write_text(text, encoding="utf-8")
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OutputError.of(path, exc) from None
    publish(tmp, path)
    return path
