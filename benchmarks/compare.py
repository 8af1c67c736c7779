"""``make bench``: rb-otel against the bare agent and peer LangChain observability packages, interleaved.

Creates ``benchmarks/.peers-venv`` (rb-otel editable plus the peers, kept out of the project's own environment).
Each pass starts every variant in a fresh process of its own (``peer_run.py``); the processes stay alive side by
side and take turns, a few runs at a time in a rotating order ("rounds"), so the drift of this machine's speed hits
every variant alike. Writes ``benchmarks/results.md`` (median, min, max, ratio against the bare agent of the same
round, overheads, spans per run, RSS growth) and ``benchmarks/results.png`` (the ratios).

    python benchmarks/compare.py [--passes 3] [--rounds 40] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from pathlib import Path

from growth import GROWTH_VARIANTS, growth_table
from peer_workers import ensure_venv, started

HERE = Path(__file__).resolve().parent
MODEL_CALLS = 5
VARIANTS = [
    "bare",
    "rb-otel",
    "rb-otel-stateless",
    "rb-otel-unsteered",
    "rb-otel-wrapper",
    "otel-genai",
    "openllmetry",
    "openllmetry-nocontent",
    "openinference",
    "agento11y",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=3, help="fresh processes per variant")
    parser.add_argument("--rounds", type=int, default=40, help="turns per pass")
    parser.add_argument("--runs", type=int, default=5, help="runs of each workload per variant and turn")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset (bare is always run)")
    parser.add_argument("--output", default=str(HERE / "results.md"), help="the table (and a .png chart beside it)")
    parser.add_argument("--growth-rounds", type=int, default=6, help="rounds of growth.py after the passes (0: none)")
    args = parser.parse_args()
    chosen = ["bare", *(v for v in args.variants.split(",") if v in VARIANTS and v != "bare")]
    python = ensure_venv()
    times: dict[str, list[float]] = {v: [] for v in chosen}
    ratios: dict[str, list[float]] = {v: [] for v in chosen}
    per_call_us: dict[str, list[float]] = {v: [] for v in chosen}
    one_call_ms: dict[str, list[float]] = {v: [] for v in chosen}
    spans: dict[str, float] = {}
    calls: dict[str, dict[str, float]] = {}
    layers: dict[str, dict[str, dict[str, float]]] = {}
    rss: dict[str, list[float]] = {v: [] for v in chosen}
    for p in range(args.passes):
        workers = started(python, chosen)
        for v, worker in workers.items():
            info = worker.info
            if info is not None:
                spans[v] = info["spans_per_run"]
                calls[v] = info.get("calls_per_run", {})
                layers[v] = info.get("layers", {})
        for r in range(args.rounds):
            shift = (p * args.rounds + r) % len(chosen)
            order = chosen[shift:] + chosen[:shift]
            full = {v: workers[v].runs(MODEL_CALLS, args.runs) for v in order}
            single = {v: workers[v].runs(1, args.runs) for v in order}
            bare, bare_single = full["bare"], single["bare"]
            for v in order:
                runs, one = full[v], single[v]
                if runs is None:
                    continue
                times[v] += runs
                if bare is not None:
                    ratios[v].append(statistics.median(runs) / statistics.median(bare))
                    per_call_us[v].append((statistics.median(runs) - statistics.median(bare)) / MODEL_CALLS * 1000)
                if one is not None and bare_single is not None:
                    one_call_ms[v].append(statistics.median(one) - statistics.median(bare_single))
        for v, worker in workers.items():
            growth = worker.finish()
            if growth is not None:
                rss[v].append(growth)
        done = {v: times[v][-args.rounds * args.runs :] for v in chosen if times[v]}
        print(f"pass {p + 1}: " + "  ".join(f"{v} {statistics.median(t):.2f} ms" for v, t in done.items()))
    lines = [
        "| variant | median ms/run | min | max | ratio vs bare (same round) | overhead per model call (µs) "
        "| 1-call run overhead (ms) | spans/run | RSS growth MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in chosen:
        if not times[v]:
            lines.append(f"| {v} | failed | | | | | | | |")
            continue
        lines.append(
            f"| {v} | {statistics.median(times[v]):.2f} | {min(times[v]):.2f} | {max(times[v]):.2f} "
            f"| {_median(ratios[v], '.2f')}x | {_median(per_call_us[v], '.0f')} "
            f"| {_median(one_call_ms[v], '.2f')} | {spans.get(v, 0):.0f} | {_median(rss[v], '.1f')} |"
        )
    table = "\n".join(lines) + _against_peers(per_call_us, one_call_ms) + _calls_table(calls) + layers_table(layers)
    header = (
        f"# Benchmark: {args.passes} passes x {args.rounds} rounds x {args.runs} runs per variant and workload\n\n"
        f"Workload: create_agent, scripted model, {MODEL_CALLS} model calls and 4 tool calls per run (the 1-call "
        "column: one model call, no tool). Every variant in a fresh process of its own per pass; the processes "
        "take turns, a few runs each, in a rotating order. Ratios and overheads are against the bare agent's runs "
        "of the same round, then the median over all rounds; RSS growth is per process over the pass.\n\n"
    )
    if args.growth_rounds:
        table += "\n\n" + growth_table(python, [v for v in chosen if v in GROWTH_VARIANTS], rounds=args.growth_rounds)
    output = Path(args.output)
    output.write_text(header + table + "\n")
    print(table)
    subprocess.run(
        [
            str(python),
            "-c",
            _CHART,
            str(output.with_suffix(".png")),
            json.dumps({v: statistics.median(r) for v, r in ratios.items() if r}),
        ],
        check=False,
    )


def _against_peers(per_call_us: dict[str, list[float]], one_call_ms: dict[str, list[float]]) -> str:
    """rb-otel's overhead per run as a fraction of the cheapest peer's, on each workload (the target: <= 0.75)."""
    lines = []
    for workload, overheads in (("5-call", per_call_us), ("1-call", one_call_ms)):
        peers = {v: statistics.median(o) for v, o in overheads.items() if o and not v.startswith(("bare", "rb-otel"))}
        if not peers:
            continue
        cheapest = min(peers, key=lambda v: peers[v])
        for ours in ("rb-otel", "rb-otel-wrapper", "rb-otel-unsteered"):
            if overheads.get(ours):
                fraction = statistics.median(overheads[ours]) / peers[cheapest]
                lines.append(
                    f"- {workload}: {ours}'s overhead is {fraction:.2f}x that of the cheapest peer ({cheapest})"
                )
    return "\n\n" + "\n".join(lines) if lines else ""


def _calls_table(calls: dict[str, dict[str, float]]) -> str:
    """Python function calls per run over the bare agent's (deterministic: the same on a busy minute)."""
    bare = calls.get("bare")
    if not bare:
        return ""
    lines = ["", "", "| variant | extra calls per 5-call run | extra calls per 1-call run |", "|---|---|---|"]
    for v, counts in calls.items():
        if v != "bare" and counts:
            lines.append(f"| {v} | {counts['5'] - bare['5']:+,.0f} | {counts['1'] - bare['1']:+,.0f} |")
    return "\n".join(lines)


#: The layers that are rb-otel's own code (``peer_run.LAYERS``); every other layer is what the OpenTelemetry SDK,
#: LangChain, LangGraph and Python do, for rb-otel or for the agent.
OWN_LAYER_PREFIX = "rb-otel: "


def floor_rows(layers: dict[str, dict[str, dict[str, float]]], shown: list[str]) -> list[str]:
    """Two rows of the layers table: each variant's calls above the bare agent, and those made outside rb-otel's
    own code (the floor: what the variant would cost if rb-otel's code cost nothing), each with its ratio to the
    official package's calls above the bare agent.

    The floor is ``all - bare's all - the rb-otel layers``; for a variant with no rb-otel layer it is its whole
    overhead.
    """
    total = {v: sum(x["calls"] for x in layers[v].values()) for v in shown}
    if "bare" not in total:
        return []
    above = {v: total[v] - total["bare"] for v in shown if v != "bare"}
    own = {v: sum(x["calls"] for name, x in layers[v].items() if name.startswith(OWN_LAYER_PREFIX)) for v in above}
    official = above.get("otel-genai")

    def cell(value: float) -> str:
        return f"{value:+,.0f}" + (f" ({value / official:.2f}x)" if official else "")

    rows = []
    for label, values in (
        ("above the bare agent (x the official's)", above),
        ("of which outside rb-otel's own code: the floor", {v: above[v] - own[v] for v in above}),
    ):
        rows.append(f"| {label} | " + " | ".join("" if v == "bare" else cell(values[v]) for v in shown) + " |")
    return rows


def layers_table(layers: dict[str, dict[str, dict[str, float]]]) -> str:
    """Where each variant's calls go on the 5-call run (``peer_run.LAYERS``): calls per run, and the share of
    the profiled own time, per layer; then :func:`floor_rows`."""
    shown = [v for v in ("bare", "rb-otel", "rb-otel-stateless", "rb-otel-wrapper", "otel-genai") if layers.get(v)]
    if not shown:
        return ""
    names = list(dict.fromkeys(name for v in shown for name in layers[v]))
    head = "| layer (5-call run) | " + " | ".join(f"{v}: calls (time share)" for v in shown) + " |"
    lines = ["", "", head, "|---|" + "---|" * len(shown)]
    totals = {v: sum(x["ms"] for x in layers[v].values()) or 1.0 for v in shown}
    for name in names:
        cells = []
        for v in shown:
            x = layers[v].get(name)
            cells.append(f"{x['calls']:,.0f} ({x['ms'] / totals[v]:.0%})" if x else "")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    sums = [f"{sum(x['calls'] for x in layers[v].values()):,.0f}" for v in shown]
    lines.append("| all | " + " | ".join(sums) + " |")
    lines += floor_rows(layers, shown)
    return "\n".join(lines)


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
ax.barh(names, [ratios[n] for n in names], color=["#888" if n == "bare" else "#1565c0" if n.startswith("rb-otel")
        else "#ef6c00" for n in names])
ax.axvline(1.25, color="#c62828", linestyle="--", label="1.25x")
ax.set_xlabel("time per run vs the bare agent (same round)")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[1], dpi=120)
"""

if __name__ == "__main__":
    main()
