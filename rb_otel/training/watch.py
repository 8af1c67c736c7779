"""``rb-otel train SOURCE --watch --store URL``: refit each agent from its own outcomes, beside the fleet.

One watcher per fleet, a process of its own (a sidecar, a cron job): it polls the source (trace files, a chdb
folder, ClickHouse: what ``rb-otel train`` reads, outcomes from ``--labels`` and from the runs' outcome events)
every ``interval`` seconds, and refits an agent whenever its labelled runs have grown by half since its last fit,
from :data:`MIN_LABELS` up (:func:`refit_due`: 50, 75, 113, 170, ... labelled runs; the schedule
``rb-otel evaluate --online`` replays too).

A fit is ``rb-otel train``'s honest procedure on that agent's runs alone (:func:`fit_agent`): task-grouped folds,
size baselines oriented on the training side, the permutation gate, SLOW/SKIP thresholds chosen on
cross-fitted folds with SKIP's false stops under a Wilson bound. Below
:data:`~rb_otel.training.report.MIN_RUNS` runs or :data:`~rb_otel.training.report.MIN_FAILURES` failures the
report never trusts a fit, so none is run there (the schedule still counts it as the agent's fit).

What reaches the store (:mod:`rb_otel.backends.baselines.models`): a trusted fit's model, its number of labels,
its fit time, and which of SLOW and SKIP its own cross-fitted record earned (:func:`earned_states`); an unearned
state's threshold is 1.0 in the model, so a worker never enters it. Where no fit is trusted (below 100 labelled
runs none is judged), the agent's size oriented by its labelled runs, when they make one clear
(:mod:`rb_otel.training.oriented_size`: the measure and direction its own runs point, with SLOW and SKIP where its
cross-fitted record earns them, by the same rule). A later fit that publishes neither withdraws the agent's model
(its workers go back to the default pilot): a claim the larger record no longer supports is not left standing.
Nothing of this runs in an agent's process: workers only read the record
(:mod:`rb_otel.backends.baselines.model_cache`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rb_otel.backends.baselines.models import ModelStore, StoredModel
from rb_otel.importers.labels import Labels, load_labels
from rb_otel.steering.pilot import PilotModel
from rb_otel.training.dataset import Dataset, LabelledRun, read_dataset
from rb_otel.training.earned import earned_states, with_states
from rb_otel.training.oriented_size import oriented_size
from rb_otel.training.permutation import PERMUTATIONS
from rb_otel.training.report import MIN_FAILURES, MIN_RUNS

__all__ = [
    "GROWTH",
    "INTERVAL_RANGE",
    "MIN_LABELS",
    "AgentFit",
    "Watcher",
    "earned_states",
    "fit_agent",
    "refit_due",
    "watch",
]

#: An agent's first fit comes at this many labelled runs.
MIN_LABELS = 50
#: ... and the next each time its labelled runs have grown by this factor since its last fit.
GROWTH = 1.5
#: The poll interval's bounds (seconds).
INTERVAL_RANGE = (1.0, 86_400.0)


def refit_due(labels: int, last: int | None) -> bool:
    """Whether an agent with ``labels`` labelled runs is due a fit, its last fit having seen ``last`` (``None``:
    never fitted): from :data:`MIN_LABELS` up, whenever they have grown by half (:data:`GROWTH`)."""
    if labels < MIN_LABELS:
        return False
    return last is None or labels >= math.ceil(last * GROWTH)


@dataclass(frozen=True, slots=True)
class AgentFit:
    """One agent's fit: whether it is trusted (and why not), what it earned, and its model (``None`` when no fit
    was run)."""

    agent: str
    labels: int
    trusted: bool
    slow: bool
    skip: bool
    model: PilotModel | None
    why: str  # "" when trusted; else every reason, in words
    seconds: float
    #: Where no fit is trusted, the agent's size oriented by its labelled runs (:mod:`~.oriented_size`), told in
    #: words; its model is then ``model``. ``None``: none was clear (or a fit is trusted).
    oriented: str | None = None

    @property
    def publishes(self) -> bool:
        """Whether this fit puts a model in the store: a trusted fit, or else the agent's oriented size."""
        return self.model is not None and (self.trusted or self.oriented is not None)

    def record(self, fitted_at: float | None = None) -> StoredModel:
        """The store's record of what this fit publishes (:attr:`publishes`)."""
        assert self.model is not None
        assert self.publishes
        return StoredModel(self.agent, self.model.as_dict(), self.labels, time.time() if fitted_at is None else
                           fitted_at, self.slow, self.skip, self.model)  # fmt: skip

    def line(self) -> str:
        """One line for the watcher's log."""
        if not self.trusted and self.oriented is not None:
            return (f"{self.agent}: {self.labels} labelled runs, fit not trusted ({self.why}); its size oriented by "
                    f"them: {self.oriented}")  # fmt: skip
        if not self.trusted:
            return f"{self.agent}: {self.labels} labelled runs, not trusted ({self.why})"
        states = ", ".join(s for s, on in (("SLOW", self.slow), ("SKIP", self.skip)) if on) or "neither SLOW nor SKIP"
        return f"{self.agent}: {self.labels} labelled runs, trusted, earned {states} ({self.seconds:.0f} s)"


def fit_agent(
    runs: Sequence[LabelledRun],
    *,
    agent: str | None = None,
    max_false_stops: float = 0.02,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> AgentFit:
    """Fit one agent's labelled runs (in file order) by ``rb-otel train``'s procedure (module docstring)."""
    from rb_otel.training.train_model import TrainingError, train_dataset

    started = time.monotonic()
    name = agent if agent is not None else (runs[0].agent if runs else "")
    failed = sum(r.failed for r in runs)

    def untrusted(why: str, model: PilotModel | None) -> AgentFit:
        # no trusted fit: the agent's size oriented by its labelled runs, where they make one clear
        size = oriented_size(runs, agent=name, kind=runs[0].kind, max_false_stops=max_false_stops) if runs else None
        if size is None:
            return AgentFit(name, len(runs), False, False, False, model, why, time.monotonic() - started)
        return AgentFit(name, len(runs), False, size.slow, size.skip, size.model, why, time.monotonic() - started,
                        size.describe())  # fmt: skip

    if len(runs) < MIN_RUNS or failed < MIN_FAILURES or failed == len(runs):
        return untrusted(f"{len(runs)} runs with {failed} failures: a fit is judged from {MIN_RUNS} runs and "
                         f"{MIN_FAILURES} failures (and both outcomes)", None)  # fmt: skip
    try:
        with _one_blas_thread():
            result = train_dataset(Dataset(runs=list(runs)), max_false_stops=max_false_stops, shuffles=0, seed=seed,
                                   permutations=permutations, held_out_agents=False)  # fmt: skip
    except TrainingError as exc:
        return untrusted(str(exc), None)
    report = result.report
    if not report.trusted:
        return untrusted("; ".join(report.warnings), result.model)
    slow, skip = earned_states(report.stopping, report.skip_on)
    model = with_states(result.model, name, len(runs), slow, skip)
    return AgentFit(name, len(runs), True, slow, skip, model, "", time.monotonic() - started)


def _one_blas_thread() -> Any:
    """One BLAS thread for the fit. The fits are many small L-BFGS problems whose BLAS calls are too small to
    share out: spare OpenBLAS threads spin, and on a machine whose cores are busy (a sidecar beside a fleet) they
    made six fits of 200 runs 2 to 6 times slower (13.5-34.6 s against 5.6-6.5 s, measured on two shared cores).
    The permutation gate's processes already take one thread each (:mod:`rb_otel.training.permutation`)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


def labels_of(paths: Sequence[str | Path], labels: str | Path | Labels | None) -> Labels | None:
    """The outcomes a fit reads: ``labels`` (a file's entries win, run by run) over the outcome events recorded
    where the traces live (``gen_ai.evaluation.result``: :mod:`rb_otel.importers.outcome_events`); a source that
    is not files of rb-otel's, or a store, holds none."""
    from rb_otel.importers.outcome_events import outcome_labels

    given = load_labels(labels) if isinstance(labels, str | Path) else labels
    recorded = outcome_labels(paths)
    if given is None:
        return recorded
    return given.beside(recorded)


def agent_runs(dataset: Dataset) -> dict[str, list[LabelledRun]]:
    """Each agent's labelled runs (by the key its workers look its model up by), in file order."""
    out: dict[str, list[LabelledRun]] = {}
    for run in dataset.runs:
        out.setdefault(run.agent, []).append(run)
    return out


class Watcher:
    """The poll-and-refit state of one ``--watch`` process (module docstring). ``fit`` is :func:`fit_agent` (a
    test may count what reaches it); ``say`` gets one line per event."""

    def __init__(
        self,
        paths: Sequence[str | Path],
        store: ModelStore,
        *,
        labels: str | Path | Labels | None = None,
        read: Callable[..., Dataset] = read_dataset,
        read_options: dict[str, Any] | None = None,
        fit: Callable[..., AgentFit] = fit_agent,
        fit_options: dict[str, Any] | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.paths = list(paths)
        self.store = store
        self.labels = labels
        self._read, self._read_options = read, dict(read_options or {})
        self._fit, self._fit_options = fit, dict(fit_options or {})
        self.say = say
        #: Labelled runs each agent had at its last fit (a restarted watcher starts from what the store holds).
        self.last: dict[str, int] = {m.agent: m.labels for m in store.models()}

    def poll(self) -> list[AgentFit]:
        """Read the source once and fit every agent that is due; the fits made."""
        dataset = self._read(self.paths, labels=labels_of(self.paths, self.labels), **self._read_options)
        by_agent = agent_runs(dataset)
        due = {a: runs for a, runs in by_agent.items() if refit_due(len(runs), self.last.get(a))}
        waiting = ", ".join(f"{a} {len(r)}" for a, r in sorted(by_agent.items()) if a not in due) or "none"
        self.say(f"{len(dataset.runs)} labelled runs of {len(by_agent)} agent(s); due a fit: {len(due)}; "
                 f"labelled runs of the others: {waiting}")  # fmt: skip
        fits = []
        for agent, runs in sorted(due.items()):
            self.say(f"{agent}: fitting {len(runs)} labelled runs")
            fit = self._fit(runs, agent=agent, **self._fit_options)
            self._publish(fit)
            fits.append(fit)
        return fits

    def _publish(self, fit: AgentFit) -> None:
        """Write what a fit publishes (a trusted fit, else the agent's oriented size), withdraw the agent's model
        when it publishes nothing; a store that fails leaves the agent due (its fit is made again at the next
        poll)."""
        from rb_otel.backends.baselines.errors import StoreUnavailable

        try:
            if fit.publishes:
                record = fit.record()
                self.store.put_model(record)
                self.say(f"{fit.line()}; wrote {record.name} to {self.store.url}")
            elif self.store.drop_model(fit.agent):
                self.say(f"{fit.line()}; withdrew its model: its workers go back to the default pilot")
            else:
                self.say(fit.line())
        except StoreUnavailable as exc:
            self.say(f"{fit.agent}: the store did not answer ({exc}); the fit is made again at the next poll")
            return
        self.last[fit.agent] = fit.labels


def watch(
    paths: Sequence[str | Path],
    store: ModelStore,
    *,
    interval: float = 60.0,
    polls: int | None = None,
    say: Callable[[str], None] = print,
    **options: Any,
) -> None:
    """Poll ``paths`` every ``interval`` seconds (:data:`INTERVAL_RANGE`), ``polls`` times (``None``: until
    interrupted). The first poll's errors (an unreadable source) are raised; a later poll's are told and the next
    poll tries again (a file half written, a ClickHouse that is down)."""
    low, high = INTERVAL_RANGE
    if not low <= interval <= high:
        raise ValueError(f"the interval must be between {low:g} and {high:g} seconds, got {interval:g}")
    watcher = Watcher(paths, store, say=say, **options)
    done = 0
    while polls is None or done < polls:
        started = time.monotonic()
        try:
            watcher.poll()
        except Exception as exc:
            if done == 0:
                raise
            say(f"this poll failed ({type(exc).__name__}: {exc}); the next one tries again")
        done += 1
        if polls is not None and done >= polls:
            break
        time.sleep(max(interval - (time.monotonic() - started), 0.0))


def watch_command(
    paths: Sequence[str | Path],
    store_url: str,
    *,
    interval: float,
    polls: int | None,
    labels: str | None,
    read_options: dict[str, Any],
    max_false_stops: float,
) -> int:
    """``rb-otel train --watch``: the exit status (2 and one line on stderr for a store or source that cannot be
    used; 0 when interrupted or after ``polls``)."""
    import sys

    from rb_otel.analysis import SourceError
    from rb_otel.backends.baselines.errors import SummaryStoreError
    from rb_otel.backends.baselines.models import model_store_of
    from rb_otel.backends.baselines.opening import open_summary_store
    from rb_otel.importers import RecordError
    from rb_otel.training.train_model import TrainingError
    from rb_otel.urls import display_url

    def say(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    try:
        store = open_summary_store(store_url)
    except SummaryStoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    models = model_store_of(store)
    try:
        if models is None:
            print(f"error: {display_url(store_url)}: this store keeps no models (use sqlite:///path.db or "
                  "redis://host:port/db, the store the workers' baselines are in)", file=sys.stderr)  # fmt: skip
            return 2
        watch(paths, models, interval=interval, polls=polls, say=say, labels=labels, read_options=read_options,
              fit_options={"max_false_stops": max_false_stops})  # fmt: skip
    except (ValueError, TrainingError, RecordError, SourceError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        say("interrupted; stopping")
    finally:
        store.close()
    return 0
