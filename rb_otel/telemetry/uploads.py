"""Content uploaded to external storage by a GenAI completion hook, as the conventions specify.

The GenAI conventions let an instrumentation hand each model call's messages to a *completion hook* that stores
them elsewhere (a bucket, a file system) and stamps references on the span (``gen_ai.input.messages_ref``,
``gen_ai.output.messages_ref``, ``gen_ai.system_instructions_ref``). ``opentelemetry-util-genai`` defines the hook
(``CompletionHook``), loads the one named by ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK`` from the
``opentelemetry_genai_completion_hook`` entry points, and ships ``upload`` (fsspec, to
``OTEL_INSTRUMENTATION_GENAI_UPLOAD_BASE_PATH``). rb-otel calls whichever hook is configured at the end of every
live ``chat`` span, whatever the capture mode (naming a hook is the opt-in), with text redacted as captured text
is. Needs the ``upload`` extra: ``pip install 'rb-otel[upload]'``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import Span

from rb_otel.telemetry.content import redact

__all__ = ["HOOK_VARIABLE", "CompletionUploads", "UploadingMessages", "completion_uploads"]

_log = logging.getLogger(__name__)

#: The variable that names the completion hook (util-genai's ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK``).
HOOK_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK"

# LangChain's message types as the conventions name roles
_ROLES = {"human": "user", "ai": "assistant", "AIMessageChunk": "assistant"}


class UploadingMessages:
    """What a live ``chat`` span holds for the hook until it ends: the messages it was called with."""

    __slots__ = ("inputs", "system")

    def __init__(self, inputs: Any, system: str | None) -> None:
        self.inputs = inputs
        self.system = system


class CompletionUploads:
    """Calls ``hook.on_completion`` for finished model calls with util-genai's message types; never raises."""

    def __init__(self, hook: Any) -> None:
        """``hook``: anything with util-genai's ``CompletionHook.on_completion`` (keyword arguments only)."""
        if not callable(getattr(hook, "on_completion", None)):
            raise TypeError(f"completion_hook must have an on_completion method, got {type(hook).__name__}")
        try:
            from opentelemetry.util.genai import types
        except ImportError as error:  # named at the boundary, not from deep inside a model call
            raise ImportError(
                "a completion hook needs opentelemetry-util-genai: pip install 'rb-otel[upload]'"
            ) from error
        self._types = types
        self.hook = hook

    def upload(
        self,
        span: Span,
        held: UploadingMessages,
        outputs: Any,
        finish_reasons: Sequence[str],
    ) -> None:
        """Hand one call's messages to the hook, which stores them and sets the ``*_ref`` attributes on ``span``
        (still open: it ends after this)."""
        try:
            inputs = [self._input(message) for message in _messages(held.inputs)]
            system = [self._types.Text(content=redact(held.system))] if held.system else []
            finish = finish_reasons[0] if finish_reasons else "stop"
            answers = [self._output(message, finish) for message in _messages(outputs)]
            if not (inputs or answers or system):
                return
            self.hook.on_completion(
                inputs=inputs, outputs=answers, system_instruction=system, span=span, log_record=None
            )
        except Exception:
            _log.warning("the completion hook failed; the call's content was not uploaded", exc_info=True)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout`` seconds) for uploads in flight, if the hook can."""
        # load_completion_hook() wraps the hook in one that swallows its errors and has no shutdown of its own
        hook = getattr(self.hook, "_wrapped", self.hook)
        shutdown = getattr(hook, "shutdown", None)
        if shutdown is None:
            return
        try:
            shutdown(timeout_sec=timeout)
        except TypeError:
            shutdown()
        except Exception:
            _log.warning("shutting the completion hook down failed", exc_info=True)

    def _input(self, message: Any) -> Any:
        role, text = _role_and_text(message)
        return self._types.InputMessage(role=role, parts=[self._types.Text(content=redact(text))])

    def _output(self, message: Any, finish_reason: str) -> Any:
        role, text = _role_and_text(message)
        return self._types.OutputMessage(
            role=role if role != "user" else "assistant",
            parts=[self._types.Text(content=redact(text))],
            finish_reason=finish_reason,
        )


def completion_uploads(hook: Any = None) -> CompletionUploads | None:
    """The uploads for ``hook``, else for the hook ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK`` names (loaded by
    util-genai), else ``None``. A named hook that needs a missing package is a warning, and no uploads."""
    if hook is not None:
        return CompletionUploads(hook)
    name = os.environ.get(HOOK_VARIABLE, "").strip()
    if not name:
        return None
    try:
        from opentelemetry.util.genai.completion_hook import load_completion_hook
    except ImportError:
        _log.warning("%s=%s needs opentelemetry-util-genai: pip install 'rb-otel[upload]'", HOOK_VARIABLE, name)
        return None
    loaded = load_completion_hook()  # logs why when the name does not resolve
    if type(loaded).__name__ == "_NoOpCompletionHook":
        return None
    return CompletionUploads(loaded)


def _messages(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, Sequence):
        return list(value)
    return [value]


def _role_and_text(message: Any) -> tuple[str, str]:
    """A message of any adapter (``{"role"|"type", "content"}``, content a string or blocks) as role and text."""
    if not isinstance(message, dict):
        return "user", str(message)
    role = str(message.get("role") or message.get("type") or "user")
    content = message.get("content", "")
    if isinstance(content, list):  # content blocks (Anthropic, OpenAI Responses): their text, in order
        content = "\n".join(str(block.get("text", "")) if isinstance(block, dict) else str(block) for block in content)
    return _ROLES.get(role, role), str(content)
