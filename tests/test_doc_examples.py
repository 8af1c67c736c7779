"""Every ```` ```python ```` block in README.md and docs/*.md runs as pasted.

The rule the docs are written to: **the blocks of one file run in order, in one namespace**, in a fresh interpreter
of that file's own, as a reader pastes them one after another into one script: a block may use what an earlier
block of its file defined (the README's ``rb`` comes from its first example), never what another file's did, and
top-level ``await`` is an error, as it is in a script. The first block that raises stops its file and fails this
test with ``FILE:LINE`` (the line in the Markdown file) and the traceback, whose lines are the file's too.

Blocks that call another vendor's API run against the project's local fakes, never the network: in each file's
interpreter ``ANTHROPIC_BASE_URL`` and ``OPENAI_BASE_URL`` point at a :class:`~model_api.ScriptedModelAPI` that
answers every request with a short final answer, ``REASONBLOCKS_BASE_URL`` at the fake rb-api, and the keys are
placeholders; the SDKs' other traffic (the Agents SDK's trace export, the Claude Code CLI's telemetry) is off.
No ``OTEL_*`` variable is set, and the working directory and ``HOME`` are a temporary folder.

A block that cannot run here is marked on the line before its fence with ``<!-- example: skip REASON -->``
(the reason is required: it tells the reader why); at most :data:`MAX_SKIPPED` in all. The blocks after a
skipped one still run, so a skipped block must define nothing they use.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from model_api import Reply, ScriptedModelAPI
from rbapi_server import fake_rbapi

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Blocks marked skipped, across every file: the exception, not the way out.
MAX_SKIPPED = 2

_FENCE = re.compile(r"^```python[ \t]*$")
_SKIP = re.compile(r"^<!--\s*example:\s*skip\b\s*(?P<reason>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    line: int  # the line of the first line of code, counted from 1
    code: str
    skip: str | None  # the reason, when marked


def blocks(path: Path) -> list[Block]:
    """The ```` ```python ```` blocks of ``path`` in order. A skip marker without a reason is a ``ValueError``, and
    so is an unclosed fence (both name the file and line)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        if not _FENCE.match(lines[i]):
            i += 1
            continue
        start = i + 1
        end = next((j for j in range(start, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{path.name}:{i + 1}: a ```python block is never closed")
        marker = _SKIP.match(lines[i - 1]) if i else None
        if marker is not None and not marker["reason"]:
            raise ValueError(f"{path.name}:{i}: `<!-- example: skip -->` needs a reason")
        found.append(Block(start + 1, "\n".join(lines[start:end]) + "\n", marker["reason"] if marker else None))
        i = end + 1
    return found


#: Runs one file's blocks in one namespace; writes what happened to the JSON file it is given. Each block is compiled
#: padded with blank lines, so its traceback's line numbers are the Markdown file's.
_DRIVER = """
import json, sys, traceback
source, results = sys.argv[1], sys.argv[2]
namespace = {"__name__": "__main__"}
outcome = {"ran": 0}
for block in json.load(sys.stdin):
    try:
        code = compile("\\n" * (block["line"] - 1) + block["code"], source, "exec")
        exec(code, namespace)
    except BaseException as exc:
        here = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == source]
        if isinstance(exc, SyntaxError) and exc.filename == source:
            here.append(exc.lineno)
        outcome["failed"] = {"line": here[-1] if here else block["line"], "error": f"{type(exc).__name__}: {exc}",
                             "traceback": "".join(traceback.format_exception(exc))}
        break
    outcome["ran"] += 1
with open(results, "w", encoding="utf-8") as handle:
    json.dump(outcome, handle)
"""


def _anthropic_stream(text: str) -> Reply:
    """A Messages API answer as the streaming API sends it (the Claude Code CLI behind the Agent SDK streams)."""
    events = [
        {"type": "message_start",
         "message": {"id": "msg_doc", "type": "message", "role": "assistant", "model": "claude-doc", "content": [],
                     "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
         "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]  # fmt: skip
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return Reply(raw=body.encode(), headers={"content-type": "text/event-stream"})


def _answer(path: str, body: Any) -> Reply:
    """A final answer in the shape of whichever API was called (no tool calls: every loop ends there)."""
    if path.endswith("/messages") and isinstance(body, dict) and body.get("stream"):
        return _anthropic_stream("Done.")
    if path.endswith("/messages"):
        return Reply({"id": "msg_doc", "type": "message", "role": "assistant", "model": "claude-doc",
                      "content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn",
                      "usage": {"input_tokens": 10, "output_tokens": 2}})  # fmt: skip
    if path.endswith("/responses"):
        return Reply({"id": "resp_doc", "object": "response", "created_at": 0, "model": "gpt-doc",
                      "status": "completed",
                      "output": [{"type": "message", "id": "m1", "role": "assistant", "status": "completed",
                                  "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}],
                      "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
                      "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12,
                                "input_tokens_details": {"cached_tokens": 0},
                                "output_tokens_details": {"reasoning_tokens": 0}}})  # fmt: skip
    return Reply({"id": "chat_doc", "object": "chat.completion", "created": 0, "model": "gpt-doc",
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": "Done."}}],
                  "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}})  # fmt: skip


@pytest.fixture(scope="module")
def fakes() -> Iterator[dict[str, str]]:
    """The environment each file's interpreter gets: the local fakes, placeholder keys, no ``OTEL_*``."""
    with ScriptedModelAPI(_answer) as api, fake_rbapi() as rbapi:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RB_OTEL_PILOT"))}
        yield {
            **base,
            "ANTHROPIC_BASE_URL": api.url,
            "ANTHROPIC_API_KEY": "sk-ant-placeholder",
            "OPENAI_BASE_URL": f"{api.url}/v1",
            "OPENAI_API_KEY": "sk-placeholder",
            "REASONBLOCKS_BASE_URL": rbapi,
            # the SDKs' own traffic beyond the model call: none (the Agents SDK exports its traces to OpenAI, the
            # Claude Code CLI its telemetry)
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
        }


@pytest.mark.parametrize("path", [p for p in FILES if blocks(p)], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_python_blocks_of_a_file_run_in_order(path: Path, fakes: dict[str, str], tmp_path: Path) -> None:
    runnable = [b for b in blocks(path) if b.skip is None]
    results = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(path), str(results)],
        input=json.dumps([{"line": b.line, "code": b.code} for b in runnable]),
        env={**fakes, "HOME": str(tmp_path)}, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert results.is_file(), f"{path.name}: the interpreter ended before its blocks did:\n{done.stderr}"
    outcome = json.loads(results.read_text())
    failed = outcome.get("failed")
    where = path.relative_to(ROOT).as_posix()
    assert failed is None, f"{where}:{failed['line']}: {failed['error']}\n{failed['traceback']}"
    assert outcome["ran"] == len(runnable)


def test_skips_are_rare_and_give_their_reason() -> None:
    skipped = [(p.name, b.line, b.skip) for p in FILES for b in blocks(p) if b.skip]
    assert len(skipped) <= MAX_SKIPPED, skipped


def test_the_runner_reads_fences_markers_and_lines(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("# t\n\n```python\nx = 1\n```\n\n<!-- example: skip needs a GPU -->\n```python\ny = x\n```\n")
    assert blocks(doc) == [Block(4, "x = 1\n", None), Block(9, "y = x\n", "needs a GPU")]
    doc.write_text("<!-- example: skip -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match=re.escape("doc.md:1: `<!-- example: skip -->` needs a reason")):
        blocks(doc)
    doc.write_text("text\n```python\nx = 1\n")
    with pytest.raises(ValueError, match=re.escape("doc.md:2: a ```python block is never closed")):
        blocks(doc)


def test_a_failing_block_is_reported_at_its_line(tmp_path: Path, fakes: dict[str, str]) -> None:
    # the runner's own failure path, on a file whose second block uses a name nothing defined
    doc = tmp_path / "doc.md"
    doc.write_text("# t\n\n```python\nx = 1\n```\n\ntext\n\n```python\ny = x + 1\nprint(z)\n```\n")
    runnable = blocks(doc)
    results = tmp_path / "results.json"
    subprocess.run(
        [sys.executable, "-c", _DRIVER, str(doc), str(results)],
        input=json.dumps([{"line": b.line, "code": b.code} for b in runnable]),
        env=fakes, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    outcome = json.loads(results.read_text())
    assert outcome["ran"] == 1 and outcome["failed"]["line"] == 11  # the line that raised
    assert outcome["failed"]["error"] == "NameError: name 'z' is not defined"
    assert f'File "{doc}", line 11' in outcome["failed"]["traceback"]  # the Markdown file's own line
