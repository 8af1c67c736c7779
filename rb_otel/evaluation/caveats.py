"""What an evaluation's figures cannot say, in the sentences a user needs: too few runs, one outcome only, runs the
scoring model was fitted on (in-sample)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FEW_OF_EITHER", "FEW_RUNS", "fit_caveat", "outcome_caveats"]

#: Below this many runs, or this many of either outcome, an AUROC and its interval say little (ab-report warns
#: below 30 finished runs an arm; rb-otel train judges a fit only from 100 runs and 20 failures).
FEW_RUNS = 30
FEW_OF_EITHER = 10
#: The flag that gives runs their outcomes, as every message names it.
LABELS_HINT = "--labels FILE (SWE-bench results.json, mini-swe-agent results_summary.json, or {run_id: true|false})"


def outcome_caveats(failed: Sequence[bool], unlabelled: int) -> list[str]:
    """The caveats on runs with these outcomes (``True``: failed), ``unlabelled`` more left out for having none."""
    n, bad = len(failed), sum(failed)
    caveats = []
    if n and bad in (0, n):
        have, need = ("failed", "succeeded") if bad else ("succeeded", "failed")
        fix = f"pass {LABELS_HINT} for the {unlabelled} run(s) without one, or " if unlabelled else ""
        caveats.append(f"one outcome only: all {n} runs {have}, and an AUROC compares failed with successful runs "
                       f"(n/a above); {fix}add runs that {need}")  # fmt: skip
    if n and (n < FEW_RUNS or min(bad, n - bad) < FEW_OF_EITHER):
        caveats.append(f"few runs: {n} runs, {bad} failed; on fewer than {FEW_RUNS} runs or {FEW_OF_EITHER} of "
                       "either outcome an AUROC and its interval say little")  # fmt: skip
    return caveats


def fit_caveat(model: str, inside: int, outside: int, out_of_fold: float | None) -> str | None:
    """What the figures are worth given the runs of the scoring model's own fit among them: ``inside`` of them
    were in it (the run, or a run of its task), ``outside`` were not; ``out_of_fold`` is ``rb-otel train``'s own
    figure for the model, when its file has one. ``None`` when none was in the fit."""
    if not inside:
        return None
    seen = "the model's fit (the runs, or runs of their tasks)"
    if outside:
        return (f"{inside} of the {inside + outside} runs were in {seen}: the figures above are on the {outside} "
                f"runs not in it; the in-sample figures on the others, below, flatter {model}")  # fmt: skip
    told = f"; rb-otel train's own out-of-fold AUROC for it was {out_of_fold:.3f}" if out_of_fold is not None else ""
    return f"in-sample: all {inside} runs were in {seen}, so these figures flatter {model}{told}"
