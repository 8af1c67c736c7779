"""rb-otel's LangChain telemetry against the official GenAI LangChain instrumentation on the same agent run.

What the official instrumentation records, rb-otel records too (span names, kinds, parents, ``gen_ai.*`` keys with
the same values, metric names and label keys); what rb-otel adds beyond it is the documented list below
(docs/telemetry.md, "Against the official instrumentation"). A new difference either way fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "opentelemetry.instrumentation.genai.langchain",
    reason="the official instrumentation (opentelemetry-instrumentation-genai-langchain, in the dev extra)",
)

DUMP = Path(__file__).resolve().parent / "conformance_dump.py"

#: ``gen_ai.*`` span attributes rb-otel sets that the official instrumentation does not, by operation.
EXTRA_SPAN_KEYS = {
    "invoke_agent": {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"},  # the run's totals
    "chat": set(),
    "execute_tool": set(),
}
#: Values that differ by design: rb-otel's steering block is part of what the model reads.
DIFFERENT_VALUES = {"gen_ai.usage.input_tokens"}
#: Metric label keys rb-otel adds, by metric (its steering state and run outcome; bounded).
EXTRA_LABELS = {
    "gen_ai.client.operation.duration": {"rb.fsm_state"},
    "gen_ai.client.token.usage": {"rb.fsm_state"},
    "gen_ai.invoke_agent.duration": {"rb.outcome"},
    "gen_ai.execute_tool.duration": set(),
}


def _dump(side: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(DUMP), side], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def both() -> tuple[dict[str, Any], dict[str, Any]]:
    return _dump("official"), _dump("rb")


def _gen_ai_spans(dump: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in dump["spans"] if "gen_ai.operation.name" in s["attrs"]]


def test_the_same_spans_in_the_same_tree(both: tuple[dict[str, Any], dict[str, Any]]) -> None:
    official, ours = both
    shape = [(s["name"], s["kind"], s["parent"]) for s in _gen_ai_spans(official)]
    assert shape == [(s["name"], s["kind"], s["parent"]) for s in _gen_ai_spans(ours)]
    assert [name for name, _, _ in shape][:3] == ["invoke_agent calc", "chat scripted-1", "execute_tool add"]


def test_what_the_official_instrumentation_records_we_record_alike(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    official, ours = both
    for theirs, mine in zip(_gen_ai_spans(official), _gen_ai_spans(ours), strict=True):
        operation = theirs["attrs"]["gen_ai.operation.name"]
        missing = set(theirs["attrs"]) - set(mine["attrs"])
        assert not missing, f"{theirs['name']}: rb-otel lacks {sorted(missing)}"
        for key, value in theirs["attrs"].items():
            if key not in DIFFERENT_VALUES:
                assert mine["attrs"][key] == value, f"{theirs['name']}: {key} {mine['attrs'][key]!r} != {value!r}"
        extra = set(mine["attrs"]) - set(theirs["attrs"]) - {"error.type"}
        assert extra == EXTRA_SPAN_KEYS[operation], f"{theirs['name']}: undocumented extra keys {sorted(extra)}"


def test_the_same_metrics_with_the_same_labels_plus_our_documented_ones(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    official, ours = both
    assert official["metrics"], "the official instrumentation recorded no metrics"
    for name, labels in official["metrics"].items():
        assert name in ours["metrics"], f"rb-otel does not record {name}"
        mine = set(ours["metrics"][name])
        assert set(labels) <= mine, f"{name}: rb-otel lacks labels {sorted(set(labels) - mine)}"
        assert mine - set(labels) == EXTRA_LABELS[name], f"{name}: undocumented labels {sorted(mine - set(labels))}"


def test_the_token_counts_differ_only_by_what_the_steering_adds(
    both: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    official, ours = both
    for theirs, mine in zip(_gen_ai_spans(official), _gen_ai_spans(ours), strict=True):
        if theirs["attrs"]["gen_ai.operation.name"] == "chat":
            assert mine["attrs"]["gen_ai.usage.input_tokens"] >= theirs["attrs"]["gen_ai.usage.input_tokens"]
            assert mine["attrs"]["gen_ai.usage.output_tokens"] == theirs["attrs"]["gen_ai.usage.output_tokens"]
