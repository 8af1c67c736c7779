"""docs/learning.md's online figures: every development agent with 150 runs or more, replayed prequentially.

    python research/online.py [--data DATA_ROOT] [--seed 0 --seed 1 ...] [--agent KEY] [--json out.json]
                              [--runs-folder DIR] [--keep-default]

What ``rb-otel evaluate --online`` does (:mod:`rb_otel.evaluation.online`), on the development sources of both
kinds (:mod:`rb_otel.training.development`, read natively; nothing the data's README keeps apart is let in): each
agent (its key, as a worker looks its model up) replayed on its own, its runs in a fixed shuffled order per seed
(the development data has no time order; seeds 0, 1, 2 by default), each run scored by the model its agent had
when it started, the agent refitted by ``rb-otel train --watch``'s schedule and fit. The figures of the runs after
50, 100 and 200 labels go to ``research/online_report.json`` (written again after each agent, so a long run leaves
what it has); the per-run records (``rb-otel evaluate --online --json``'s objects) to ``--runs-folder``, outside
the repository (derived from the records: not committed). ``--keep-default`` replays the same orders with no refit
(every run scored by its kind's default), the comparison docs/learning.md puts beside the figures.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.datasets import data_root  # noqa: E402
from rb_otel.evaluation.online import figure_lines, online_figures, ordered, replay_agent  # noqa: E402
from rb_otel.steering.pilot.kinds import AGENT_KINDS  # noqa: E402
from rb_otel.training.dataset import LabelledRun  # noqa: E402
from rb_otel.training.development import read_kind  # noqa: E402
from rb_otel.training.watch import AgentFit  # noqa: E402

MIN_RUNS = 150


def say(line: str) -> None:
    print(f"  {time.strftime('%H:%M:%S')} {line}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="the data root (default: RB_OTEL_DATA, ../shared/data, data/)")
    parser.add_argument("--seed", type=int, action="append", default=None, help="replay order seed (repeatable)")
    parser.add_argument("--agent", action="append", default=None, help="only this agent key (repeatable)")
    parser.add_argument("--kind", choices=AGENT_KINDS, default=None, help="read only this kind's sources")
    parser.add_argument("--json", default=str(ROOT / "research" / "online_report.json"))
    parser.add_argument("--runs-folder", default=None, help="per-run records (default: a temporary folder)")
    parser.add_argument("--keep-default", action="store_true", help="the comparison: no refit, every run scored by "
                        "its kind's default throughout (what an agent got before it had models of its own); written "
                        "under the report's default_kept")  # fmt: skip
    parser.add_argument("--max-runs", type=int, default=None, help="replay at most this many runs of an agent (the "
                        "first of its shuffled order): the cost of the refits grows with the labels")  # fmt: skip
    args = parser.parse_args()
    seeds = args.seed or [0, 1, 2]
    root = Path(args.data) if args.data else data_root()
    runs = []
    for kind in [args.kind] if args.kind else AGENT_KINDS:
        runs += read_kind(kind, root, progress=say).runs
    folder = Path(args.runs_folder or tempfile.mkdtemp(prefix="rb-online-"))
    folder.mkdir(parents=True, exist_ok=True)
    out = Path(args.json)
    report: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    report.update({
        "what": "rb-otel evaluate --online on every development agent with 150+ runs: each agent's runs in a fixed "
                "shuffled order per seed, scored by the model the agent had when the run started, refitted on "
                "train --watch's schedule (50 labels, then each growth by half) by its fit; sizes oriented on the "
                "runs labelled before each cut",
        "min_runs": MIN_RUNS,
        "max_runs_per_agent": args.max_runs,
    })  # fmt: skip
    seeds_done: dict[str, Any] = report.setdefault("default_kept" if args.keep_default else "seeds", {})
    for seed in seeds:
        by_agent = {a: r[: args.max_runs] for a, r in ordered(runs, seed).items() if len(r) >= MIN_RUNS}
        order = sorted(by_agent, key=lambda a: len(by_agent[a]))
        agents: dict[str, Any] = seeds_done.setdefault(str(seed), {})
        for agent in order:
            if args.agent and agent not in args.agent:
                continue
            started = time.perf_counter()
            say(f"seed {seed}: {agent}: replaying {len(by_agent[agent])} runs")
            fits: list[str] = []
            records = replay_agent(by_agent[agent], say=lambda line, fits=fits: (fits.append(line), say(line)),
                                   **({"fit": _no_model} if args.keep_default else {}))  # fmt: skip
            figures = online_figures(records)[agent]
            figures["fits"] = fits
            figures["seconds"] = round(time.perf_counter() - started, 1)
            agents[agent] = figures
            path = folder / f"seed{seed}_{agent.replace('|', '_').replace('/', '_')}.jsonl"
            path.write_text("".join(json.dumps(r.as_dict()) + "\n" for r in records))
            out.write_text(json.dumps(_finite(report), indent=1, default=_plain) + "\n")
            print(f"== seed {seed}")
            print("\n".join(figure_lines({agent: figures})), flush=True)
    say(f"per-run records in {folder}")
    return 0


def _no_model(runs: list[LabelledRun], *, agent: str, **_: Any) -> AgentFit:
    """``--keep-default``'s learner: it publishes nothing, so every run keeps its kind's default."""
    return AgentFit(agent, len(runs), False, False, False, None, "the default kept (--keep-default)", 0.0)


def _plain(value: Any) -> Any:
    return float(value) if hasattr(value, "__float__") else str(value)


def _finite(value: Any) -> Any:
    """``value`` with every NaN as ``null`` (strict JSON)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


if __name__ == "__main__":
    sys.exit(main())
