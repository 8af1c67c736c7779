"""Fit the pilot on half of each development source's task groups and test it on the other half.

    python training/half_split.py [--data ../shared/data/signal] [--seeds 5] [--json out.json]

What ``rb-otel train`` + ``rb-otel evaluate --pilot-model`` would report for a user who labelled half of their
tasks: for each source and each seed, the task groups (a SWE-bench instance; a tau2 user scenario across policy
variants) are split in two, ``train_dataset`` fits on one half (its own nested cross-validation, its own SKIP
threshold for a 1% false-stop budget), and the other half is scored live through ``PilotScorer`` (each agent's
baseline learned in file order from the test half itself, as a fresh deployment would), through the real FSM.
Nothing of the test half is seen by the fit. Prints the figures against the issue's targets.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.evaluation.early import RunTrace, at_first_state, early_warning, stopping  # noqa: E402
from rb_otel.evaluation.metrics import auroc  # noqa: E402
from rb_otel.steering.fsm import DifficultyFSM  # noqa: E402
from rb_otel.steering.pilot import PilotScorer  # noqa: E402
from rb_otel.training import train_dataset  # noqa: E402
from rb_otel.training.dataset import Dataset, LabelledRun, read_dataset  # noqa: E402
from rb_otel.types import FSMState  # noqa: E402

SOURCES = {
    "coding (SWE, Gemini 3)": ("mini_swe_agent_gemini3pro.tar.xz", "results_summary.json"),
    "customer service (tau2, Grok)": ("tau2_grok.tar.xz", None),
}


def unpack(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
        top = sorted({m.name.split("/", 1)[0] for m in tar.getmembers()})[0]
    return into / top


def halves(runs: list[LabelledRun], seed: int) -> tuple[list[LabelledRun], list[LabelledRun]]:
    groups = sorted({r.group for r in runs})
    rng = np.random.default_rng(seed)
    chosen = set(rng.permutation(groups)[: len(groups) // 2].tolist())
    return [r for r in runs if r.group in chosen], [r for r in runs if r.group not in chosen]


def score(model: Any, runs: list[LabelledRun]) -> list[RunTrace]:
    scorer = PilotScorer(model=model, baselines="memory://")
    traces = []
    for run in runs:
        live = scorer.start_run(run.agent)
        fsm = DifficultyFSM(**live.fsm_thresholds())
        state, history, scores, states = FSMState.INIT, [], [], []
        for step in run.steps:
            value = live.score(step)
            history.append(value)
            state = fsm.transition(state, history)
            scores.append(value)
            states.append(state.value)
        live.finish()
        chars = np.cumsum([len(s.thought or "") + len(s.action_input or "") for s in run.steps]).tolist()
        traces.append(RunTrace(run.failed, scores, chars, run.prompt_tokens, run.tokens, states))
    return traces


def figures(traces: list[RunTrace]) -> dict[str, float]:
    y = [t.failed for t in traces]
    early = {r.k: r for r in early_warning(traces, steps=(10,))}
    skip = stopping(traces, "skip", at_first_state("SKIP"))
    slow = stopping(traces, "slow", at_first_state("SLOW"))
    row = early.get(10)
    return {
        "runs": len(traces),
        "failed": sum(y),
        "auroc_last": auroc(y, [t.scores[-1] for t in traces]),
        "chars_last": auroc(y, [t.chars[-1] for t in traces]),
        "steps_last": auroc(y, [len(t.scores) for t in traces]),
        "auroc_step10": row.score if row else float("nan"),
        "chars_step10": row.chars if row else float("nan"),
        "prompt_step10": row.prompt_tokens if row else float("nan"),
        "skip_failing": skip.stopped_failing,
        "skip_successful": skip.stopped_successful,
        "skip_steps_saved": skip.steps_saved,
        "skip_tokens_saved": skip.tokens_saved,
        "slow_failing": slow.stopped_failing,
        "slow_successful": slow.stopped_successful,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "signal"))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (archive, labels) in SOURCES.items():
            folder = unpack(Path(args.data) / archive, Path(tmp))
            dataset = read_dataset([folder], labels=folder / labels if labels else None)
            rows = []
            for seed in range(args.seeds):
                fit_half, test_half = halves(dataset.runs, seed)
                result = train_dataset(Dataset(fit_half), shuffles=0, seed=seed)
                row = figures(score(result.model, test_half))
                row["family"] = result.model.trained["family"]
                rows.append(row)
                shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
                print(f"{name} seed {seed}: {shown}", flush=True)
            keys = [k for k in rows[0] if isinstance(rows[0][k], float)]
            out[name] = {"seeds": rows, "mean": {k: float(np.nanmean([r[k] for r in rows])) for k in keys}}
    print()
    for name, result in out.items():
        m = result["mean"]
        print(f"{name}, mean of {args.seeds} half splits (fit on half the task groups, tested on the other half):")
        print(
            f"  last-step AUROC {m['auroc_last']:.3f} (characters {m['chars_last']:.3f}, steps {m['steps_last']:.3f})"
        )
        print(f"  step-10 AUROC {m['auroc_step10']:.3f} (characters so far {m['chars_step10']:.3f}, prompt tokens "
              f"so far {m['prompt_step10']:.3f})")  # fmt: skip
        print(f"  SKIP: {m['skip_failing']:.1%} of failing, {m['skip_successful']:.1%} of successful runs; "
              f"{m['skip_steps_saved']:.1%} of steps, {m['skip_tokens_saved']:.1%} of tokens saved")  # fmt: skip
        print(f"  SLOW: {m['slow_failing']:.1%} of failing, {m['slow_successful']:.1%} of successful runs")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
