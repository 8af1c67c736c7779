"""The usage matrix (``usage_matrix.py``): every LangGraph deployment shape run under rb-otel and under the official
GenAI LangChain instrumentation, compared case by case: the ``chat`` spans (model, parent operation, status), the
``execute_tool`` spans, the output tokens, what the run raised; rb-otel's run totals against its own calls; no span
left open. The differences by design are the documented ones (docs/telemetry.md, "Against the official
instrumentation"); any other fails."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "opentelemetry.instrumentation.genai.langchain",
    reason="the official instrumentation (opentelemetry-instrumentation-genai-langchain, in the dev extra)",
)

MATRIX = Path(__file__).resolve().parent / "usage_matrix.py"
sys.path.insert(0, str(MATRIX.parent))
from usage_matrix import CASES  # noqa: E402

#: By design: a subagent without rb-otel of its own has its model calls on the run, not its tool calls (its tools
#: are its own agent's steps, which nobody steers); the official package records every tool of every runnable.
ONLY_OFFICIAL_TOOLS = {"subagent as a tool": Counter({("add", "invoke_agent", "UNSET"): 1})}


def _side(name: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(MATRIX), name], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def matrix() -> tuple[dict[str, Any], dict[str, Any]]:
    return _side("rb"), _side("official")


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_calls_as_the_official_package(matrix: tuple[dict[str, Any], dict[str, Any]], case: str) -> None:
    ours, official = matrix[0][case], matrix[1][case]
    assert Counter((m, p, s) for m, p, s, *_ in ours["chat"]) == Counter((m, p, s) for m, p, s, *_ in official["chat"])
    assert sum(c[4] or 0 for c in ours["chat"]) == sum(c[4] or 0 for c in official["chat"])  # output tokens
    tools = Counter(tuple(t) for t in ours["tools"]) + ONLY_OFFICIAL_TOOLS.get(case, Counter())
    assert tools == Counter(tuple(t) for t in official["tools"])
    assert ours["raised"] == official["raised"]
    assert ours["in_flight"] == 0  # every run span rb-otel started has ended


@pytest.mark.parametrize("case", [c for c in CASES if c not in ("batch, one run failing", "20 concurrent runs")])
def test_the_runs_totals_are_its_calls(matrix: tuple[dict[str, Any], dict[str, Any]], case: str) -> None:
    ours = matrix[0][case]
    calls = ours["chat"]
    inputs = [c[3] for c in calls if c[3] is not None]
    outputs = [c[4] for c in calls if c[4] is not None]
    runs = ours["runs"]
    if not inputs and not outputs and any(c[2] == "UNSET" for c in calls):  # no call reported usage
        assert all(run == [None, None, None] for run in runs)
        return
    assert [sum(r[0] for r in runs), sum(r[1] for r in runs)] == [sum(inputs), sum(outputs)]
    assert sum(r[2] for r in runs) == sum(inputs) + sum(outputs)  # rb.tokens: every call, steps or not
