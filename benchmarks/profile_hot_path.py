"""Profiles of the hot path with py-spy (sampling, so the numbers are not inflated by the profiler).

``make profile`` runs the steered agent (the performance issue's workload) in a loop under ``py-spy record`` and
writes, into ``benchmarks/profiles/``:

* ``hot_path.svg``: the flame graph of the agent thread;
* ``hot_path.txt``: every rb_otel function's inclusive share of the agent's run time, then the SDK and
  LangChain frames under our hooks (where the rest of our overhead goes).

    python benchmarks/profile_hot_path.py [--seconds 30]
    python benchmarks/profile_hot_path.py --loop SECONDS   # the workload itself (what py-spy runs)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "profiles"
_LINE = re.compile(r":\d+\)$")


def loop(seconds: float) -> None:
    from bench_middleware import build, time_runs

    _, steered, exporter = build()
    time_runs(steered, 50)  # warm-up, not profiled apart from the start-up
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time_runs(steered, 50)
        exporter.clear()


def summarise(raw: Path) -> str:
    """Inclusive shares from py-spy's collapsed stacks, over the samples taken inside ``Pregel.invoke``."""
    inclusive: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [_LINE.sub(")", f) for f in stack.split(";")]
        if not any(f.startswith("Pregel.invoke") for f in frames):
            continue  # start-up imports and other threads' idle time
        samples = int(count)
        total += samples
        for frame in set(frames):
            inclusive[frame] += samples
    lines = [f"{total} samples inside Pregel.invoke (the agent's run = 100%)", "", "rb_otel functions (inclusive):"]
    lines += [f"{100 * v / total:6.1f}%  {k}" for k, v in inclusive.most_common() if "rb_otel/" in k][:40]
    lines += ["", "OpenTelemetry SDK frames (inclusive):"]
    lines += [f"{100 * v / total:6.1f}%  {k}" for k, v in inclusive.most_common() if "/sdk/" in k][:15]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--loop", type=float, help="run the workload for this many seconds (no profiling)")
    args = parser.parse_args()
    if args.loop is not None:
        loop(args.loop)
        return
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    OUT.mkdir(exist_ok=True)
    raw = OUT / "hot_path.raw"
    workload = [sys.executable, str(Path(__file__)), "--loop", str(args.seconds)]
    for fmt, target in (("raw", raw), ("flamegraph", OUT / "hot_path.svg")):
        subprocess.run([py_spy, "record", "-r", "200", "-f", fmt, "-o", str(target), "--", *workload], check=True)
    summary = summarise(raw)
    raw.unlink()
    (OUT / "hot_path.txt").write_text(summary)
    print(summary)


if __name__ == "__main__":
    main()
