"""The progress signals (docs/signal.md, "Progress signals"): each on a hand-made run, the same live and in
replay, and the incremental tracker against its plain definition."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.steering.pilot import FEATURES, PilotModel, PilotRun
from rb_otel.steering.pilot.progress import (
    KEYS_KEPT,
    PROGRESS_FEATURES,
    DriftScore,
    ProgressTracker,
    call_writes,
    is_refusal,
    observation_fails,
    return_code,
    shell_writes,
)
from rb_otel.steering.scoring import ScorerStep
from rb_otel.steering.scoring.steps import scorer_step
from rb_otel.training.dataset import read_dataset


def _values(steps: list[ScorerStep]) -> dict[str, float]:
    tracker = ProgressTracker()
    for step in steps:
        tracker.add(step)
    return dict(zip(PROGRESS_FEATURES, tracker.values(), strict=True))


def bash(command: str, output: str = "", rc: int = 0) -> ScorerStep:
    """A mini-swe-agent-like step, built the way the live middleware builds it."""
    seen = f"<returncode>{rc}</returncode>\n<output>\n{output}\n</output>"
    return scorer_step("thinking", action="bash", action_input=command, observation=seen, error=rc != 0)


def tool(name: str, args: dict[str, object], result: str = "ok", error: bool = False) -> ScorerStep:
    return scorer_step("", action=name, action_input=json.dumps(args), observation=result, error=error)


def say(text: str) -> ScorerStep:
    return scorer_step(text)


# -- each signal on a hand-made run ---------------------------------------------------------------------------


def test_steps_since_the_last_change_count_from_the_last_write() -> None:
    run = [bash("cat a.py"), bash("sed -i 's/x/y/' a.py"), bash("python a.py"), bash("grep -n y a.py")]
    values = _values(run)
    assert values["since_change"] == math.log1p(2)
    assert values["change_share"] == 1 / 4
    assert _values(run[:1])["since_change"] == math.log1p(1)  # before any write: every step so far


def test_what_counts_as_a_write() -> None:
    assert shell_writes("cat <<'EOF' > fix.py\nprint(1)\nEOF")
    assert shell_writes("echo x >> notes.txt")
    assert shell_writes("sed -i.bak 's/a/b/' f.py")
    assert shell_writes("git apply fix.patch && git diff")
    assert shell_writes("python -c \"open('f.py', 'w').write('x')\"")
    assert shell_writes("rm -f reproduce.py")
    assert not shell_writes("python reproduce.py 2>&1 | head -50")
    assert not shell_writes("grep -rn foo src > /dev/null")
    assert not shell_writes("ls -la && cat setup.py")
    assert call_writes("str_replace_editor", json.dumps({"command": "str_replace", "path": "a.py"}))
    assert not call_writes("str_replace_editor", json.dumps({"command": "view", "path": "a.py"}))
    assert call_writes("cancel_reservation", json.dumps({"reservation_id": "ABC"}))
    assert call_writes("updateReservationFlights", "{}")
    assert not call_writes("get_reservation_details", json.dumps({"reservation_id": "ABC"}))


def test_repeated_and_near_identical_calls() -> None:
    run = [bash("sed -n '10,20p' a.py"), bash("sed -n '30,40p' a.py"), bash("sed -n '50,60p'   a.py"), bash("ls")]
    values = _values(run)
    assert values["repeat_share"] == 2 / 4  # the second and third differ from the first in digits and spaces only
    assert values["repeat_streak"] == 0.0  # `ls` broke the streak
    assert _values(run[:3])["repeat_streak"] == math.log1p(2)


def test_the_streak_of_failing_observations() -> None:
    run = [
        bash("python a.py", "Traceback (most recent call last):\n  ...", rc=0),
        bash("python b.py", "boom", rc=2),
        tool("get_user", {"id": 1}, "Error: user not found"),
    ]
    assert observation_fails(run[0]) and observation_fails(run[1]) and observation_fails(run[2])
    assert _values(run)["fail_streak"] == math.log1p(3)
    assert _values([*run, bash("ls", "a.py")])["fail_streak"] == 0.0
    assert _values([*run, bash("ls", "a.py")])["fail_share"] == 3 / 4
    assert return_code("exit code: 137") == 137


def test_tests_run_and_whether_the_last_run_passed() -> None:
    failing = bash("python -m pytest tests/test_a.py -q", "1 failed, 3 passed", rc=1)
    passing = bash("cd /testbed && ./tests/runtests.py queries", "OK", rc=0)
    assert _values([failing])["test_state"] == 1.0
    values = _values([failing, bash("sed -i 's/a/b/' a.py"), passing])
    assert values["tests_run"] == math.log1p(2)
    assert values["test_state"] == -1.0
    assert _values([bash("python reproduce.py")])["tests_run"] == 0.0
    assert _values([bash("go test ./...", "FAIL", rc=1)])["test_state"] == 1.0


def test_re_reading_what_was_already_read() -> None:
    run = [bash("cat a.py"), bash("nl -ba a.py | sed -n '1,40p'"), bash("head -n 20 b.py"), bash("sed -n '5,9p' a.py")]
    values = _values(run)
    assert values["reread_share"] == 2 / 4  # `nl -ba a.py` and `sed -n '5,9p' a.py` read a.py again
    customer = [tool("get_reservation_details", {"reservation_id": "X"}), tool("get_reservation_details",
                {"reservation_id": "X"}), tool("get_reservation_details", {"reservation_id": "Y"})]  # fmt: skip
    assert _values(customer)["reread_share"] == 1 / 3
    assert _values(customer)["repeat_share"] == 1 / 3  # the same tool with the same arguments


def test_a_policy_refusal_followed_by_the_same_request() -> None:
    assert is_refusal("I'm sorry, but I can't change a basic economy ticket.")
    assert is_refusal("That is against our policy.")
    assert not is_refusal("Sure, I have changed your flight.")
    run = [
        say("I'm sorry, but I cannot do that."),
        say("I'm sorry, but I am unable to refund it."),
        say("Anything else?"),
    ]
    values = _values(run)
    assert values["refusals"] == math.log1p(2)
    assert values["refusal_repeats"] == math.log1p(1)
    assert (
        _values([say("I'm sorry, but I cannot."), tool("get_user", {}), say("I can't do that.")])["refusal_repeats"]
        == 0.0
    )  # a call in between: not the same request again


def test_turns_since_the_last_state_changing_call_on_a_customer_service_run() -> None:
    run = [tool("get_user_details", {"user_id": "u"}), tool("cancel_reservation", {"reservation_id": "R"}),
           say("Done. Anything else?"), tool("get_reservation_details", {"reservation_id": "R"})]  # fmt: skip
    assert _values(run)["since_change"] == math.log1p(2)


def test_drift_is_the_similarity_to_the_last_thoughts() -> None:
    def embed(text: str) -> list[float]:  # a bag of two words, enough to check the arithmetic
        words = text.split()
        return [float(words.count("loop")), float(words.count("fix"))]

    drift = DriftScore(embed, window=2)
    assert drift.add("loop loop") == 0.0  # nothing to compare with yet
    assert drift.add("fix") == 0.0
    assert drift.add("loop") == 1.0
    assert drift.add("fix fix") == 1.0  # "fix" is still among the last two
    assert drift.add("   ") == 0.0
    tracker = ProgressTracker(drift=DriftScore(embed))
    tracker.add(say("loop"))
    tracker.add(say("loop loop"))
    assert tracker.values()[PROGRESS_FEATURES.index("drift")] == 1.0
    assert _values([say("loop"), say("loop")])["drift"] == 0.0  # no embedder: off


def test_the_keys_a_run_keeps_are_bounded() -> None:
    tracker = ProgressTracker()
    for i in range(KEYS_KEPT + 10):
        tracker.add(bash(f"cat file_{chr(97 + i % 26)}{'x' * (i // 26)}.py"))
    assert len(tracker._seen_calls._keys) <= KEYS_KEPT
    assert len(tracker._read_keys._keys) <= KEYS_KEPT


# -- live and replay ------------------------------------------------------------------------------------------


def _mini_swe_file(path: Path, commands: list[tuple[str, str, int]]) -> None:
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are a helpful assistant."},
                                         {"role": "user", "content": "Fix the bug."}]  # fmt: skip
    for command, output, rc in commands:
        messages.append({"role": "assistant", "content": f"THOUGHT: next.\n\n```bash\n{command}\n```"})
        messages.append({"role": "user", "content": f"<returncode>{rc}</returncode>\n<output>\n{output}\n</output>"})
    record = {"trajectory_format": "mini-swe-agent-1", "instance_id": "demo__demo-1", "messages": messages,
              "info": {"exit_status": "Submitted", "model_stats": {"api_calls": len(commands)},
                       "config": {"model": {"model_name": "scripted"}}}}  # fmt: skip
    path.write_text(json.dumps(record), encoding="utf-8")


def test_live_and_replay_give_the_same_values(tmp_path: Path) -> None:
    commands = [
        ("cat a.py", "x = 1", 0),
        ("python -m pytest -q", "1 failed", 1),
        ("sed -i 's/1/2/' a.py", "", 0),
        ("python -m pytest -q", "1 passed", 0),
        ("cat a.py", "x = 2", 0),
    ]
    _mini_swe_file(tmp_path / "demo__demo-1.traj.json", commands)
    (tmp_path / "labels.json").write_text(json.dumps({"demo__demo-1": True}), encoding="utf-8")
    replayed = read_dataset([tmp_path / "demo__demo-1.traj.json"], labels=tmp_path / "labels.json").runs[0].steps
    live = [bash(c, o, rc) for c, o, rc in commands]
    assert len(replayed) == len(live)
    tracker_live, tracker_replay = ProgressTracker(), ProgressTracker()
    for a, b in zip(live, replayed, strict=True):
        tracker_live.add(a)
        tracker_replay.add(b)
        assert tracker_live.values() == tracker_replay.values()
    assert tracker_live.values()[PROGRESS_FEATURES.index("test_state")] == -1.0


def test_the_pilot_reads_the_progress_signals_after_the_size_features() -> None:
    model = PilotModel(0.0, (0.0,) * len(FEATURES), {"mean_steps": 20, "mean_chars": 1e4, "mean_context": 1e4,
                       "mean_hedges": 5, "mean_errors": 2}, {}, features=FEATURES)  # fmt: skip
    run = PilotRun(model, BaselineCache(), "agent")
    steps = [bash("cat a.py"), bash("cat a.py"), bash("python -m pytest", "2 failed", 1)]
    tracker = ProgressTracker()
    for step in steps:
        view = run.observe(step)
        tracker.add(step)
    assert view.features[-len(PROGRESS_FEATURES) :] == tracker.values()
    assert FEATURES[-len(PROGRESS_FEATURES) :] == PROGRESS_FEATURES


# -- the incremental tracker against the plain definition -------------------------------------------------------


def _plain(steps: list[ScorerStep]) -> list[float]:
    """Every signal recomputed from the whole prefix, rule by rule (the module docstring's definitions)."""
    from rb_otel.steering.pilot import progress as p

    calls = [s for s in steps if s.action is not None]
    writes = [i for i, s in enumerate(steps) if s.action is not None and call_writes(s.action, s.action_input or "")]
    since = len(steps) - 1 - writes[-1] if writes else len(steps)
    keys = [s.action + "\x00" + p._DIGITS.sub("0", p._SPACE.sub(" ", (s.action_input or "")[:2000]).strip())
            for s in calls]  # fmt: skip
    repeats = sum(k in keys[:i] for i, k in enumerate(keys))
    streak = 0
    for i in range(len(keys) - 1, -1, -1):
        if keys[i] not in keys[:i]:
            break
        streak += 1
    fails = [observation_fails(s) for s in calls]
    fail_streak = 0
    for f in reversed(fails):
        if not f:
            break
        fail_streak += 1
    tests = [s for s in calls if p._runs_tests(s.action or "", s.action_input or "")]
    state = 0.0
    if tests:
        last = tests[-1]
        code = return_code(last.observation or "")
        failed = code != 0 if code is not None else bool(last.error or p._TEST_FAILED.search(last.observation or ""))
        state = 1.0 if failed else -1.0
    targets = [t for s in calls if (t := p._read_target(s.action or "", s.action_input or "")) is not None]
    rereads = sum(t in targets[:i] for i, t in enumerate(targets))
    refusals = [s.action is None and is_refusal(s.thought) for s in steps]
    repeats_of_refusal = sum(refusals[i] and refusals[i - 1] for i in range(1, len(refusals)))
    return [
        math.log1p(since),
        len(writes) / max(len(steps), 1),
        repeats / max(len(calls), 1),
        math.log1p(streak),
        math.log1p(fail_streak),
        sum(fails) / max(len(calls), 1),
        math.log1p(len(tests)),
        state,
        rereads / len(targets) if targets else 0.0,
        math.log1p(sum(refusals)),
        math.log1p(repeats_of_refusal),
        0.0,
    ]


_COMMANDS = st.sampled_from([
    "cat a.py", "cat b.py", "sed -n '1,9p' a.py", "sed -i 's/a/b/' a.py", "python -m pytest -q", "ls",
    "echo x > c.py", "grep -n foo a.py", "tox -e py", "nl -ba b.py",
])  # fmt: skip
_STEPS = st.one_of(
    st.builds(
        bash, _COMMANDS, st.sampled_from(["", "1 failed", "Traceback (most recent call last)"]), st.sampled_from([0, 1])
    ),
    st.builds(
        tool,
        st.sampled_from(["get_user", "update_order", "search_flights"]),
        st.fixed_dictionaries({"id": st.integers(0, 3)}),
        st.sampled_from(["ok", "Error: no"]),
    ),
    st.builds(say, st.sampled_from(["I'm sorry, but I can't do that.", "Done.", "Let me check."])),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_STEPS, max_size=25))
def test_the_tracker_is_its_plain_definition(steps: list[ScorerStep]) -> None:
    tracker = ProgressTracker()
    for i, step in enumerate(steps):
        tracker.add(step)
        assert tracker.values() == _plain(steps[: i + 1])
    assert all(math.isfinite(v) for v in tracker.values())


def test_the_drift_embedder_is_an_optional_extra_with_a_clear_message() -> None:
    """Without the ``[drift]`` extra (the test environment does not install PyTorch) the embedder says what to
    install; with it, it embeds. Either way ``import rb_otel`` never loads it."""
    import importlib.util
    import subprocess
    import sys

    from rb_otel.backends.embeddings import DRIFT_EXTRA, EmbedderUnavailable, sentence_embedder

    if importlib.util.find_spec("sentence_transformers") is None:
        with pytest.raises(EmbedderUnavailable, match=re.escape(DRIFT_EXTRA)):
            sentence_embedder()
    else:
        embed = sentence_embedder()
        same, other = embed("the test fails again"), embed("the test fails again")
        assert len(same) == 384 and abs(sum(a * b for a, b in zip(same, other, strict=True)) - 1.0) < 1e-4
    code = "import sys, rb_otel; rb_otel.ReasonBlocks; print('sentence_transformers' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.strip() == "False"
