"""The walk of one model request through the middleware: the rb-otel code a reader follows from the hook to where
its ``chat`` span starts, and from the hook to where that span ends.

    python benchmarks/request_walk.py [--show]

A real ``create_agent`` with a scripted model (rb_otel.testing) makes two model calls; for the second (a scored
step) the call stack is taken where the SDK starts its ``chat`` span and where it ends it. The walk is the rb-otel
frames of the first stack (outermost first) followed by those of the second; consecutive frames in one module are
one *stop*. Printed: the stops, the distinct modules, and the *returns* (stops in a module the walk had already
left). ``--show`` prints the walk, one stop a line (module and functions). A number for reading the code, not a
timing. (``--all`` counts every call and return inside rb-otel during the request instead.)
"""

from __future__ import annotations

import argparse
import json
import sys
from types import FrameType
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel import ReasonBlocks
from rb_otel.integrations.langchain.middleware import ReasonBlocksMiddleware
from rb_otel.testing import ScriptedChatModel, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _module(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if isinstance(name, str) and name.startswith("rb_otel") else None


def _rb_frames() -> list[tuple[str, str]]:
    """The rb-otel frames of the current stack, outermost first: (module, function)."""
    frames = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        module = _module(frame)
        if module is not None:
            frames.append((module, frame.f_code.co_name))
        frame = frame.f_back
    return frames[::-1]


def _stops(frames: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    stops: list[tuple[str, list[str]]] = []
    for module, function in frames:
        if stops and stops[-1][0] == module:
            stops[-1][1].append(function)
        else:
            stops.append((module, [function]))
    return stops


def span_walk() -> list[tuple[str, list[str]]]:
    """The stops from the hook to the ``chat`` span's start, then from the hook to its end (the second call)."""
    stacks: dict[str, list[tuple[str, str]]] = {}
    start, end = sdk_trace.Tracer.start_span, sdk_trace.Span.end
    watching = {"on": False}

    def start_span(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if watching["on"] and name.startswith("chat") and "start" not in stacks:
            stacks["start"] = _rb_frames()
            span = start(self, name, *args, **kwargs)
            stacks["span"] = [("", str(id(span)))]
            return span
        return start(self, name, *args, **kwargs)

    def end_span(self: Any, *args: Any, **kwargs: Any) -> None:
        if "span" in stacks and stacks["span"][0][1] == str(id(self)) and "end" not in stacks:
            stacks["end"] = _rb_frames()
        end(self, *args, **kwargs)

    sdk_trace.Tracer.start_span = start_span  # type: ignore[method-assign]
    sdk_trace.Span.end = end_span  # type: ignore[method-assign]
    try:
        _run(lambda: watching.update(on=True))
    finally:
        sdk_trace.Tracer.start_span = start  # type: ignore[method-assign]
        sdk_trace.Span.end = end  # type: ignore[method-assign]
    return _stops(stacks["start"]) + _stops(stacks["end"])


def _run(on_second_call: Any, profile: Any = None) -> None:
    """The two-call agent run; ``on_second_call()`` just before the second model request (traced with ``profile``)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    rb = ReasonBlocks(tracer_provider=provider, meter_provider=MeterProvider(), telemetry_batch_window=0)
    script = [
        tool_call("add", {"a": 1, "b": 2}, "c0", content="I am not sure; maybe adding first, then check the error."),
        AIMessage("The answer is 3."),
    ]
    calls = {"n": 0}
    original = ReasonBlocksMiddleware.wrap_model_call

    def traced(self: Any, request: Any, handler: Any) -> Any:
        calls["n"] += 1
        if calls["n"] != 2:
            return original(self, request, handler)
        on_second_call()
        sys.setprofile(profile)
        try:
            return original(self, request, handler)
        finally:
            sys.setprofile(None)

    ReasonBlocksMiddleware.wrap_model_call = traced  # type: ignore[method-assign]
    try:
        agent = create_agent(
            ScriptedChatModel(script=script), [add], system_prompt="You add.", middleware=[rb.middleware()]
        )
        agent.invoke({"messages": [("user", "1 + 2?")]})
    finally:
        ReasonBlocksMiddleware.wrap_model_call = original  # type: ignore[method-assign]


def walk() -> list[str]:
    """The modules the second model request goes through, one entry per stop (every call and return)."""
    events: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event in ("call", "return"):
            module = _module(frame)
            if module is not None and (not events or events[-1] != module):
                events.append(module)

    _run(lambda: None, profile)
    return events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print the walk, a stop a line")
    parser.add_argument("--all", action="store_true", help="every call and return in rb-otel, not the two stacks")
    args = parser.parse_args()
    if args.all:
        stops = walk()
        shown = stops
    else:
        walked = span_walk()
        stops = [module for module, _ in walked]
        shown = [f"{module}: {', '.join(functions)}" for module, functions in walked]
    returns = sum(1 for i, module in enumerate(stops) if module in stops[: i - 1])
    if args.show:
        print("\n".join(shown))
    print(json.dumps({"stops": len(stops), "modules": len(set(stops)), "returns": returns}))


if __name__ == "__main__":
    main()
