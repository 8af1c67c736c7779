"""The cold start (issue 60, item 4; docs/signal.md, "A cold start judged by harnesses it never saw"): text that
names the benchmark is out of every feature (renaming a repository, its files, a customer leaves the live score as
it was), baselines relative to the request (task groups weigh alike within an agent), and leaving whole harnesses
out (no run of the left-out harness reaches its fit; the floor judged per agent)."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rb_otel.backends.pilot import PilotScorer
from rb_otel.steering.agent_keys import request_code, request_key
from rb_otel.steering.pilot import FEATURES, PILOT_V2, PilotModel, TextWeights
from rb_otel.steering.pilot.baselines import REQUEST, AgentBaseline, RequestBaseline, RunSummary
from rb_otel.steering.pilot.text import BEHAVIOUR_WORDS, PROGRAMS, normalise_text, step_tokens
from rb_otel.steering.scoring.steps import scorer_step
from rb_otel.training.dataset import LabelledRun
from rb_otel.training.development import DEVELOPMENT_SOURCES, HARNESSES, IRONFORGE, harness_of
from rb_otel.training.fit import fit_candidate
from rb_otel.training.held_out import leave_one_harness_out
from rb_otel.training.held_out_figures import FLOOR_TOLERANCE, Baseline, HeldOutAgent, SkipFigures

# -- text that names the benchmark --------------------------------------------------------------------------------

#: A coding run and a customer-service turn naming a repository, its package, its files, a customer and an instance.
TEMPLATE: list[dict[str, Any]] = [
    {"thought": "Look at the {repo} code for the {pkg} lookup bug", "action": "bash",
     "input": "cd /testbed/{repo} && grep -rn 'def filter' {pkg}/query.py | head -5",
     "obs": "<returncode>0</returncode><output>{pkg}/query.py:12:    def filter(self, *args):</output>"},
    {"thought": "Reproduce it with the {repo} test runner", "action": "bash",
     "input": "python -m pytest tests/{pkg}/test_query.py -x; {repo}-admin check",
     "obs": "<returncode>1</returncode><output>Traceback (most recent call last):\n  File \"/testbed/{repo}/{pkg}/"
            "query.py\", line 12, in filter\n{Pkg}Error: invalid lookup on {repo}.{pkg}.models.Item for "
            "{customer}_4417\nFAILED tests/{pkg}/test_query.py - 1 failed</output>"},
    {"thought": "Patch {pkg}/query.py", "action": "bash",
     "input": "sed -i 's/args/kwargs/' /testbed/{repo}/{pkg}/query.py && ./{repo}_runtests.py {pkg}",
     "obs": "<returncode>0</returncode><output>Ran 3 tests. OK. See https://github.com/{repo}/{repo}/pull/7</output>"},
    {"thought": "Tell {customer} what changed", "action": "get_user_details",
     "input": '{{"user_id": "{customer}_4417", "repo": "{repo}/{pkg}"}}',
     "obs": '{{"name": "{Customer}", "email": "{customer}@{repo}.org", "error": "not found"}}'},
]  # fmt: skip
_HEDGE_FREE = "bcdfghjklmnpqrstvwxz"  # names without vowels: no hedging word, no behaviour word, no 6-letter program


def _run_steps(names: dict[str, str], variant: int) -> list[Any]:
    fill = {**names, "Pkg": names["pkg"].capitalize(), "Customer": names["customer"].capitalize()}
    steps = []
    for i, step in enumerate(TEMPLATE):
        if (i + variant) % 5 == 4:
            continue  # runs of the history differ in which steps they take
        text, arguments, seen = (step[key].format(**fill) for key in ("thought", "input", "obs"))
        steps.append(scorer_step(text, action=step["action"], action_input=arguments, observation=seen,
                                 error=i == 1, tokens=900 * (i + 1)))  # fmt: skip
    return steps


def _text_heavy_model() -> PilotModel:
    """A model with a weight on every text bucket and every feature: any token that changed would move the score."""
    rng = random.Random(3)
    weights = tuple(rng.uniform(-0.5, 0.5) for _ in FEATURES)
    text = TextWeights(14, "log", {b: rng.uniform(-1.0, 1.0) for b in range(1 << 14)})
    prior = {"mean_steps": 10.0, "mean_chars": 3000.0, "mean_context": 4000.0, "mean_hedges": 2.0,
             "mean_errors": 1.0, "log_cps": 5.0, "error_rate": 0.1, "repeat_rate": 0.05, "hedging": 0.01}  # fmt: skip
    return PilotModel(-0.3, weights, prior, {}, version=PILOT_V2, features=FEATURES, text=text)


MODEL = _text_heavy_model()


def _scores(names: dict[str, str]) -> list[float]:
    """Every step's live score over four runs of one agent (each given its instance as its task id), the last
    three against the baselines the earlier ones left."""
    scorer = PilotScorer(model=MODEL)
    out = []
    for variant in range(4):
        run = scorer.start_run("coder|model-x", task_id=f"{names['repo']}__{names['repo']}-{variant % 2}")
        out += [run.score(step) for step in _run_steps(names, variant)]
        run.finish()
    return out


ORIGINAL = {"repo": "django", "pkg": "models", "customer": "olivia"}


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**9))
def test_renaming_the_repository_its_files_and_the_customer_leaves_the_live_score_unchanged(seed: int) -> None:
    rng = random.Random(seed)
    # same lengths: the characters written are a size feature, and a rename changes no size
    renamed = {key: "".join(rng.choice(_HEDGE_FREE) for _ in value) for key, value in ORIGINAL.items()}
    assume(len(set(renamed.values())) == len(renamed) and not set(renamed.values()) & set(ORIGINAL.values()))
    before, after = _scores(ORIGINAL), _scores(renamed)
    assert before == after


def test_a_changed_behaviour_word_does_move_the_score() -> None:
    """The control: with the same model, the score does follow what the agent saw (the rename test can fail)."""
    steps = _run_steps(ORIGINAL, 0)
    last = steps[-1]
    seen = (last.observation or "").replace("not found", "confirmed")
    changed = [
        *steps[:-1],
        scorer_step(last.thought, action=last.action, action_input=last.action_input, observation=seen),
    ]
    scores = []
    for run_steps in (steps, changed):
        run = PilotScorer(model=MODEL).start_run("coder|model-x")
        scores.append([run.score(s) for s in run_steps][-1])
    assert scores[0] != scores[1]


def test_tokens_name_behaviour_never_the_benchmark() -> None:
    tokens = [t for s in _run_steps(ORIGINAL, 0) for t in step_tokens(s)]
    assert not any(re.search("django|models|olivia|query|testbed|4417", t, re.IGNORECASE) for t in tokens), tokens
    assert {"cmd:cd", "cmd:grep", "cmd:python", "cmd:other", "cmd:sed", "exc:other", "obs:failed", "obs:traceback",
            "rc:1", "arg:user_id"} <= set(tokens)  # fmt: skip
    assert step_tokens(scorer_step("", action="bash", action_input="x", observation="KeyError: 'a'"))[-2:] == [
        "exc:KeyError", "obs:keyerror"]  # fmt: skip


@given(st.sampled_from(sorted({len(v) for v in ORIGINAL.values()})).flatmap(
    lambda n: st.text(alphabet=_HEDGE_FREE, min_size=n, max_size=n)))  # fmt: skip
def test_no_name_without_a_vowel_is_in_the_vocabularies(name: str) -> None:
    """What the rename test relies on: the names it draws (without vowels, as long as the names they replace) are
    no behaviour word and no program. Shorter ones can be (``zsh``)."""
    assert name not in BEHAVIOUR_WORDS and name not in PROGRAMS


def test_requests_that_differ_only_in_what_they_name_share_a_key() -> None:
    one = "Fix QuerySet.filter() in /testbed/django/db/models/query.py for user_4417 (see django/django#123)."
    two = "Fix Manager.get() in /src/flask/app/views.py for acct_99 (see pallets/flask#7)."
    assert normalise_text(one) == normalise_text(two) == "fix <name>() in <path> for <id> (see <path>#<n>)."
    assert request_key(one) == request_key(two) != request_key("Cancel my reservation, please.")
    assert request_key("") == "" and request_code("") is None
    assert request_code("task-1") == request_code("task-1") != request_code("task-2")


# -- baselines relative to the request ------------------------------------------------------------------------------

SUMMARIES = st.lists(
    st.tuples(st.sampled_from([None, 1.0, 2.0, 3.0]), st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=30
)


def _summaries(drawn: list[tuple[float | None, float, float]]) -> list[RunSummary]:
    out = []
    for i, (code, steps, chars) in enumerate(drawn):
        values = {"steps": steps + 1.0, "chars": chars, "context": 0.0, "hedges": 0.0, "errors": 0.0,
                  "peak_slow": chars / 100, "peak_skip": chars / 100, "log_cps": chars, "error_rate": 0.0,
                  "repeat_rate": 0.0, "hedging": 0.0}  # fmt: skip
        if code is not None:
            values[REQUEST] = code
        out.append(RunSummary(float(i), values, f"r{i}"))
    return out


@settings(max_examples=80, deadline=None)
@given(drawn=SUMMARIES, value=st.floats(0, 100), q=st.floats(0, 1))
def test_each_request_weighs_the_same_in_the_agents_normal(drawn: Any, value: float, q: float) -> None:
    """The plain definition: each run weighs 1 / the runs of its request (1 without one)."""
    summaries = _summaries(drawn)
    baseline = AgentBaseline(len(summaries), summaries)
    codes = [s.values.get(REQUEST) for s in summaries]
    weight = [1.0 if c is None else 1.0 / codes.count(c) for c in codes]
    chars = [s.values["chars"] for s in summaries]
    share = sum(w for w, c in zip(weight, chars, strict=True) if c < value) / sum(weight)
    assert math.isclose(baseline.share_below("chars", value) or 0.0, share, abs_tol=1e-9)
    ordered = sorted(zip(chars, weight, strict=True))
    total, running, expected = sum(weight), 0.0, ordered[-1][0]
    for c, w in ordered:
        running += w
        if running > q * total + 1e-12:
            expected = c
            break
    assert baseline.quantile("chars", q) == pytest.approx(expected)
    rates = sum(w * c for w, c in zip(weight, chars, strict=True)) / total
    assert baseline.log_cps == pytest.approx(rates)
    # one run more is the same as the definition with it
    assert baseline.plus(summaries[0]).same_as(AgentBaseline(len(summaries) + 1, [*summaries, summaries[0]]))


@settings(max_examples=40, deadline=None)
@given(drawn=SUMMARIES.map(lambda d: [(None, s, c) for _, s, c in d]), value=st.floats(0, 100), q=st.floats(0, 1))
def test_without_requests_the_normal_is_the_plain_empirical_one(drawn: Any, value: float, q: float) -> None:
    baseline = AgentBaseline(len(drawn), _summaries(drawn))
    column = sorted(c for _, _, c in drawn)
    assert baseline.share_below("chars", value) == sum(c < value for c in column) / len(column)
    assert baseline.quantile("chars", q) == column[min(int(q * len(column)), len(column) - 1)]


def test_a_run_is_compared_with_its_own_requests_runs_as_they_come() -> None:
    """grok-3's confound in small: request 1's runs are long, request 2's short. A run of request 2 as long as a
    short run of request 1 is long *for its request*: against the agent's normal alone it looks ordinary."""
    drawn = [(1.0, 50.0, 900.0 + i) for i in range(8)] + [(2.0, 10.0, 100.0 + i) for i in range(4)]
    agent = AgentBaseline(12, _summaries(drawn))
    own = agent.for_request(2.0)
    blended = RequestBaseline(agent, own)
    assert own.known == 4 and agent.for_request(9.0).known == 0
    alone, relative = agent.share_below("chars", 500.0), blended.share_below("chars", 500.0)
    assert alone == pytest.approx(0.5)  # two requests weighing the same: half the agent's normal is below 500
    assert relative == pytest.approx(4 / 7 * 1.0 + 3 / 7 * 0.5)  # its own 4 runs weigh 4 / (4 + 3)
    assert RequestBaseline(agent, agent.for_request(9.0)).share_below("chars", 500.0) == alone


# -- leaving whole harnesses out ----------------------------------------------------------------------------------


def _run(harness: str, model: str, i: int, failed: bool, rng: random.Random) -> LabelledRun:
    steps = [scorer_step("look " * rng.randint(1, 40), action="bash", action_input=f"grep -n f{k} a.py",
                         observation="<returncode>1</returncode>" if failed and rng.random() < 0.5 else "ok",
                         error=failed and rng.random() < 0.3) for k in range(rng.randint(5, 14))]  # fmt: skip
    prompt = [100 * (k + 1) for k in range(len(steps))]
    return LabelledRun(f"{harness}-{model}-{i}", "hand-made", f"{harness}|{model}", f"task-{i % 12}", failed, steps,
                       prompt, [100] * len(steps), harness=harness, model=model)  # fmt: skip


@pytest.fixture(scope="module")
def three_harnesses() -> tuple[list[LabelledRun], list[str]]:
    rng = random.Random(11)
    runs = [_run(h, m, i, rng.random() < 0.5, rng) for h, m, n in
            (("h1", "a", 50), ("h1", "b", 50), ("h2", "a", 50), ("h3", "c", 12)) for i in range(n)]  # fmt: skip
    return runs, [r.harness for r in runs]


def test_no_run_of_the_left_out_harness_reaches_its_fit(three_harnesses: Any) -> None:
    runs, harnesses = three_harnesses
    seen: list[set[str]] = []

    def recording_fit(data: Any, rows: Any, candidate: Any, **kwargs: Any) -> Any:
        seen.append({data.runs[i].harness for i in rows})
        return fit_candidate(data, rows, candidate, **kwargs)

    report = leave_one_harness_out(runs, harnesses, fit=recording_fit, requests=True)
    assert sorted(a.agent for a in report.agents) == ["h1: h1|a", "h1: h1|b", "h2: h2|a"]
    assert "h3: h3|c" in report.skipped and "fewer than 20" in report.skipped["h3: h3|c"]
    assert seen and all(len(s) >= 1 for s in seen)
    # each fit saw runs of the other harnesses only: h1's agents were scored by a fit without h1
    for agent in report.agents:
        harness = agent.agent.split(":", 1)[0]
        assert all(harness not in unit for unit in agent.trained_on)
    assert report.as_dict()["method"] == "leave one harness out"


def _figures(last: float, early: float, best_last: float, best_early: float, early_runs: int) -> HeldOutAgent:
    off = SkipFigures(False, 0, 50, 0.02, 0.0, 50, 0.0, False, "off")
    return HeldOutAgent("h: a", 100, 50, ("x",), 100, "f", last, (Baseline("steps", best_last, 1, best_last),),
                        early_runs, early, (Baseline("characters so far", best_early, -1, best_early),), off, off,
                        size_last=best_last, size_early=best_early - 0.02)  # fmt: skip


@given(st.floats(0.3, 0.9), st.floats(0.3, 0.9), st.floats(-0.05, 0.05), st.integers(0, 120))
def test_the_floor_is_the_best_size_baseline_less_its_tolerance(
    best_last: float, best_early: float, delta: float, early_runs: int
) -> None:
    figures = _figures(best_last + delta, best_early + delta, best_last, best_early, early_runs)
    floor = figures.floor()
    assert floor["last_step"] == (delta >= -FLOOR_TOLERANCE - 1e-12) or abs(delta + FLOOR_TOLERANCE) < 1e-9
    assert floor["early"] is None if early_runs < 50 else floor["early"] == floor["last_step"]
    assert figures.floor(size="agent-relative")["last_step"]  # the size at its own best meets it
    assert figures.floor(size="agent-relative")["early"] in (None, False)  # 0.02 below at step 10: missed where judged


def test_every_development_source_has_a_harness() -> None:
    assert {s for sources in DEVELOPMENT_SOURCES.values() for s in sources} <= set(HARNESSES)
    run = _run("ironforge", "o3", 0, False, random.Random(0))
    assert harness_of("tau2_ironshell", run) == IRONFORGE
    sierra = _run("tau2 llm_agent", "gpt-5.4", 0, False, random.Random(0))
    assert harness_of("tau2_ironshell", sierra) == harness_of("tau2_gpt41_sierra", sierra) == "tau2 llm_agent"
    assert harness_of("tau2_grok", sierra) == "tau2 grok fork"
    assert {HARNESSES[s] for s in DEVELOPMENT_SOURCES["coding"]} == {"mini-swe-agent", "Claude Code"}
