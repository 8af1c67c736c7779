"""Fit the pilot on half of each development source's task groups and test it on the other half.

    python research/half_split.py [--data DATA_ROOT] [--seeds 5] [--first-seed 5] [--json out.json]

Reads the development records from the data root (``--data``, else ``RB_OTEL_DATA``, ``../shared/data`` beside the
repository or ``make data``'s ``data/``).

What ``rb-otel train`` + ``rb-otel evaluate --pilot-model`` would report for a user who labelled half of their
tasks: for each source and each seed, the task groups (a SWE-bench instance; a tau2 user scenario across policy
variants) are split in two, ``train_dataset`` fits on one half (its own nested cross-validation, its own SKIP
threshold for a 1% false-stop budget), and the other half is scored live through ``PilotScorer`` (each agent's
baseline learned in file order from the test half itself, as a fresh deployment would), through the real FSM.
Nothing of the test half is seen by the fit. Every baseline is *oriented on the fit half*: its direction (more, or
less, means failure) is the one it has on the fit half, and the test half is scored with it. The seeds are 5-9 by
default: seeds 0-4 were used before this release to compare SKIP holds, a choice ``rb-otel train`` now makes
itself by inner cross-validation, so the published figures come from seeds that took part in no choice. The half
fits run without the permutation test (``permutations=0``: what is measured here is the test half, not the gate).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.backends.pilot import PilotScorer  # noqa: E402
from rb_otel.datasets import data_root, source_folder  # noqa: E402
from rb_otel.evaluation.early import RunTrace, at_first_state, early_warning, stopping  # noqa: E402
from rb_otel.evaluation.metrics import auroc  # noqa: E402
from rb_otel.steering.fsm import DifficultyFSM  # noqa: E402
from rb_otel.training import train_dataset  # noqa: E402
from rb_otel.training.dataset import Dataset, LabelledRun, read_dataset  # noqa: E402
from rb_otel.training.kept_apart import refuse_kept_apart, refuse_kept_apart_files  # noqa: E402

#: Each source: its folder under the data root (``signal/<name>``, or that folder's ``.tar.xz``) and its labels file.
SOURCES = {
    "coding (SWE, Gemini 3)": ("signal/mini_swe_agent_gemini3pro", "results_summary.json"),
    "customer service (tau2, Grok)": ("signal/tau2_grok", None),
}


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
        scores = [live.score(step) for step in run.steps]  # a score never depends on the state: replayed after
        states = [state.value for state in fsm.replay(scores)]
        live.finish()
        chars = np.cumsum([len(s.thought or "") + len(s.action_input or "") for s in run.steps]).tolist()
        traces.append(RunTrace(run.failed, scores, chars, run.prompt_tokens, run.tokens, states))
    return traces


#: The same-prefix baselines: at the last step (characters written, steps) and at step 10 (characters and the
#: largest prompt so far), each a function of a run's steps.
BASELINES: dict[str, Any] = {
    "chars_last": lambda r: sum(len(s.thought or "") + len(s.action_input or "") for s in r.steps),
    "steps_last": lambda r: len(r.steps),
    "chars_step10": lambda r: sum(len(s.thought or "") + len(s.action_input or "") for s in r.steps[:10]),
    "prompt_step10": lambda r: r.prompt_tokens[9] if len(r.prompt_tokens) >= 10 else 0,
}


def directions(runs: list[LabelledRun]) -> dict[str, int]:
    """Each baseline's direction on the fit half (+1: more means failure, -1: less)."""
    out = {}
    for name, value in BASELINES.items():
        going = [r for r in runs if name.endswith("last") or len(r.steps) >= 10]
        a = auroc([r.failed for r in going], [float(value(r)) for r in going])
        out[name] = -1 if a < 0.5 else 1
    return out


def figures(traces: list[RunTrace], runs: list[LabelledRun], signs: dict[str, int]) -> dict[str, float]:
    y = [t.failed for t in traces]
    early = {r.k: r for r in early_warning(traces, steps=(10,))}
    skip = stopping(traces, "skip", at_first_state("SKIP"))
    slow = stopping(traces, "slow", at_first_state("SLOW"))
    row = early.get(10)
    going = [i for i, r in enumerate(runs) if len(r.steps) >= 10]

    def oriented(name: str, index: list[int]) -> float:
        values = [signs[name] * float(BASELINES[name](runs[i])) for i in index]
        return auroc([runs[i].failed for i in index], values)

    every = list(range(len(runs)))
    prompt = oriented("prompt_step10", going) if any(runs[i].prompt_tokens[9] for i in going) else float("nan")
    return {
        "runs": len(traces),
        "failed": sum(y),
        "auroc_last": auroc(y, [t.scores[-1] for t in traces]),
        "chars_last": oriented("chars_last", every),
        "steps_last": oriented("steps_last", every),
        "auroc_step10": row.score if row else float("nan"),
        "chars_step10": oriented("chars_step10", going),
        "prompt_step10": prompt,
        "skip_failing": skip.stopped_failing,
        "skip_successful": skip.stopped_successful,
        "skip_steps_saved": skip.steps_saved,
        "skip_tokens_saved": skip.tokens_saved,
        "slow_failing": slow.stopped_failing,
        "slow_successful": slow.stopped_successful,
    }


def read_source(folder: Path, labels: str | None = None) -> Dataset:
    """A development source's labelled runs, refused when any is of an agent the data's README keeps apart (by its
    files' markers and by the runs' agents: rb_otel.training.kept_apart)."""
    refuse_kept_apart_files([folder])
    dataset = read_dataset([folder], labels=folder / labels if labels else None)
    refuse_kept_apart(dataset.runs)
    return dataset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the data root (default: as rb_otel.datasets finds it)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=5, help="seeds 0-4 took part in a choice before")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    out: dict[str, Any] = {}
    root = args.data or data_root()
    for name, (source, labels) in SOURCES.items():
        dataset = read_source(source_folder(source, root), labels)
        rows = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            fit_half, test_half = halves(dataset.runs, seed)
            result = train_dataset(Dataset(fit_half), shuffles=0, seed=seed, permutations=0)
            signs = directions(fit_half)
            row = figures(score(result.model, test_half), test_half, signs)
            row["family"] = result.model.trained["family"]
            row["skip_on"] = float(result.report.skip_on)
            row.update({f"direction_{k}": float(v) for k, v in signs.items()})
            rows.append(row)
            shown = ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items())
            print(f"{name} seed {seed}: {shown}", flush=True)
        keys = [k for k in rows[0] if isinstance(rows[0][k], float)]
        out[name] = {"seeds": rows, "mean": {k: float(np.nanmean([r[k] for r in rows])) for k in keys}}
    print()
    for name, result in out.items():
        m = result["mean"]
        print(f"{name}, mean of {args.seeds} half splits (fit on half the task groups, tested on the other half):")
        print(f"  last-step AUROC {m['auroc_last']:.3f} (oriented on the fit half: characters {m['chars_last']:.3f}, "
              f"steps {m['steps_last']:.3f})")  # fmt: skip
        print(f"  step-10 AUROC {m['auroc_step10']:.3f} (oriented: characters so far {m['chars_step10']:.3f}, prompt "
              f"tokens so far {m['prompt_step10']:.3f})")  # fmt: skip
        print(f"  SKIP on in {m['skip_on']:.0%} of the half fits; {m['skip_failing']:.1%} of failing, "
              f"{m['skip_successful']:.1%} of successful runs; "
              f"{m['skip_steps_saved']:.1%} of steps, {m['skip_tokens_saved']:.1%} of tokens saved")  # fmt: skip
        print(f"  SLOW: {m['slow_failing']:.1%} of failing, {m['slow_successful']:.1%} of successful runs")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
