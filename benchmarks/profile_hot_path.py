"""Profiles of the hot path with py-spy (sampling, so the numbers are not inflated by the profiler).

``make profile`` runs the steered agent (the performance issue's workload) in a loop under ``py-spy record`` and
writes, into ``benchmarks/profiles/``:

* ``hot_path.svg``: the flame graph of the agent thread;
* ``hot_path.txt``: every rb_otel function's inclusive share of the agent's run time, then the SDK and
  LangChain frames under our hooks (where the rest of our overhead goes);
* ``scale_waits.txt`` (with ``--threads N``): ``bench_scale.py`` on N threads under ``py-spy --idle``, and where
  the threads were when sampled: a lock convoy on one of our locks would show as many thread-samples parked on
  an rb_otel line that takes a lock.

    python benchmarks/profile_hot_path.py [--seconds 30] [--threads 256]
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
    # py-spy prints paths relative to site-packages' package folder: "trace/__init__.py", "metrics/_internal/...".
    sdk = re.compile(r"\((?:metrics/_internal|trace/__init__|trace/export|attributes/__init__)")
    lines += ["", "OpenTelemetry SDK frames (inclusive):"]
    lines += [f"{100 * v / total:6.1f}%  {k}" for k, v in inclusive.most_common() if sdk.search(k)][:15]
    lines += ["", "LangSmith frames (LangChain wraps every wrap_* hook in `traceable`):"]
    lines += [f"{100 * v / total:6.1f}%  {k}" for k, v in inclusive.most_common() if "(langsmith/" in k][:8]
    return "\n".join(lines) + "\n"


def summarise_waits(raw: Path, threads: int) -> str:
    """Where the sampled threads were (leaf frames), and how many samples sat on an rb_otel lock line."""
    leaves: Counter[str] = Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        leaves[stack.split(";")[-1]] += int(count)
        total += int(count)
    lock_lines = _rb_otel_lock_lines()
    on_our_locks = sum(v for k, v in leaves.items() if _frame_line(k) in lock_lines)
    lines = [
        f"bench_scale.py on {threads} threads under py-spy --idle: {total} thread-samples",
        f"samples on an rb_otel line that takes a lock: {on_our_locks} ({100 * on_our_locks / max(total, 1):.3f}%)",
        "",
        "leaf frames (where threads were):",
    ]
    lines += [f"{100 * v / total:6.2f}%  {k}" for k, v in leaves.most_common(25)]
    return "\n".join(lines) + "\n"


def _frame_line(frame: str) -> tuple[str, int] | None:
    found = re.search(r"\((rb_otel/[^:]+):(\d+)\)$", frame)
    return (found.group(1), int(found.group(2))) if found else None


def _rb_otel_lock_lines() -> set[tuple[str, int]]:
    root = HERE.parent
    lines: set[tuple[str, int]] = set()
    for path in (root / "rb_otel").rglob("*.py"):
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"with .*_lock\b|\.acquire\(", text):
                lines.add((str(path.relative_to(root)), number))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--loop", type=float, help="run the workload for this many seconds (no profiling)")
    parser.add_argument("--threads", type=int, help="also profile bench_scale.py on this many threads")
    args = parser.parse_args()
    if args.loop is not None:
        loop(args.loop)
        return
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    OUT.mkdir(exist_ok=True)
    if args.threads:
        raw = OUT / "scale.raw"
        scale = [
            sys.executable,
            str(HERE / "bench_scale.py"),
            "--runs",
            str(args.threads),
            "--threads",
            str(args.threads),
        ]
        subprocess.run([py_spy, "record", "--idle", "-r", "20", "-f", "raw", "-o", str(raw), "--", *scale], check=True)
        waits = summarise_waits(raw, args.threads)
        raw.unlink()
        (OUT / "scale_waits.txt").write_text(waits)
        print(waits)
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
