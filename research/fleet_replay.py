"""The development coding runs replayed by a fleet of worker processes: sharing one SQLite baseline store, or each
learning alone (its own memory), as ``docs/fleet.md`` reports.

    python research/fleet_replay.py [--data DATA_ROOT] [--workers 10] [--pilot-model FILE]

Worker ``i`` of ``n`` takes runs ``i, i+n, i+2n, ...`` in file order; the workers run at the same time, so with a
shared store each one's runs are scored against every run any worker finished before. Each run is scored through
``PilotScorer`` and the real FSM (its thresholds relative to the agent once its baseline holds 20 runs). Prints
the last-step AUROC and the SLOW rates of failing and successful runs for both set-ups. The default model is the
shipped pilot/1, which was fitted on these runs: its absolute figures are in-sample, the difference between the
set-ups is the point.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.backends.pilot import PilotScorer  # noqa: E402
from rb_otel.datasets import data_root, source_folder  # noqa: E402
from rb_otel.evaluation.metrics import auroc  # noqa: E402
from rb_otel.steering.fsm import DifficultyFSM  # noqa: E402
from rb_otel.training.dataset import read_dataset  # noqa: E402
from rb_otel.types import FSMState  # noqa: E402


def worker(job: tuple[str, int, int, str, str | None]) -> list[tuple[int, bool, float, int]]:
    """(run index, failed, last score, most severe state) for this worker's runs."""
    folder, index, workers, store, model = job
    files = sorted(Path(folder).glob("*.traj.json"))  # one run per file: this worker reads its own only
    dataset = read_dataset(files[index::workers], labels=Path(folder) / "results_summary.json")
    scorer = PilotScorer(model=model, baselines=store)
    out = []
    for n, run in enumerate(dataset.runs):
        i = index + n * workers
        live = scorer.start_run(run.agent)
        fsm = DifficultyFSM(**live.fsm_thresholds())
        scores = [live.score(step) for step in run.steps]  # a score never depends on the state: replayed after
        worst = max((state.severity for state in fsm.replay(scores)), default=FSMState.INIT.severity)
        value = scores[-1] if scores else 0.0
        live.finish()
        scorer.baselines.flush(5.0)  # the next run of any worker sees this one (a run takes minutes live)
        out.append((i, run.failed, value, worst))
    scorer.baselines.close()
    return out


def replay(folder: Path, workers: int, shared: str | None, model: str | None) -> dict[str, Any]:
    jobs = [(str(folder), i, workers, shared or "memory://", model) for i in range(workers)]
    with multiprocessing.get_context("spawn").Pool(min(workers, 8)) as pool:
        rows = sorted(r for part in pool.map(worker, jobs) for r in part)
    y = [failed for _, failed, _, _ in rows]
    slow = FSMState.SLOW.severity
    failing = [worst >= slow for _, failed, _, worst in rows if failed]
    succeeding = [worst >= slow for _, failed, _, worst in rows if not failed]
    return {
        "auroc_last": auroc(y, [score for _, _, score, _ in rows]),
        "slow_failing": sum(failing) / len(failing),
        "slow_successful": sum(succeeding) / len(succeeding),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the data root (default: as rb_otel.datasets finds it)")
    parser.add_argument("--workers", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--pilot-model", default=None)
    args = parser.parse_args()
    folder = source_folder("signal/mini_swe_agent_gemini3pro", args.data or data_root())
    with tempfile.TemporaryDirectory() as tmp:
        for workers in args.workers:
            for label, store in (("isolated (memory each)", None), ("one shared SQLite store", f"{tmp}/b{workers}.db")):
                figures = replay(folder, workers, store, args.pilot_model)
                print(f"{workers} workers, {label}: AUROC last step {figures['auroc_last']:.3f}, SLOW on "
                      f"{figures['slow_failing']:.1%} of failing / {figures['slow_successful']:.1%} of successful runs",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
