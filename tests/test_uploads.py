"""Content handed to a GenAI completion hook: util-genai's own ``upload`` hook, loaded the way the conventions say
(``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK``), writing to a real file system and to fsspec's memory one."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import Otel, add, calc_script
from langchain.agents import create_agent

from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel

fsspec = pytest.importorskip("fsspec", reason="fsspec (the upload extra) uploads the content")
pytest.importorskip("opentelemetry.util.genai.completion_hook", reason="opentelemetry-util-genai (the upload extra)")

REFS = ("gen_ai.input.messages_ref", "gen_ai.output.messages_ref", "gen_ai.system_instructions_ref")
SECRET = "sk-ant-api03-" + "x" * 40


def _run(rb: ReasonBlocks, question: str = "what is 1+2?") -> None:
    agent = create_agent(
        ScriptedChatModel(script=calc_script(1)),
        [add],
        middleware=[rb.middleware(agent_name="calc")],
        system_prompt="Add the numbers.",
    )
    agent.invoke({"messages": [("user", question)]})
    rb.close()  # waits for the uploads in flight


def _read(ref: Any) -> Any:
    """An uploaded file by its reference (an fsspec URL: ``file:/...``, ``memory://...``)."""
    with fsspec.open(str(ref), "r") as file:
        return json.loads(file.read())


@pytest.fixture
def upload_to(monkeypatch: pytest.MonkeyPatch) -> Any:
    def configure(base: str) -> None:
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", "upload")
        monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH", base)

    return configure


def test_every_model_call_is_uploaded_and_referenced_without_content_capture(
    otel: Otel, tmp_path: Path, upload_to: Any
) -> None:
    upload_to(str(tmp_path))
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    _run(rb, f"what is 1+2? my key is {SECRET}")
    chats = otel.spans("chat")
    assert len(chats) == 2
    for span in chats:
        attrs = dict(span.attributes or {})
        assert "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs  # capture is off
        assert all(str(tmp_path) in str(attrs[ref]) for ref in REFS), attrs
    first = dict(chats[0].attributes or {})
    inputs = _read(first["gen_ai.input.messages_ref"])
    assert inputs[0]["role"] == "user" and "what is 1+2?" in inputs[0]["parts"][0]["content"]
    assert SECRET not in json.dumps(inputs)  # redacted as captured text is
    system = _read(first["gen_ai.system_instructions_ref"])
    assert "Add the numbers." in system[0]["content"] and "[REASONBLOCKS]" in system[0]["content"]
    outputs = _read(first["gen_ai.output.messages_ref"])
    assert outputs[0]["role"] == "assistant" and outputs[0]["finish_reason"] == "tool_calls"
    last = dict(chats[1].attributes or {})
    answer = _read(last["gen_ai.output.messages_ref"])
    assert answer[0]["parts"][0]["content"] == "The answer is 30."


def test_a_memory_file_system_receives_the_same(otel: Otel, upload_to: Any) -> None:
    upload_to("memory://rb-otel-uploads")
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    _run(rb)
    span = otel.spans("chat")[-1]
    ref = str((span.attributes or {})["gen_ai.input.messages_ref"])
    assert "rb-otel-uploads/" in ref and ref.startswith("memory://")
    roles = [message["role"] for message in _read(ref)]
    assert roles == ["user", "assistant", "tool"]  # the question, the tool call, its result


def test_no_hook_named_means_no_uploads_and_no_messages_built(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK", raising=False)
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    assert rb.telemetry.uploads is None and not rb.telemetry.wants_content
    _run(rb)
    assert not any(ref in (s.attributes or {}) for s in otel.spans("chat") for ref in REFS)


class _Failing:
    def on_completion(self, **kwargs: Any) -> None:
        raise OSError("the bucket is gone")


def test_a_failing_hook_is_logged_and_the_agent_carries_on(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, completion_hook=_Failing()
    )
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        _run(rb)
    assert len(otel.spans("chat")) == 2 and len(otel.spans("invoke_agent")) == 1
    assert "the completion hook failed" in caplog.text


class _Recording:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def on_completion(self, **kwargs: Any) -> None:
        self.calls.append(kwargs)


def test_a_hook_given_directly_gets_util_genai_messages(otel: Otel) -> None:
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text

    hook = _Recording()
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, completion_hook=hook)
    _run(rb)
    assert len(hook.calls) == 2
    call = hook.calls[0]
    assert all(isinstance(m, InputMessage) for m in call["inputs"])
    assert all(isinstance(m, OutputMessage) for m in call["outputs"])
    assert isinstance(call["system_instruction"][0], Text) and call["span"] is not None


def test_a_hook_without_on_completion_is_refused_at_the_boundary() -> None:
    with pytest.raises(TypeError, match="on_completion"):
        ReasonBlocks(completion_hook=object())
