"""``rb-otel train --watch``: the refit schedule, the model records in the stores, the workers' pickup (off the
step path, fail-open) and what a fit earns (SLOW, SKIP)."""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from components import RedisServer, wait_until
from hypothesis import given
from hypothesis import strategies as st

from rb_otel.backends.baselines.model_cache import ModelCache
from rb_otel.backends.baselines.models import ModelStore, StoredModel, model_store_of, scorer_name
from rb_otel.backends.baselines.opening import open_summary_store
from rb_otel.backends.pilot import PilotScorer
from rb_otel.cli import main
from rb_otel.evaluation.early import StopFigures
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.pilot import PilotModel, pilot_fsm_thresholds
from rb_otel.steering.scoring import ScorerStep
from rb_otel.training.dataset import Dataset, LabelledRun
from rb_otel.training.earned import with_states as _with_states
from rb_otel.training.watch import MIN_LABELS, AgentFit, Watcher, earned_states, refit_due

# -- the schedule ------------------------------------------------------------------------------------------------

#: ``rb.scorer`` of a coding agent's runs before it has a model of its own (the kind's default).
DEFAULT = PilotModel.default_for("coding").version


def _fits(labels: int) -> list[int]:
    """The labelled-run counts at which an agent growing one label at a time is fitted."""
    out: list[int] = []
    for n in range(1, labels + 1):
        if refit_due(n, out[-1] if out else None):
            out.append(n)
    return out


def test_the_schedule_starts_at_50_and_refits_when_the_labels_grew_by_half() -> None:
    assert _fits(400) == [50, 75, 113, 170, 255, 383]


@given(st.integers(0, 5000), st.one_of(st.none(), st.integers(1, 5000)))
def test_the_schedule_never_fits_below_50_nor_before_growth_by_half(labels: int, last: int | None) -> None:
    due = refit_due(labels, last)
    if labels < MIN_LABELS:
        assert not due
    elif last is None:
        assert due
    else:
        assert due == (labels >= math.ceil(1.5 * last))


# -- records in the stores ---------------------------------------------------------------------------------------


def _record(agent: str = "coder|m", labels: int = 120, *, slow: bool = True, skip: bool = False) -> StoredModel:
    model = PilotModel.default_for("coding")
    return StoredModel(agent, model.as_dict(), labels, 1_700_000_000.5, slow, skip, model)


@pytest.fixture(params=["sqlite", "redis"])
def models(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        store = open_summary_store(f"sqlite:///{tmp_path / 'b.db'}")
    else:
        store = open_summary_store(request.getfixturevalue("redis_server").url)
    found = model_store_of(store)
    assert found is not None
    yield found
    store.close()


def test_a_store_keeps_one_model_per_agent_and_gives_it_back(models: ModelStore) -> None:
    assert models.model("coder|m") is None and models.models() == []
    models.put_model(_record(labels=120))
    models.put_model(_record(labels=180, skip=True))  # a refit replaces the agent's model
    models.put_model(_record("other|m", labels=60, slow=False))
    got = models.model("coder|m", timeout=1.0)
    assert got is not None and (got.labels, got.slow, got.skip) == (180, True, True)
    assert got.pilot is not None and got.pilot.weights == PilotModel.default_for("coding").weights
    assert got.name == "pilot/agent:coder|m@180" == scorer_name("coder|m", 180)
    assert [m.agent for m in models.models()] == ["coder|m", "other|m"]
    assert models.drop_model("coder|m") and not models.drop_model("coder|m")
    assert models.model("coder|m") is None


def test_a_stored_model_that_is_not_a_record_is_skipped_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "b.db"
    store = open_summary_store(f"sqlite:///{path}")
    models = model_store_of(store)
    assert models is not None
    models.put_model(_record())
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO rb_baselines_models (agent, record) VALUES ('bad|m', '{\"format\": 1}')")
    assert models.model("bad|m") is None and models.model("bad|m") is None
    assert [m.agent for m in models.models()] == ["coder|m"]
    assert sum("stored model of agent 'bad|m'" in r.message for r in caplog.records) == 1
    store.close()


def test_a_store_of_the_previous_release_gains_the_models_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = open_summary_store(f"sqlite:///{path}")
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE rb_baselines_models")
    again = model_store_of(open_summary_store(f"sqlite:///{path}"))
    assert again is not None
    again.put_model(_record())
    assert again.model("coder|m") is not None


def test_memory_stores_keep_no_models() -> None:
    assert model_store_of(open_summary_store("memory://")) is None
    assert PilotScorer(baselines="memory://").models is None


# -- the workers' pickup -----------------------------------------------------------------------------------------


def _steps(n: int = 6) -> list[ScorerStep]:
    return [ScorerStep(thought=f"step {k} maybe", action="bash", action_input="ls", observation="ok", tokens=900 * k)
            for k in range(n)]  # fmt: skip


def test_a_worker_picks_up_its_agents_model_without_a_restart(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    writer = model_store_of(open_summary_store(url))
    assert writer is not None
    scorer = PilotScorer(baselines=url)
    assert scorer.models is not None
    scorer.models.refresh_s = 0.2  # the default is 30 s: a minute at most between a write and every worker's runs
    assert scorer.name_for("coding", "coder|m") == DEFAULT  # no model yet: the kind's default
    record = _with_states(PilotModel.default_for("coding"), "coder|m", 130, True, False)
    writer.put_model(StoredModel("coder|m", record.as_dict(), 130, time.time(), True, False, record))
    wait_until(lambda: scorer.name_for("coding", "coder|m") == "pilot/agent:coder|m@130", timeout=60,
               what="the new model")  # fmt: skip
    run = scorer.start_run("coder|m", kind="coding")
    expected = PilotScorer(model=record).start_run("coder|m")
    assert [run.score(s) for s in _steps()] == pytest.approx([expected.score(s) for s in _steps()])
    assert scorer.name_for("coding", "other|m") == DEFAULT  # other agents keep their default
    given = PilotScorer(model=PilotModel.default_for("coding"), baselines=url)
    assert given.models is None and given.name_for("coding", "coder|m") == DEFAULT  # a model given is used
    scorer.models.close()


def _starts(cache: ModelCache, new: str) -> tuple[float, list[StoredModel | None]]:
    """50 run starts of a known agent, then one each of 5 agents the cache has not seen; how long they took."""
    started = time.monotonic()
    answers = [cache.get("coder|m") for _ in range(50)] + [cache.get(f"{new}-{i}|m") for i in range(5)]
    return time.monotonic() - started, answers


@pytest.mark.serial  # a bound with a reference measured in turn: steadier alone than beside other workers
def test_a_store_that_hangs_changes_nothing_on_a_run_start(redis_server: RedisServer) -> None:
    writer = model_store_of(open_summary_store(redis_server.url))
    assert writer is not None
    writer.put_model(_record())
    cache, healthy = ModelCache(writer, refresh_s=0.05), ModelCache(writer, start_timeout=60)
    # read once (a loaded machine may take more than a run start's 200 ms to, so this waits until it has)
    first = wait_until(lambda: cache.get("coder|m"), timeout=60, interval=0.05, what="the model read")
    assert first.labels == 120 and healthy.get("coder|m") is not None
    reference, _ = _starts(healthy, "known")  # the same starts on a store that answers: each new agent read
    redis_server.pause()  # connections hang
    try:
        time.sleep(0.1)  # stale: the next get asks the thread for a read that hangs
        took, answers = _starts(cache, "new")
        assert all(a is not None and a.labels == 120 for a in answers[:50]) and answers[50:] == [None] * 5
        # The first sight of a new agent waits at most start_timeout (0.2 s, twice that for a loaded scheduler);
        # the later ones not at all while that read hangs. Each waiting its 0.2 s would fail this.
        assert took < 2 * 0.2 + 5 * reference, (took, reference)
    finally:
        redis_server.resume()
    cache.close()
    healthy.close()


def test_a_store_that_is_down_at_the_start_leaves_the_default_pilot(tmp_path: Path) -> None:
    server = RedisServer(tmp_path)  # never started: nothing answers on its port
    scorer = PilotScorer(baselines=server.url)
    assert scorer.models is not None
    assert scorer.name_for("coding", "coder|m") == DEFAULT
    run = scorer.start_run("coder|m", kind="coding")
    assert 0.0 <= run.score(_steps(1)[0]) <= 1.0


# -- what a fit earns --------------------------------------------------------------------------------------------


def _stops(slow_failing: float, slow_successful: float, n: int = 100) -> list[StopFigures]:
    skip = StopFigures("skip", 0.0, 0.1, 0.0, 0.0, n, n)
    return [skip, StopFigures("slow", slow_successful, slow_failing, 0.0, 0.0, n, n)]


def test_slow_is_earned_when_it_reaches_failing_runs_more_often_beyond_chance() -> None:
    assert earned_states(_stops(0.40, 0.10), skip_on=True) == (True, True)
    assert earned_states(_stops(0.40, 0.10), skip_on=False) == (True, False)
    assert earned_states(_stops(0.14, 0.10), skip_on=True) == (False, False)  # within chance: neither
    assert earned_states(_stops(0.40, 0.10, n=3), skip_on=True) == (False, False)  # too few runs to tell


def test_an_unearned_state_is_never_entered() -> None:
    shipped = PilotModel.default_for("coding")
    model = dataclasses.replace(shipped, fsm={**shipped.fsm, "skip_threshold": 0.9})  # a fit whose SKIP held
    high = [0.99] * 30
    for slow, skip, reached in ((True, True, "SKIP"), (True, False, "SLOW"), (False, False, "NORMAL")):
        fitted = _with_states(model, "a", 100, slow, skip)
        fitted = PilotModel.from_mapping(json.loads(json.dumps(fitted.as_dict())))  # as a worker reads it
        fsm = DifficultyFSM(**pilot_fsm_thresholds(fitted))
        states = {s.value for s in fsm.replay(high)}
        allowed = {"SKIP": {"SLOW", "SKIP"}, "SLOW": {"SLOW"}, "NORMAL": set()}[reached]
        assert reached in states and not ({"SLOW", "SKIP"} - allowed) & states
        assert fitted.trained["earned"] == {"slow": slow, "skip": skip}


# -- the watcher -------------------------------------------------------------------------------------------------


def _run(i: int, agent: str) -> LabelledRun:
    return LabelledRun(f"r{i}", "test", agent, f"g{i}", i % 3 == 0, _steps(4), [1, 2, 3, 4], [1, 1, 1, 1])


class _Source:
    """The runs a poll reads: a list the test grows."""

    def __init__(self) -> None:
        self.runs: list[LabelledRun] = []

    def __call__(self, paths: Any, **options: Any) -> Dataset:
        return Dataset(runs=list(self.runs))


def test_the_watcher_writes_trusted_fits_and_withdraws_one_a_later_fit_does_not_trust(tmp_path: Path) -> None:
    models = model_store_of(open_summary_store(f"sqlite:///{tmp_path / 'b.db'}"))
    assert models is not None
    source = _Source()
    seen: list[tuple[str, int]] = []
    trusted = {"a|m": [True, False], "b|m": [True]}

    def fit(runs: list[LabelledRun], *, agent: str, **_: Any) -> AgentFit:  # records what reaches the fit
        seen.append((agent, len(runs)))
        assert {r.agent for r in runs} == {agent}
        ok = trusted[agent].pop(0)
        model = _with_states(PilotModel.default_for("coding"), agent, len(runs), ok, False) if ok else None
        return AgentFit(agent, len(runs), ok, ok, False, model, "" if ok else "no better than size", 0.0)

    lines: list[str] = []
    watcher = Watcher(["x"], models, read=source, fit=fit, say=lines.append)
    source.runs = [_run(i, "a|m") for i in range(49)] + [_run(i, "b|m") for i in range(60)]
    watcher.poll()
    assert seen == [("b|m", 60)]
    source.runs.append(_run(49, "a|m"))
    watcher.poll()
    watcher.poll()  # nothing new: no fit
    assert seen == [("b|m", 60), ("a|m", 50)]
    stored = models.model("a|m")
    assert stored is not None and stored.labels == 50 and stored.name == "pilot/agent:a|m@50"
    source.runs += [_run(i, "a|m") for i in range(50, 75)]
    watcher.poll()
    assert seen[-1] == ("a|m", 75) and models.model("a|m") is None  # withdrawn: workers go back to the default
    assert any("withdrew its model" in line for line in lines)
    restarted = Watcher(["x"], models, read=source, fit=fit, say=lines.append)
    assert restarted.last == {"b|m": 60}  # a restarted watcher does not refit what the store holds


def test_watch_and_store_go_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "runs.jsonl"
    steps = "".join(f'{{"step": {k}, "fsm_state": "NORMAL", "thought_preview": "thinking {k}"}}\n' for k in range(3))
    source.write_text('{"run_id": "r1", "outcome": "success", "agent_name": "calc"}\n' + steps)
    assert main(["train", str(source), "--watch"]) == 2
    assert "--watch and --store go together" in capsys.readouterr().err
    assert main(["train", str(source), "--watch", "--store", "memory://", "--polls", "1"]) == 2
    assert "keeps no models" in capsys.readouterr().err
    db = f"sqlite:///{tmp_path / 'b.db'}"
    assert main(["train", str(source), "--watch", "--store", db, "--polls", "1", "--interval", "0.01"]) == 2
    assert "interval must be between" in capsys.readouterr().err
    assert main(["train", str(tmp_path / "missing"), "--watch", "--store", db, "--polls", "1"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert main(["train", str(source), "--watch", "--store", db, "--polls", "1"]) == 0
    assert "1 labelled runs of 1 agent(s); due a fit: 0" in capsys.readouterr().out


def test_a_worker_process_imports_no_training_code(tmp_path: Path) -> None:
    code = """
import sys, threading, json
from rb_otel import ReasonBlocks
from rb_otel.steering.scoring import ScorerStep
rb = ReasonBlocks(scorer="pilot", baselines=sys.argv[1])
session = rb.session(agent_name="coder", model="m")
for k in range(5):
    session.end_step(session.begin_step(thought=f"step {k}", action="bash", action_input="ls", observation="ok"))
session.finish()
rb.close()
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith(("rb_otel.training", "scipy"))),
                  "threads": sorted(t.name for t in threading.enumerate())}))
"""
    out = subprocess.run([sys.executable, "-c", code, f"sqlite:///{tmp_path / 'b.db'}"], capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["modules"] == []
    assert not [t for t in found["threads"] if "fit" in t or "train" in t]
