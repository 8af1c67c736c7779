"""Checks of a command's arguments that argparse cannot make in one line: run by :func:`rb_otel.cli.main.main`
before any work (before the outputs are checked, so a bad flag touches no file), each failure one line and exit 2.

A command declares its check with :func:`checks` (a parser default); the check raises :class:`ArgumentProblem`.
"""

from __future__ import annotations

import argparse
import errno
import math
import socket
from collections.abc import Callable

__all__ = ["ArgumentProblem", "at_least", "check_arguments", "checks", "free_port", "seconds"]


class ArgumentProblem(ValueError):
    """An argument the command cannot take; ``str()`` is one line naming it, its value and what it accepts."""


def checks(parser: argparse.ArgumentParser, check: Callable[[argparse.Namespace], None]) -> None:
    """Declare ``check(args)``, run before the command's work; it raises :class:`ArgumentProblem`."""
    parser.set_defaults(check_arguments=check)


def check_arguments(args: argparse.Namespace) -> None:
    """Run the check the command declared, when it declared one."""
    check: Callable[[argparse.Namespace], None] | None = getattr(args, "check_arguments", None)
    if check is not None:
        check(args)


def at_least(flag: str, value: int, least: int, what: str) -> None:
    """``value`` (given as ``flag``) must be ``least`` or more; ``what`` says what the number counts."""
    if value < least:
        raise ArgumentProblem(f"{flag} {value}: {what}; give {least} or more")


def seconds(flag: str, value: float) -> None:
    """``value`` (given as ``flag``) must be a finite number of seconds, 0 or more."""
    if not (math.isfinite(value) and value >= 0):
        raise ArgumentProblem(f"{flag} {value:g}: give a number of seconds, 0 or more")


_BIND_REASONS = {
    errno.EADDRINUSE: "already in use",
    errno.EACCES: "not ours to bind (permission denied: ports below 1024 need privileges)",
    errno.EADDRNOTAVAIL: "not an address of this machine",
}


def free_port(flag: str, port: int, host: str, *, any_free: bool = True) -> None:
    """``port`` (given as ``flag``) must be a port number (1 to 65535; 0, any free port, when ``any_free``) that a
    server can listen on at ``host`` now: bound and released at once, as the server will bind it. ``flag`` is an
    option (``--port``) or an environment variable (``NAME``: shown as ``NAME=port``)."""
    given = f"{flag} {port}" if flag.startswith("-") else f"{flag}={port}"
    low = 0 if any_free else 1
    if not low <= port <= 65535:
        zero = " (0: any free port)" if any_free else ""
        raise ArgumentProblem(f"{given}: a port is a number between 1 and 65535{zero}")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ArgumentProblem(f"{given}: cannot listen on {host!r}: not a host name here ({exc})") from None
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as HTTP servers do
            probe.bind(address)
    except OSError as exc:
        reason = _BIND_REASONS.get(exc.errno or 0) or exc.strerror or type(exc).__name__
        raise ArgumentProblem(f"{given}: {host}:{port} is {reason}") from None
