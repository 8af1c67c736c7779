"""Progress of long commands (``train``, ``evaluate``, ``replay`` of folders) on standard error: counts, the rate
and the time left, from tqdm.

On a terminal each stage is a tqdm bar. Anywhere else (a log, a pipe, CI) a bar's carriage returns would be noise,
so each stage is a few plain lines instead, formatted by tqdm all the same: one once it has gone on for
:data:`DELAY_S` (what it has done so far), one each time another tenth of it is done (at most one per
:data:`PLAIN_EVERY_S` seconds while its size is not known), and one when it ends. A stage over sooner shows
nothing, bar or line (tqdm's ``delay``; :data:`DELAY_ENV` changes it): quick work, and a bad input refused at once,
stay quiet. tqdm is imported when the first stage begins, never by ``import rb_otel``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

__all__ = ["DELAY_ENV", "DELAY_S", "PLAIN_EVERY_S", "Progress", "delay_from_env"]

#: Seconds a stage goes on before it shows (shorter ones show nothing), unless :data:`DELAY_ENV` says otherwise.
DELAY_S = 1.0
#: ``RB_OTEL_PROGRESS_DELAY``: seconds a stage goes on before its progress shows (``0``: every stage shows, a CI
#: log that wants each one, say); a value that is not a non-negative number is warned about and the default used.
DELAY_ENV = "RB_OTEL_PROGRESS_DELAY"
#: Seconds between two plain lines of a stage whose size is not known.
PLAIN_EVERY_S = 10.0
_PLAIN = "{desc}: {n_fmt}/{total_fmt} {unit}s done ({percentage:.0f}%), {rate_fmt}, about {remaining} left{postfix}"
_PLAIN_UNKNOWN = "{desc}: {n_fmt} {unit}s done, {rate_fmt}{postfix}"
_PLAIN_END = "{desc}: {n_fmt} {unit}s done in {elapsed}{postfix}"


def delay_from_env() -> float:
    """:data:`DELAY_ENV`'s seconds, else :data:`DELAY_S` (a bad value: a warning line on standard error)."""
    raw = os.environ.get(DELAY_ENV, "").strip()
    if not raw:
        return DELAY_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        print(f"warning: {DELAY_ENV}={raw!r} is not a number of seconds (0 or more); using {DELAY_S:g}",
              file=sys.stderr)  # fmt: skip
        return DELAY_S
    return value


class Progress:
    """:class:`~rb_otel.training.stages.Stages` for the terminal: a bar per stage on a terminal, plain lines
    elsewhere (module docstring); ``enabled=False`` prints nothing. Call :meth:`close` when the work is done."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        stream: IO[str] | None = None,
        bar: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        delay: float | None = None,
    ) -> None:
        """``bar``: a bar (default: when ``stream`` is a terminal), else plain lines; ``clock`` times the plain
        lines (a test's own clock); ``delay``: seconds before a stage shows (default :func:`delay_from_env`)."""
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.bar = bar if bar is not None else self.stream.isatty()
        self._clock = clock
        self.delay = delay if delay is not None else (delay_from_env() if enabled else DELAY_S)
        self._name = ""
        self._unit = "step"
        self._total: int | None = None
        self._done = 0
        self._note = ""
        self._started = 0.0
        self._printed_at = 0.0
        self._tenths = 0
        self._shown = False
        self._tqdm: Any = None

    # -- Stages ------------------------------------------------------------------------------------------------

    def stage(self, name: str, total: int | None = None, unit: str = "step") -> None:
        """End the current stage and begin ``name``: ``total`` steps of ``unit`` (``None``: not known)."""
        self._end()
        self._name, self._total, self._unit, self._done, self._note = name, total, unit, 0, ""
        self._started = self._printed_at = self._clock()
        self._tenths = 0
        self._shown = False
        if self.enabled and self.bar:
            from tqdm import tqdm

            self._tqdm = tqdm(total=total, desc=name, unit=f" {unit}", file=self.stream, leave=True, delay=self.delay)

    def advance(self, steps: int = 1) -> None:
        """``steps`` more of the stage are done."""
        self._done += steps
        if not self.enabled or not self._name:
            return
        if self._tqdm is not None:
            self._tqdm.update(steps)
            return
        now = self._clock()
        if not self._shown:
            if now - self._started < self.delay:
                return
            self._shown = True
            self._tenths = self._done * 10 // self._total if self._total else 0
            self._meter(_PLAIN if self._total else _PLAIN_UNKNOWN, now)
            return
        if self._total:
            tenths = min(10, self._done * 10 // self._total)
            if tenths > self._tenths and self._done < self._total:
                self._tenths = tenths
                self._meter(_PLAIN, now)
        elif now - self._printed_at >= PLAIN_EVERY_S:
            self._meter(_PLAIN_UNKNOWN, now)

    def note(self, text: str) -> None:
        """What the stage is doing now: beside the bar, or in the stage's next plain line."""
        self._note = text
        if self._tqdm is not None:
            self._tqdm.set_postfix_str(text, refresh=False)  # shown at the next update, after the delay

    def echo(self, text: str, file: IO[str] | None = None) -> None:
        """Print a line of the command's own output (standard output by default) without breaking a bar."""
        if self._tqdm is not None:
            self._tqdm.write(text, file=file or sys.stdout)
        else:
            print(text, file=file or sys.stdout)

    def close(self) -> None:
        """End the last stage (its closing line or bar)."""
        self._end()
        self._name = ""

    # -- lines ----------------------------------------------------------------------------------------------

    def _end(self) -> None:
        if not self._name or not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None
            return
        now = self._clock()
        if self._shown or now - self._started >= self.delay:
            self._meter(_PLAIN_END if self._done else "{desc}: done in {elapsed}{postfix}", now)

    def _meter(self, form: str, now: float) -> None:
        from tqdm import tqdm

        # tqdm writes a postfix as ", " and the text
        text = tqdm.format_meter(self._done, self._total, now - self._started, prefix=self._name, unit=self._unit,
                                 bar_format=form, postfix=self._note or None)  # fmt: skip
        self._line(text)
        self._printed_at = now

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)
