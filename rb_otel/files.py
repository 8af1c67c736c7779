"""Writing a file whole or not at all: the one atomic writer (a reader never sees half a model or a report), the
check that a path can be written before any work is done, and :class:`OutputError`, the one-line reason a path
cannot be written."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from pathlib import Path

__all__ = ["OutputError", "check_writable", "not_a_file", "publish", "temporary_beside", "write_atomically"]

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


def _kind(mode: int) -> str:
    """What a file that is no regular file is (a device, a pipe, a socket)."""
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a pipe"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def not_a_file(path: str | Path, missing: str = "no such file or directory") -> str:
    """Why an input ``path`` that is no regular file nor folder cannot be read: ``missing`` when nothing is there,
    else what it is (``/dev/null``: a device, not a regular file)."""
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return missing
    return f"{_kind(mode)}, not a regular file"


def _probe(target: Path, folder: Path) -> None:
    """Create and remove a file in ``folder``: what access(2) cannot tell (root may write anywhere it answers
    for, but /proc and /sys take no new files)."""
    probe = folder / f".{target.name[:64]}.{os.getpid()}.{threading.get_ident()}.probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        code = exc.errno or 0
        reason = _REASONS.get(code) or exc.strerror or type(exc).__name__
        raise OutputError(target, f"{folder} does not take new files ({reason})", code) from None
    with contextlib.suppress(OSError):
        probe.unlink()


def check_writable(path: str | Path, *, probe: bool = False) -> Path:
    """Raise :class:`OutputError` when ``path`` surely cannot be written as a file: it is a folder, a device, a
    pipe or a socket (a write would replace it), a part of its folder is a file, or the nearest folder that exists
    is read-only or not ours to write. With ``probe``, a file is also created and removed in that folder (a
    command's check before its work: what permissions cannot foresee, such as /proc); else nothing is created.
    The write itself still reports what this cannot foresee (a full disk). Returns ``path``."""
    target = Path(path)
    if target.is_dir():
        raise OutputError(target, _REASONS[errno.EISDIR], errno.EISDIR)
    try:
        mode = target.stat().st_mode  # through a link: /dev/stdout is a pipe or a terminal
    except OSError:
        mode = stat.S_IFREG  # not there yet (or a dangling link, replaced by the write)
    if not stat.S_ISREG(mode):
        raise OutputError(target, f"it is {_kind(mode)}, not a regular file")
    folder = _nearest_existing(target.parent)
    if not folder.is_dir():
        raise OutputError(target, f"{folder} is a file, not a folder", errno.ENOTDIR)
    if not os.access(folder, os.W_OK | os.X_OK):
        # access(2) answers for this user, root included, and says EROFS on a read-only mount
        probed = os.statvfs(folder)
        if probed.f_flag & os.ST_RDONLY:
            raise OutputError(target, f"{folder} is on a read-only file system", errno.EROFS)
        raise OutputError(target, f"{folder} is not writable (permission denied)", errno.EACCES)
    if probe:
        _probe(target, folder)
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
