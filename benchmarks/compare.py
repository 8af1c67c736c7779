"""``make bench``: rb-otel against the bare agent and peer LangChain observability packages, interleaved.

Creates ``benchmarks/.peers-venv`` (rb-otel editable plus the peers, kept out of the project's own environment),
then runs every variant in a fresh process per pass, in a rotating order, and writes ``benchmarks/results.md``
(median, min, max, ratio against the bare agent of the same pass, spans per run, RSS growth) and
``benchmarks/results.png`` (the ratios).

    python benchmarks/compare.py [--passes 5] [--runs 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = Path(os.environ.get("RB_OTEL_PEERS_VENV", HERE / ".peers-venv"))
PEERS = {
    "openllmetry": "opentelemetry-instrumentation-langchain==0.62.4",
    "openinference": "openinference-instrumentation-langchain==0.1.80",
    "agento11y": "agento11y-langchain==0.21.0",
}
#: Extra packages some peers need (agento11y's OpenTelemetry export uses the GenAI util, a pre-release).
EXTRAS = ["agento11y==0.21.0", "opentelemetry-util-genai==1.3b0"]
MODEL_CALLS = 5
VARIANTS = ["bare", "rb-otel", "openllmetry", "openllmetry-nocontent", "openinference", "agento11y"]


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


def run(python: Path, variant: str, runs: int, calls: int) -> dict[str, float] | None:
    done = subprocess.run(
        [str(python), str(HERE / "peer_run.py"), variant, "--runs", str(runs), "--calls", str(calls)],
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if done.returncode != 0:
        print(f"  {variant}: failed ({done.stderr.strip().splitlines()[-1] if done.stderr else 'no output'})")
        return None
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    python = ensure_venv()
    rows: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    ratios: dict[str, list[float]] = {v: [] for v in VARIANTS}
    per_call_us: dict[str, list[float]] = {v: [] for v in VARIANTS}
    one_call_ms: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for p in range(args.passes):
        order = VARIANTS[p % len(VARIANTS) :] + VARIANTS[: p % len(VARIANTS)]
        results = {v: run(python, v, args.runs, MODEL_CALLS) for v in order}
        singles = {v: run(python, v, args.runs, 1) for v in order}
        bare, bare_single = results["bare"], singles["bare"]
        print(f"pass {p + 1}: " + "  ".join(f"{v} {r['median_ms']:.2f} ms" for v, r in results.items() if r))
        for v, r in results.items():
            if r is None:
                continue
            rows[v].append(r)
            if bare is not None:
                ratios[v].append(r["median_ms"] / bare["median_ms"])
                per_call_us[v].append((r["median_ms"] - bare["median_ms"]) / MODEL_CALLS * 1000)
            single = singles[v]
            if single is not None and bare_single is not None:
                one_call_ms[v].append(single["median_ms"] - bare_single["median_ms"])
    lines = [
        "| variant | median ms/run | min | max | ratio vs bare (same pass) | overhead per model call (µs) "
        "| 1-call run overhead (ms) | spans/run | RSS growth MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in VARIANTS:
        if not rows[v]:
            lines.append(f"| {v} | failed | | | | | | | |")
            continue
        med = statistics.median(r["median_ms"] for r in rows[v])
        lines.append(
            f"| {v} | {med:.2f} | {min(r['min_ms'] for r in rows[v]):.2f} | {max(r['max_ms'] for r in rows[v]):.2f} "
            f"| {statistics.median(ratios[v]):.2f}x | {_median(per_call_us[v], '.0f')} "
            f"| {_median(one_call_ms[v], '.2f')} | {rows[v][0]['spans_per_run']:.0f} "
            f"| {statistics.median(r['rss_growth_mb'] for r in rows[v]):.1f} |"
        )
    table = "\n".join(lines)
    header = (
        f"# Benchmark: {args.passes} passes x {args.runs} runs per variant and workload\n\n"
        f"Workload: create_agent, scripted model, {MODEL_CALLS} model calls and 4 tool calls per run (the 1-call "
        "column: one model call, no tool). Each variant in a fresh process, rotating order; ratios and overheads "
        "are against the bare agent of the same pass, then the median over passes.\n\n"
    )
    (HERE / "results.md").write_text(header + table + "\n")
    print(table)
    subprocess.run(
        [
            str(python),
            "-c",
            _CHART,
            str(HERE / "results.png"),
            json.dumps({v: statistics.median(r) for v, r in ratios.items() if r}),
        ],
        check=False,
    )


def _median(values: list[float], fmt: str) -> str:
    return format(statistics.median(values), fmt) if values else "n/a"


_CHART = """
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
ratios = json.loads(sys.argv[2])
fig, ax = plt.subplots(figsize=(7, 3.5))
names = list(ratios)
ax.barh(names, [ratios[n] for n in names], color=["#888" if n == "bare" else "#1565c0" if n == "rb-otel" else "#ef6c00"
        for n in names])
ax.axvline(1.2, color="#c62828", linestyle="--", label="target 1.20x")
ax.set_xlabel("time per run vs the bare agent (same pass)")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[1], dpi=120)
"""

if __name__ == "__main__":
    main()
