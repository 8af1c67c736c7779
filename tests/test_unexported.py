"""Export the user expects: with ``OTEL_*`` exporter variables set and no SDK installed, the first run says so once
(logger ``rb_otel``), naming the one-line fix; it says nothing when an SDK is there by the time a run starts, when
the providers were given, or when nothing asked for export. Each case is a fresh interpreter: the global providers
can be set once per process, and the warning is once per process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Two runs of a real agent through ReasonBlocks, after the set-up its argument names.
_SCRIPT = """
import logging, sys
logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel

case = sys.argv[1]
given = {"tracer_provider": TracerProvider(), "meter_provider": MeterProvider()} if case == "given" else {}
rb = ReasonBlocks(**given)
if case == "sdk-after-construction":  # the application installs its SDK after building ReasonBlocks: that is fine
    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider())
if case == "tracer-only":
    trace.set_tracer_provider(TracerProvider())
for _ in range(2):
    model = ScriptedChatModel(script=[AIMessage("done")])
    create_agent(model, [], middleware=[rb.middleware(agent_name="a")]).invoke({"messages": [("user", "go")]})
print("ran")
"""

_CASES = {
    # case: (extra environment, what stderr must say: None for nothing)
    "no-sdk": ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, "OTEL_EXPORTER_OTLP_ENDPOINT is set"),
    "traces-exporter": (
        {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9"},
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT and OTEL_TRACES_EXPORTER are set",
    ),
    "tracer-only": ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, "the global meter provider is"),
    "sdk-after-construction": ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, None),
    "given": ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}, None),
    "nothing-asked": ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, None),
    "sdk-disabled": ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SDK_DISABLED": "true"}, None),
}


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """Every case's exit code and stderr, the processes started together."""
    script = tmp_path_factory.mktemp("unexported") / "app.py"
    script.write_text(_SCRIPT)
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    procs = {
        case: subprocess.Popen(
            [sys.executable, str(script), case],
            env={**base, **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for case, (extra, _) in _CASES.items()
    }
    done = {}
    for case, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert out.strip() == "ran", err
        done[case] = (proc.returncode, err)
    return done


@pytest.mark.parametrize("case", list(_CASES))
def test_export_asked_for_and_not_configured_is_said_once(outputs: dict[str, tuple[int, str]], case: str) -> None:
    code, stderr = outputs[case]
    expected = _CASES[case][1]
    ours = [line for line in stderr.splitlines() if line.startswith("WARNING rb_otel:")]
    assert code == 0
    if expected is None:
        assert ours == [], stderr
        return
    assert len(ours) == 1, stderr  # two runs, one warning
    (line,) = ours
    assert expected in line and "opentelemetry-instrument python app.py" in line and "rb_otel.configure()" in line
    assert "Traceback" not in stderr


def test_the_fix_it_names_is_one_line_and_it_works(tmp_path: Path) -> None:
    # rb_otel.configure()'s providers, given to ReasonBlocks: no warning (the library path the message points to)
    script = tmp_path / "fixed.py"
    script.write_text(
        _SCRIPT.replace(
            'if case == "given" else {}',
            'if case == "given" else {k: getattr(p, k) for k in ("tracer_provider", "meter_provider")}',
        ).replace("case = sys.argv[1]", "case = sys.argv[1]\nfrom rb_otel import configure\np = configure()")
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, "OTEL_TRACES_EXPORTER": "console"}
    done = subprocess.run(
        [sys.executable, str(script), "fixed"], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and "WARNING rb_otel:" not in done.stderr, done.stderr
