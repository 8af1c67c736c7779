"""Cost of the steering core per step: ``begin_step`` + ``end_step`` with ``create_injections()``.

Embedded monitors and E-traces on, realistic thoughts; reported as median/p90 microseconds per step at run
lengths 10, 100, 1,000 and 10,000 (the cost must not grow with run length): the median over ``--rounds``
interleaved rounds of each round's median, and the best round's. Then the same with cold CPU caches: inside an
agent, LangGraph's work between two model calls evicts the core from the caches, which makes it several times
slower than in this tight loop; ``--evict-mb`` megabytes are touched before each step (outside the timing) to show
that cost without an agent. Numbers, not assertions.

    python benchmarks/bench_steering.py [--rounds 5] [--evict-mb 32] [--scorer heuristic|pilot] [--json FILE]
                                        [--baselines memory|sqlite|redis|URL] [--thought-chars N]

``--thought-chars N``: the long-reasoning variant: every thought is N characters (a reasoning model's turn: the
corpus's real thoughts run together, a different mix each step, then the step's own thought at the end).

``--baselines`` (with the pilot): where the agent's baselines live; every measured run reads its baseline at its
start and hands its summary to the store at its end, as a live run does. ``sqlite`` is a temporary file,
``redis`` a ``redis-server`` started for the benchmark on a free port (Debian's package).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from _thoughts import thoughts

from rb_otel import ReasonBlocks
from rb_otel.steering import DifficultyFSM, SteeringSession, TraceStateManager, create_injections
from rb_otel.steering.etraces import InMemoryPatternStore, Pattern, RetrievalQuery


def evictor(megabytes: int) -> Callable[[], None]:
    """A function that writes one byte per 64-byte line of a ``megabytes`` buffer (evicting the CPU caches)."""
    buffer = bytearray(megabytes << 20)
    ones = b"\x01" * len(buffer[::64])

    def evict() -> None:
        buffer[::64] = ones

    return evict


def long_thoughts(corpus: list[tuple[str, str, str]], chars: int) -> list[tuple[str, str, str]]:
    """The corpus with each thought grown to ``chars`` characters of the corpus's own text (``0``: as it is)."""
    if chars <= 0:
        return corpus
    texts = [t for t, _, _ in corpus]
    grown = []
    for i, (thought, action, action_input) in enumerate(corpus):
        parts: list[str] = []
        size, j = 0, i
        while size < chars - len(thought):
            part = texts[j % len(texts)]
            parts.append(part)
            size += len(part) + 1
            j += 3  # a different mix for each thought
        reasoning = " ".join(parts)[: max(chars - len(thought) - 1, 0)]
        grown.append((f"{reasoning} {thought}", action, action_input))
    return grown


def run_steps(
    n: int, corpus: list[tuple[str, str, str]], evict: Callable[[], None] | None = None, scorer: Any = "heuristic"
) -> list[float]:
    session = SteeringSession(
        score_fn=ReasonBlocks.score_step,
        scorer=None if scorer == "heuristic" else scorer,
        agent="bench|model",
        fsm=DifficultyFSM() if scorer == "heuristic" else None,
        state_manager=TraceStateManager(),
        injections=create_injections(),
        run_metadata={"task": "fix the pixel data bug"},
    )
    timings = []
    for i in range(n):
        thought, action, action_input = corpus[i % len(corpus)]
        step_thought = None if i == 0 else f"{thought} [{i}]"  # built outside the timing: the agent's work
        step_input = f"{action_input} {i % 13}"
        if evict is not None:
            evict()
        started = time.perf_counter()
        decision = session.begin_step(thought=step_thought, action=action, action_input=step_input, observation="ok")
        session.end_step(decision, tokens=500, tool_calls=[action])
        timings.append((time.perf_counter() - started) * 1e6)
    session.finish()  # the pilot hands the run's summary to its baseline store
    return timings


@contextlib.contextmanager
def baseline_url(kind: str) -> Iterator[str]:
    """The store URL for ``--baselines``: a temporary SQLite file, a fresh local redis-server, or as given."""
    if kind == "memory" or "://" in kind:
        yield kind if "://" in kind else "memory://"
        return
    with tempfile.TemporaryDirectory() as tmp:
        if kind == "sqlite":
            yield f"sqlite://{tmp}/bench.db"
            return
        binary = shutil.which("redis-server")
        if kind != "redis" or binary is None:
            raise SystemExit(f"--baselines {kind}: use memory, sqlite, redis (needs redis-server) or a URL")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", "", "--appendonly", "no"]
        server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            server.terminate()
            server.wait(timeout=10)


def store_query_us(patterns: int = 1000, queries: int = 2000) -> float:
    corpus = thoughts()
    store = InMemoryPatternStore(
        Pattern("e1", {"guidance": f"{t} lesson {i}"}, f"p{i}")
        for i, (t, _, _) in enumerate(corpus * (patterns // len(corpus) + 1))
    )
    query = RetrievalQuery(tier="e1", context=corpus[0][0], top_k=1)
    store.retrieve(query)  # build the index
    started = time.perf_counter()
    for _ in range(queries):
        store.retrieve(query)
    return (time.perf_counter() - started) / queries * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="rounds over all run lengths (this VM's speed drifts)")
    parser.add_argument("--evict-mb", type=int, default=32, help="megabytes touched before each cold step (0: skip)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--scorer", choices=["heuristic", "pilot"], default="heuristic", help="the step scorer")
    parser.add_argument("--baselines", default="memory", help="the pilot's store: memory, sqlite, redis or a URL")
    parser.add_argument("--thought-chars", type=int, default=0, help="long-reasoning variant: N-character thoughts")
    parser.add_argument("--lengths", default="10,100,1000,10000", help="run lengths (comma-separated)")
    args = parser.parse_args()
    with baseline_url(args.baselines) as url:
        measure(args, url)


def measure(args: argparse.Namespace, url: str) -> None:
    from rb_otel.backends.pilot import PilotScorer

    corpus = long_thoughts(thoughts(), args.thought_chars)
    if args.thought_chars:
        print(f"thoughts: {args.thought_chars:,} characters each")
    scorer: Any = args.scorer
    if args.scorer == "pilot":
        scorer = PilotScorer(baselines=url)
        print(f"scorer: pilot, baselines in {scorer.baselines.url}")
    else:
        print(f"scorer: {args.scorer}")
    args.scorer = scorer
    run_steps(200, corpus, scorer=args.scorer)  # warm-up: caches, regexes, the store
    lengths = tuple(int(v) for v in args.lengths.split(","))
    medians: dict[int, list[float]] = {n: [] for n in lengths}
    p90s: dict[int, list[float]] = {n: [] for n in lengths}
    tails: dict[int, list[float]] = {n: [] for n in lengths}
    for _ in range(args.rounds):  # interleaved, so a slow minute of the machine hits every length alike
        for n in lengths:
            t = run_steps(n, corpus, scorer=args.scorer)
            medians[n].append(statistics.median(t))
            p90s[n].append(statistics.quantiles(t, n=10)[-1])
            tails[n].append(statistics.median(t[-max(n // 10, 1) :]))
    results: dict[str, dict[str, float]] = {}
    print(f"{'steps':>7} {'median us':>10} {'best round':>11} {'p90 us':>8} {'last-10% median us':>19}")
    for n in lengths:
        row = {
            "median_us": statistics.median(medians[n]),
            "best_round_median_us": min(medians[n]),
            "p90_us": statistics.median(p90s[n]),
            "tail_median_us": statistics.median(tails[n]),
        }
        results[str(n)] = row
        print(
            f"{n:>7} {row['median_us']:>10.1f} {row['best_round_median_us']:>11.1f} {row['p90_us']:>8.1f} "
            f"{row['tail_median_us']:>19.1f}"
        )
    if args.evict_mb > 0:
        evict = evictor(args.evict_mb)
        cold = [statistics.median(run_steps(100, corpus, evict, args.scorer)) for _ in range(args.rounds)]
        results["cold_caches_100_steps"] = {"median_us": statistics.median(cold), "evict_mb": args.evict_mb}
        print(f"cold caches ({args.evict_mb} MB touched before each step), 100-step runs: median "
              f"{statistics.median(cold):.1f} us per step")  # fmt: skip
    q = store_query_us()
    results["store_query_1000_patterns"] = {"mean_us": q}
    print(f"embedded store, 1,000 patterns: {q:.1f} us per query")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if isinstance(scorer, PilotScorer):
        scorer.baselines.close()


if __name__ == "__main__":
    main()
