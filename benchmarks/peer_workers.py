"""The variants' worker processes, shared by ``compare.py`` and ``growth.py``: the peers' virtualenv, one
``peer_run.py`` process per variant, started one after another and driven a few runs at a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["EXTRAS", "PEERS", "VENV", "Worker", "ensure_venv", "started"]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = Path(os.environ.get("RB_OTEL_PEERS_VENV", HERE / ".peers-venv"))
PEERS = {
    "otel-genai": "opentelemetry-instrumentation-genai-langchain==1.3b0",
    "openllmetry": "opentelemetry-instrumentation-langchain==0.62.4",
    "openinference": "openinference-instrumentation-langchain==0.1.80",
    "agento11y": "agento11y-langchain==0.21.0",
}
#: Extra packages some peers need (the official instrumentation and agento11y's OpenTelemetry export use the
#: GenAI util, a pre-release).
EXTRAS = ["agento11y==0.21.0", "opentelemetry-util-genai==1.3b0"]


def ensure_venv() -> Path:
    """The peers' virtualenv, (re)installed when the list of pinned packages changed."""
    python = VENV / "bin" / "python"
    wanted = ["matplotlib", *PEERS.values(), *EXTRAS]
    stamp = VENV / ".rb-otel-peers"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    if not stamp.exists() or stamp.read_text() != "\n".join(wanted):
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(ROOT), *wanted], check=True)
        stamp.write_text("\n".join(wanted))
    return python


class Worker:
    """One variant's process: started (and warmed up) at once, then asked for a few runs at a time."""

    def __init__(self, python: Path, variant: str, options: tuple[str, ...] = ()) -> None:
        self.variant = variant
        # Peers log warnings: an unread stderr pipe could fill up and block them. Closed in finish().
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(python), str(HERE / "peer_run.py"), variant, *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
        )
        self.failed = False
        #: The ready reply (:func:`started`); None until then, or when the variant failed.
        self.info: dict[str, Any] | None = None

    def _reply(self) -> Any:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.failed = True
            self.stderr.seek(0)
            lines = self.stderr.read().strip().splitlines()
            print(f"  {self.variant}: failed ({lines[-1] if lines else 'no output'})")
            return None
        return json.loads(line)

    def ready(self) -> dict[str, Any] | None:
        reply: dict[str, Any] | None = self._reply()
        return reply

    def runs(self, calls: int, runs: int, at_once: int = 0) -> list[float] | None:
        """The times (ms) of ``runs`` runs of ``calls`` model calls; with ``at_once``, started on that many
        threads together: one figure, wall ms per run."""
        if self.failed:
            return None
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{calls} {runs} {at_once}\n" if at_once else f"{calls} {runs}\n")
        self.proc.stdin.flush()
        reply: list[float] | None = self._reply()
        return reply

    def finish(self) -> float | None:
        rss = None
        if not self.failed:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            reply = self._reply()
            rss = None if reply is None else float(reply["rss_growth_mb"])
        if self.failed:
            self.proc.kill()
        self.proc.wait(timeout=60)
        self.stderr.close()
        return rss


def started(python: Path, variants: list[str], options: tuple[str, ...] = ()) -> dict[str, Worker]:
    """A worker per variant, each started once the one before is ready: a worker counts its calls while it warms
    up, and a count taken beside other processes' warm-ups is taken on a busy machine. The ready replies are in
    ``info``."""
    workers = {}
    for variant in variants:
        workers[variant] = worker = Worker(python, variant, options)
        worker.info = worker.ready()
    return workers
