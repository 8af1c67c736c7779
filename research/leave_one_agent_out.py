"""docs/signal.md's headline: each development agent held out in turn, fitted on the others, scored live.

    python research/leave_one_agent_out.py [--data DATA_ROOT] [--json out.json]

Reads the development records from the data root (``--data``, else ``RB_OTEL_DATA``, ``../shared/data`` beside the
repository or ``make data``'s ``data/``; archives are unpacked outside the repository), reads every
labelled run (five agents: Gemini 3 Pro in mini-swe-agent on SWE-bench Verified; grok-3, grok-3-mini, grok-4 and
grok-4-fast-reasoning on tau2-bench), and runs :func:`rb_otel.training.held_out.leave_one_agent_out` twice: as
``rb-otel train`` does (the held-out agent's runs out of the fit) and with its task groups kept out too (no
customer on both sides). Beside it, the converged side of the successful coding runs: the share of each one's
tokens spent after its last change to the workspace (label-free). Writes the JSON that docs/signal.md's tables
come from (``research/leave_one_agent_out_report.json``); about 5 minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from half_split import SOURCES  # noqa: E402

from rb_otel.datasets import data_root, source_folder  # noqa: E402
from rb_otel.training.dataset import read_dataset  # noqa: E402
from rb_otel.training.held_out import leave_one_agent_out, tokens_after_last_change  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=None, help="the data root (default: as rb_otel.datasets finds it)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--max-false-stops", type=float, default=0.02)
    args = parser.parse_args()
    runs = []
    converged: list[float] = []
    root = args.data or data_root()
    for name, (source, labels) in SOURCES.items():
        folder = source_folder(source, root)
        data = read_dataset([folder], labels=folder / labels if labels else None)
        runs += data.runs
        if name.startswith("coding"):
            shares = [tokens_after_last_change(r) for r in data.runs if not r.failed]
            converged = [s for s in shares if s is not None]
    out: dict[str, object] = {}
    for key, apart in (("held_out", False), ("held_out_with_tasks_apart", True)):
        started = time.perf_counter()
        report = leave_one_agent_out(runs, max_false_stops=args.max_false_stops, keep_tasks_apart=apart,
                                     progress=lambda line: print(f"  {line}", file=sys.stderr))  # fmt: skip
        print("\n".join(report.lines()))
        out[key] = {**report.as_dict(), "seconds": round(time.perf_counter() - started, 1)}
    out["converged_side"] = {
        "what": "share of each successful coding run's tokens spent after its last change to the workspace",
        "runs": len(converged),
        "mean": float(np.mean(converged)),
        "median": float(np.median(converged)),
    }
    print(f"converged side: successful coding runs spent {np.mean(converged):.1%} of their tokens (median "
          f"{np.median(converged):.1%}) after their last change to the workspace ({len(converged)} runs)")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
