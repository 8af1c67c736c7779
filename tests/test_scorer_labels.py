"""The learning loop, observable (docs/telemetry.md, "Learned models and outcomes"): ``rb.scorer.labels`` on the chat
spans, ``rb.models.loaded`` and ``rb.outcomes.recorded``, and ``RB_OTEL_STORE`` for the workers and ``train --watch``.

Real components: a SQLite store the test writes models into as ``rb-otel train --watch`` does, the facade's real
pipeline, and the SDK's in-memory exporters (the ``otel`` fixture).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import wait_until
from conftest import Otel
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel import ReasonBlocks
from rb_otel.backends.baselines.errors import SummaryStoreError
from rb_otel.backends.baselines.models import StoredModel, model_store_of
from rb_otel.backends.baselines.opening import open_summary_store
from rb_otel.backends.pilot import PilotScorer
from rb_otel.cli import main
from rb_otel.importers.run_contexts import source_run_contexts
from rb_otel.steering.pilot import PilotModel
from rb_otel.steering.scoring.heuristic import score_step
from rb_otel.steering.scoring.steps import StepScoring
from rb_otel.telemetry import names as n

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
KEY = "coder|m"  # agent_key("coder", "m")
CODING = PilotModel.default_for("coding")
SERVICE = PilotModel.default_for("customer_service")


def _record(labels: int, model: PilotModel = CODING, agent: str = KEY) -> StoredModel:
    """A learned model record as ``train --watch`` writes it (a trusted fit on ``labels`` labelled runs)."""
    return StoredModel(agent, model.as_dict(), labels, time.time() + labels, True, False, model)


def _run(rb: ReasonBlocks, steps: int = 3) -> None:
    session = rb.session(agent_name="coder", model="m")
    with session:
        for k in range(steps):
            decision = session.begin_step(thought=f"step {k}: maybe", action="bash", observation="ok")
            session.end_step(decision, tokens=100 * (k + 1))


def _scored_chats(otel: Otel) -> list[dict[str, Any]]:
    """The attributes of every scored chat span, oldest run first."""
    spans = sorted(otel.spans(n.OP_CHAT), key=lambda s: s.start_time or 0)
    return [dict(s.attributes or {}) for s in spans if n.RB_DIFFICULTY in (s.attributes or {})]


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fleet.db'}"


@pytest.fixture
def worker(otel: Otel, store_url: str) -> Iterator[ReasonBlocks]:
    rb = ReasonBlocks(scorer="pilot", baselines=store_url, tracer_provider=otel.tracer_provider,
                      meter_provider=otel.meter_provider, logger_provider=otel.logger_provider)  # fmt: skip
    assert isinstance(rb.scorer, PilotScorer) and rb.scorer.models is not None
    rb.scorer.models.refresh_s = 0.2  # the default is 30 s
    yield rb
    rb.scorer.models.close()
    rb.close()


# -- rb.scorer.labels and rb.models.loaded ---------------------------------------------------------------------


def test_a_worker_names_its_runs_by_the_learned_model_and_counts_each_new_one_once(
    otel: Otel, worker: ReasonBlocks, store_url: str
) -> None:
    _run(worker)
    worker.flush()
    cold = _scored_chats(otel)
    assert cold and {(a[n.RB_SCORER], a[n.RB_SCORER_LABELS]) for a in cold} == {(PilotModel.load(None).version, 0)}
    assert otel.metric_points(n.METRIC_MODELS_LOADED) == [] or otel.metric_sum(n.METRIC_MODELS_LOADED) == 0

    opened = open_summary_store(store_url)
    writer = model_store_of(opened)
    assert writer is not None
    writer.put_model(_record(130))
    name = "pilot/agent:coder|m@130"
    assert isinstance(worker.scorer, PilotScorer)
    wait_until(lambda: worker.scorer.name_for("", KEY) == name, timeout=60, what="the new model")
    otel.exporter.clear()
    for _ in range(3):
        _run(worker)
    worker.flush()
    learned = _scored_chats(otel)
    assert len(learned) == 9
    assert {(a[n.RB_SCORER], a[n.RB_SCORER_LABELS]) for a in learned} == {(name, 130)}
    assert isinstance(learned[0][n.RB_SCORER_LABELS], int)
    loaded = {(a[n.GEN_AI_AGENT_NAME], a[n.RB_SCORER]): v for a, v in otel.metric_points(n.METRIC_MODELS_LOADED)}
    assert loaded == {("coder", name): 1}  # once per record seen, not once per run

    writer.put_model(_record(195))  # fitted again: a new record, counted once more
    refit = "pilot/agent:coder|m@195"
    wait_until(lambda: worker.scorer.name_for("", KEY) == refit, timeout=60, what="the refit")  # a run start asks
    assert otel.metric_sum(n.METRIC_MODELS_LOADED, rb__scorer=refit) == 1
    assert otel.metric_sum(n.METRIC_MODELS_LOADED) == 2
    _run(worker)
    worker.flush()
    last = _scored_chats(otel)[-1]
    assert (last[n.RB_SCORER], last[n.RB_SCORER_LABELS]) == (refit, 195)
    opened.close()


def test_every_scorer_that_learned_nothing_says_zero_labels(otel: Otel) -> None:
    for scorer in ("heuristic", "pilot"):
        rb = ReasonBlocks(scorer=scorer, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        _run(rb, steps=2)
        rb.close()
    chats = _scored_chats(otel)
    assert len(chats) == 4 and {a[n.RB_SCORER_LABELS] for a in chats} == {0}
    assert {a[n.RB_SCORER] for a in chats} == {"heuristic", PilotModel.load(None).version}


# -- the race: a run's name and its scoring come from one record -----------------------------------------------


class _Refreshing:
    """A model cache whose snapshot changes between any two reads (a refresh landing in between, every time: the
    interleaving a background refresh makes only sometimes)."""

    def __init__(self, answers: list[StoredModel | None]) -> None:
        self.answers = answers
        self.reads = 0

    def get(self, agent: str) -> StoredModel | None:
        answer = self.answers[self.reads % len(self.answers)]
        self.reads += 1
        return answer


_ANSWERS = st.lists(
    st.one_of(st.none(), st.builds(_record, st.integers(50, 10_000), st.sampled_from([CODING, SERVICE]))),
    min_size=1,
    max_size=5,
)


@settings(max_examples=60, deadline=None)
@given(answers=_ANSWERS, kind=st.sampled_from(["", "coding", "customer_service"]))
def test_a_run_is_named_by_the_record_it_is_scored_with(answers: list[StoredModel | None], kind: str) -> None:
    scorer = PilotScorer(baselines="memory://")
    scorer.models = _Refreshing(answers)  # type: ignore[assignment]
    scoring = StepScoring(score_step, scorer, agent=KEY, kind=kind)
    record = answers[0]  # the one read when the run started
    run: Any = scoring.run
    if record is None:
        assert (scoring.name, scoring.labels) == (scorer.model_for(kind).version, 0)
        assert run._model is scorer.model_for(kind)
    else:
        assert (scoring.name, scoring.labels) == (record.name, record.labels)
        assert run._model is record.pilot  # scored by the very record it is named by


def test_a_refresh_between_the_run_span_and_the_run_start_names_the_spans_by_the_scoring_model(otel: Otel) -> None:
    rb = ReasonBlocks(scorer="pilot", tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    assert isinstance(rb.scorer, PilotScorer)
    rb.scorer.models = _Refreshing([_record(60), _record(90, SERVICE)])  # type: ignore[assignment]
    session = rb.session(agent_name="coder", model="m")
    run: Any = session.run_scorer
    with session:
        session.end_step(session.begin_step(thought="step 0", action="bash", observation="ok"))
    rb.close()
    (chat,) = _scored_chats(otel)
    assert run._model is SERVICE
    assert (chat[n.RB_SCORER], chat[n.RB_SCORER_LABELS]) == ("pilot/agent:coder|m@90", 90)
    assert (session.scorer_name, session.scorer_labels) == ("pilot/agent:coder|m@90", 90)


# -- rb.outcomes.recorded --------------------------------------------------------------------------------------


def test_recorded_outcomes_are_counted_by_agent_and_outcome(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                      logger_provider=otel.logger_provider)  # fmt: skip
    session = rb.session(run_id="r-1", agent_name="fixer")
    with session:
        session.end_step(session.begin_step(thought="step 0", action="bash", observation="ok"))
        session.record_outcome("success")  # the session's: its run's agent
    rb.record_outcome("r-1", False)  # by id, a run of this process: its agent is known
    rb.record_outcome("ran-elsewhere", "failure")  # another process's run: no agent known here
    rb.flush()
    counted = {(a[n.GEN_AI_AGENT_NAME], a[n.RB_OUTCOME]): v for a, v in otel.metric_points(n.METRIC_OUTCOMES_RECORDED)}
    assert counted == {("fixer", "success"): 1, ("fixer", "failure"): 1, ("", "failure"): 1}
    assert len(otel.logs(n.EVENT_EVALUATION_RESULT)) == 3  # one event per count
    rb.close()


def test_nothing_is_counted_when_telemetry_is_off(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                      logger_provider=otel.logger_provider, telemetry_enabled=False)  # fmt: skip
    rb.record_outcome("r-2", True)
    rb.close()
    assert otel.metric_sum(n.METRIC_OUTCOMES_RECORDED) == 0


# -- RB_OTEL_STORE -----------------------------------------------------------------------------------------------


def _url(scorer: PilotScorer) -> str:
    """The URL of the store ``scorer`` keeps its baselines (and reads its learned models) in."""
    return str(getattr(scorer.baselines, "url", ""))


def test_workers_take_the_store_from_rb_otel_store_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared, own, given = (f"sqlite:///{tmp_path / name}.db" for name in ("shared", "own", "given"))
    monkeypatch.delenv("RB_OTEL_PILOT_BASELINES", raising=False)
    monkeypatch.delenv("RB_OTEL_STORE", raising=False)
    assert _url(PilotScorer()) == "memory://"  # neither: this process only
    monkeypatch.setenv("RB_OTEL_STORE", shared)
    assert "shared.db" in _url(PilotScorer())
    assert PilotScorer().models is not None  # and its learned models are read from it
    monkeypatch.setenv("RB_OTEL_PILOT_BASELINES", own)
    assert "own.db" in _url(PilotScorer())
    assert "given.db" in _url(PilotScorer(baselines=given))
    rb = ReasonBlocks(scorer="pilot", baselines=given)
    assert isinstance(rb.scorer, PilotScorer) and "given.db" in _url(rb.scorer)
    rb.close()


def test_an_unusable_rb_otel_store_is_one_line_naming_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RB_OTEL_PILOT_BASELINES", raising=False)
    monkeypatch.setenv("RB_OTEL_STORE", "bogus://nowhere")
    with pytest.raises(SummaryStoreError) as raised:
        ReasonBlocks(scorer="pilot")
    assert str(raised.value).startswith("RB_OTEL_STORE: ") and "\n" not in str(raised.value)
    assert "bogus" in str(raised.value)


def _labelled_source(tmp_path: Path) -> Path:
    source = tmp_path / "runs.jsonl"
    steps = "".join(f'{{"step": {k}, "fsm_state": "NORMAL", "thought_preview": "thinking {k}"}}\n' for k in range(3))
    source.write_text('{"run_id": "r1", "outcome": "success", "agent_name": "calc"}\n' + steps)
    return source


def test_train_watch_takes_its_store_from_rb_otel_store_and_store_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    source = str(_labelled_source(tmp_path))
    monkeypatch.setenv("RB_OTEL_STORE", f"sqlite:///{tmp_path / 'fleet.db'}")
    assert main(["train", source, "--watch", "--polls", "1"]) == 0
    assert "1 labelled runs of 1 agent(s)" in capsys.readouterr().out
    assert (tmp_path / "fleet.db").exists()
    assert main(["train", source, "--watch", "--store", "memory://", "--polls", "1"]) == 2  # --store wins
    err = capsys.readouterr().err
    assert "keeps no models" in err and "RB_OTEL_STORE" not in err
    for bad, problem in (("memory://", "keeps no models"), ("bogus://x", "unknown baseline store scheme")):
        monkeypatch.setenv("RB_OTEL_STORE", bad)
        assert main(["train", source, "--watch", "--polls", "1"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: RB_OTEL_STORE") and problem in err and err.count("\n") == 1
    monkeypatch.delenv("RB_OTEL_STORE")
    assert main(["train", source, "--watch", "--polls", "1"]) == 2
    assert "RB_OTEL_STORE=URL" in capsys.readouterr().err


_LABEL_WITH_A_METER = """
import json, sys
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from rb_otel.cli import main
from rb_otel.importers.run_contexts import source_run_contexts
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))  # as opentelemetry-instrument would
code = main(["label", sys.argv[1], "--labels", sys.argv[2], "--out", sys.argv[3], "--quiet"])
points = [(dict(p.attributes), p.value) for rm in reader.get_metrics_data().resource_metrics
          for sm in rm.scope_metrics for m in sm.metrics if m.name == sys.argv[4] for p in m.data.data_points]
print(json.dumps({"code": code, "points": points}))
"""


def test_rb_otel_label_counts_its_outcomes_on_the_global_meter_provider(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / "mini_swe_agent" / "handwritten_runs", runs)
    found = source_run_contexts([runs])
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({r.run_id: i % 2 == 1 for i, r in enumerate(found)}))
    args = [str(runs), str(labels), str(tmp_path / "outcomes.jsonl"), n.METRIC_OUTCOMES_RECORDED]
    done = subprocess.run([sys.executable, "-c", _LABEL_WITH_A_METER, *args], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    by_outcome: dict[str, int] = {}
    for attributes, value in result["points"]:
        assert attributes[n.GEN_AI_AGENT_NAME] in {r.agent for r in found}
        by_outcome[attributes[n.RB_OUTCOME]] = by_outcome.get(attributes[n.RB_OUTCOME], 0) + value
    successes = sum(1 for i, _ in enumerate(found) if i % 2 == 1)
    assert by_outcome == {"success": successes, "failure": len(found) - successes}
