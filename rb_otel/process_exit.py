"""What rb-otel does on a process's way out: a normal exit, a worker process's exit, and SIGTERM.

Code that holds finished work (the telemetry's batched span ends, the baseline cache's queued run summaries)
registers a callback with :func:`on_exit`. A normal interpreter exit is not this module's: each caller keeps its
own ``atexit`` hook there, since its order against the OpenTelemetry SDK's own exit hooks matters (the telemetry
re-registers its hook after every provider it meets). The callbacks run once per process on the ways out that
skip ``atexit`` or cut it short:

* the exit of a ``multiprocessing`` worker (fork, forkserver, spawn; ``concurrent.futures.ProcessPoolExecutor``;
  Celery's ``billiard`` pool), which ends with ``os._exit`` after its task loop and so skips ``atexit``: a
  ``multiprocessing.util.Finalize`` (and ``billiard.util.Finalize`` when billiard is loaded) registered the first
  time the process records something (:func:`watch_process`, called at every run start: a pid comparison);
* SIGTERM, with :func:`handle_sigterm` (``rb_otel.configure()`` installs it): the callbacks get
  ``terminating=True`` (the telemetry ends runs in flight with an error status), then the handler that was there
  before runs (the default one ends the process with SIGTERM's status, 143).

The callbacks run on a thread of their own, joined for at most :data:`EXIT_TIMEOUT_S`: a signal can arrive while
the interrupted code holds a lock a callback needs, and a shutdown must never hang on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = [
    "EXIT_TIMEOUT_S",
    "ExitCallback",
    "ending",
    "handle_sigterm",
    "on_exit",
    "run_exit_callbacks",
    "watch_process",
]

_log = logging.getLogger("rb_otel")

#: The longest a way out waits for rb-otel's callbacks (seconds): exports and store writes give up by then.
EXIT_TIMEOUT_S = 2.0

#: ``callback(deadline_s, terminating)``: do the finished work within ``deadline_s`` seconds; ``terminating`` is
#: True on SIGTERM (runs in flight end as failures). Must not raise (it is guarded all the same).
ExitCallback = Callable[[float, bool], None]

_callbacks: list[ExitCallback] = []
_lock = threading.Lock()


class _Pids:
    """Which process things were done in (a forked child starts with none done)."""

    watched = 0  # the process whose worker exit is watched (0: none yet)
    done = 0  # the process whose callbacks ran


def on_exit(callback: ExitCallback) -> None:
    """Run ``callback`` on this process's way out (each callback once, in registration order)."""
    with _lock:
        if callback not in _callbacks:
            _callbacks.append(callback)


def ending() -> bool:
    """Whether this process is on its way out: its exit callbacks have started (a SIGTERM with the handler, a
    worker's exit). What a flush does then may differ (the export spool keeps what cannot be sent)."""
    return _Pids.done == os.getpid()


def run_exit_callbacks(timeout: float = EXIT_TIMEOUT_S, *, terminating: bool = False) -> bool:
    """Run the callbacks now, once per process, on a helper thread joined for at most ``timeout`` seconds;
    ``False`` (and a warning naming what it gave up on) when they did not finish in time."""
    with _lock:
        if _Pids.done == os.getpid():
            return True
        _Pids.done = os.getpid()
        callbacks = list(_callbacks)
    if not callbacks:
        return True

    def run() -> None:
        for callback in callbacks:
            try:
                callback(timeout, terminating)
            except Exception:
                _log.debug("an exit callback failed", exc_info=True)

    helper = threading.Thread(target=run, name="rb-otel-exit", daemon=True)
    helper.start()
    helper.join(timeout)
    if helper.is_alive():
        _log.warning("rb-otel: gave up after %.1f s on exporting spans and writing baselines at exit", timeout)
        return False
    return True


def watch_process() -> None:
    """Make sure this process's callbacks run when it is a worker that exits without ``atexit``. Cheap enough to
    call at every run start: after the first call in a process it is one pid comparison."""
    pid = os.getpid()
    if _Pids.watched == pid:
        return
    with _lock:
        if _Pids.watched == pid:
            return
        _Pids.watched = pid
    import multiprocessing
    import multiprocessing.util

    if multiprocessing.parent_process() is not None:  # a multiprocessing child: its exit skips atexit
        multiprocessing.util.Finalize(None, run_exit_callbacks, exitpriority=10)
    billiard = sys.modules.get("billiard.util")
    if billiard is not None:  # Celery's prefork pool: the same, through billiard's own registry
        with contextlib.suppress(Exception):
            billiard.Finalize(None, run_exit_callbacks, exitpriority=10)


def _reset_in_child() -> None:
    _Pids.watched = _Pids.done = 0


os.register_at_fork(after_in_child=_reset_in_child)

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class _SigtermHandler:
    """Runs the exit callbacks (``terminating=True``), then the handler that was installed before."""

    def __init__(self, previous: _Handler, timeout: float) -> None:
        self.previous = previous
        self.timeout = timeout

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        run_exit_callbacks(self.timeout, terminating=True)
        previous = self.previous
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:  # the default: end the process as SIGTERM would have (status 143, what Kubernetes expects)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)


def handle_sigterm(timeout: float = EXIT_TIMEOUT_S) -> bool:
    """Install a SIGTERM handler that ends the runs in flight with an error status, exports what ended and writes
    queued baselines (at most ``timeout`` seconds), then chains to the handler already installed (the default
    one ends the process). Idempotent; ``False`` (logged) when it cannot be installed here: not the main thread,
    or a platform without SIGTERM. ``rb_otel.configure()`` calls it unless told not to."""
    sigterm = getattr(signal, "SIGTERM", None)
    if sigterm is None:
        return False
    try:
        current = signal.getsignal(sigterm)
        if isinstance(current, _SigtermHandler):
            current.timeout = timeout
            return True
        signal.signal(sigterm, _SigtermHandler(current, timeout))
    except ValueError:  # signal only works in the main thread of the main interpreter
        _log.info("rb-otel: SIGTERM handler not installed (not the main thread); call handle_sigterm() from it")
        return False
    return True
