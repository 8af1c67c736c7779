"""How each variant's cost grows with the run's length and with concurrency, side by side.

    python benchmarks/growth.py [--rounds 6] [--variants rb-otel,rb-otel-wrapper,otel-genai]

The bare agent and each variant run in processes of their own (``peer_run.py``, the ``compare.py`` workers) and
take turns in a rotating order, as ``compare.py``'s passes do. Each round gives, per variant:

- the overhead per step (ms above the bare agent's run of the same round, divided by the steps) of runs of 10 and
  of 100 model calls (each ``N - 1`` tool calls and an answer); the target is flat: at 100 steps within 1.1x of
  the figure at 10;
- the overhead per run of the 5-call run, one run at a time on the main thread, 200 runs through a pool of one
  worker thread, and 200 runs started together on 200 threads (the batch's wall time divided by its runs); the
  target: together within 1.1x of one at a time. The one-worker pool is the same setting as together but for the
  concurrency, so "together / on one thread" is the cost of concurrency alone.

Medians over the rounds. The Python calls per run at each length (cProfile, deterministic) come beside them: the
extra calls per step, which do not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from peer_workers import ensure_venv, started

#: The variants the growth with run length and concurrency is measured for (``compare.py`` runs these too).
GROWTH_VARIANTS = ("bare", "rb-otel", "rb-otel-wrapper", "otel-genai")
#: Run lengths compared, and runs of each per turn (long runs take a while: fewer of them).
LENGTHS = {10: 4, 100: 1}
AT_ONCE = 200
SEQUENTIAL_RUNS = 20


def growth_table(python: Path, variants: list[str], *, rounds: int = 6) -> str:
    """The growth table (markdown) for ``variants`` (the bare agent is always run), ``rounds`` turns each."""
    chosen = ["bare", *(v for v in variants if v != "bare")]
    options = ("--warmup", "5", "--count-steps", ",".join(map(str, LENGTHS)))
    workers = started(python, chosen, options)
    calls = {v: (w.info or {}).get("calls_per_run", {}) for v, w in workers.items()}
    per_step: dict[str, dict[int, list[float]]] = {v: {n: [] for n in LENGTHS} for v in chosen}
    per_run: dict[str, dict[str, list[float]]] = {v: {"one": [], "one thread": [], "together": []} for v in chosen}
    for r in range(rounds):
        order = chosen[r % len(chosen) :] + chosen[: r % len(chosen)]
        for n, runs in LENGTHS.items():
            times = {v: workers[v].runs(n, runs) for v in order}
            bare = times["bare"]
            for v, t in times.items():
                if t and bare:
                    per_step[v][n].append((statistics.median(t) - statistics.median(bare)) / n)
        one = {v: workers[v].runs(5, SEQUENTIAL_RUNS) for v in order}
        pooled = {v: workers[v].runs(5, AT_ONCE, 1) for v in order}
        together = {v: workers[v].runs(5, AT_ONCE, AT_ONCE) for v in order}
        bare_one, bare_pooled, bare_together = one["bare"], pooled["bare"], together["bare"]
        for v in order:
            alone, on_one_thread, at_once = one[v], pooled[v], together[v]
            if alone and bare_one:
                per_run[v]["one"].append(statistics.median(alone) - statistics.median(bare_one))
            if on_one_thread and bare_pooled:
                per_run[v]["one thread"].append(on_one_thread[0] - bare_pooled[0])
            if at_once and bare_together:
                per_run[v]["together"].append(at_once[0] - bare_together[0])
        print(f"growth round {r + 1}/{rounds}", file=sys.stderr)
    for worker in workers.values():
        worker.finish()
    return _table(chosen, calls, per_step, per_run, rounds)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _table(chosen: list[str], calls: dict[str, dict[str, float]], per_step: dict[str, dict[int, list[float]]],
           per_run: dict[str, dict[str, list[float]]], rounds: int) -> str:  # fmt: skip
    short, long = LENGTHS
    bare = calls.get("bare", {})
    lines = [
        f"Growth ({rounds} rounds, medians): overhead above the bare agent of the same round.",
        "",
        f"| variant | extra calls per step at 5 / {short} / {long} steps | overhead per step at {short} steps (µs) "
        f"| at {long} steps (µs) | {long}/{short} | overhead per 5-call run, one at a time (ms) "
        f"| {AT_ONCE} on one thread (ms) | {AT_ONCE} at once (ms) | at once / one at a time "
        "| at once / on one thread |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in chosen[1:]:
        extra = " / ".join(
            f"{(calls[v].get(str(n), 0) - bare.get(str(n), 0)) / n:,.0f}" if calls.get(v) and bare else "n/a"
            for n in (5, short, long)
        )
        at_short, at_long = _median(per_step[v][short]) * 1000, _median(per_step[v][long]) * 1000
        one, pooled = _median(per_run[v]["one"]), _median(per_run[v]["one thread"])
        together = _median(per_run[v]["together"])
        lines.append(
            f"| {v} | {extra} | {at_short:.0f} | {at_long:.0f} | {at_long / at_short:.2f}x | {one:.2f} "
            f"| {pooled:.2f} | {together:.2f} | {together / one:.2f}x | {together / pooled:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--variants", default=",".join(GROWTH_VARIANTS[1:]))
    args = parser.parse_args()
    print(growth_table(ensure_venv(), args.variants.split(","), rounds=args.rounds))


if __name__ == "__main__":
    main()
