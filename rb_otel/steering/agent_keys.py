"""Agent keys: the key an agent's baselines are kept under, its name and its model with every spelling of the
model folded together; and the key of a run's request (what kind of task it was given), under which its agent's
baseline compares it with the same request's earlier runs
(:class:`~rb_otel.steering.pilot.baselines.RequestBaseline`)."""

from __future__ import annotations

import hashlib
import logging
import re
import threading

__all__ = ["agent_key", "agent_name_of", "normalise_model", "request_code", "request_key"]

_log = logging.getLogger("rb_otel.baselines")

# "anthropic:", "google_genai:" (not "host:8080", nor OpenAI's "ft:" of a fine-tuned model: that is another model)
_PROVIDER_PREFIX = re.compile(r"^(?!ft:)[a-z0-9][a-z0-9_.\-]*:(?!\d)")
_warned_unnamed: set[str] = set()
_warn_lock = threading.Lock()


def normalise_model(model: str) -> str:
    """A model id with the spellings of one model folded together: lower case; a ``provider:`` prefix
    (LangChain's ``init_chat_model`` form), a leading ``@``, ``models/`` and any ``vendor/`` path (LiteLLM,
    OpenRouter, Vertex) dropped. ``"@google/Gemini-3-Pro"``, ``"google/gemini-3-pro"``,
    ``"models/gemini-3-pro"`` and ``"google_genai:gemini-3-pro"`` are all ``"gemini-3-pro"``."""
    text = str(model or "").strip().lower()
    text = _PROVIDER_PREFIX.sub("", text, count=1).lstrip("@")
    return text.rstrip("/").rsplit("/", 1)[-1]


def agent_key(agent_name: str, model: str = "") -> str:
    """The key an agent's baselines are kept under: its name and its normalised model, ``"name|model"``.

    Runs of one agent on one model share a baseline, whichever way the model is spelled
    (:func:`normalise_model`). An unnamed agent gets its key from the model alone, shared with every other
    unnamed agent on that model (warned about once per model: pass ``agent_name=`` to keep them apart).
    """
    name = str(agent_name or "").strip()
    model_id = normalise_model(model)
    if not name:
        with _warn_lock:
            first = model_id not in _warned_unnamed
            _warned_unnamed.add(model_id)
        if first:
            _log.warning(
                "an unnamed agent on model %r: its pilot baselines are shared with every unnamed agent on that "
                "model; pass agent_name= to give it its own",
                model_id or "(none)",
            )
    return f"{name}|{model_id}"


def agent_name_of(key: str) -> str:
    """The agent name :func:`agent_key` made ``key`` of (``""`` for an unnamed agent's): what metrics label an agent
    with (``gen_ai.agent.name``), never the model part, as the run metrics do."""
    return str(key).split("|", 1)[0]


def request_key(first_user_turn: str) -> str:
    """The key of a request from its first user turn: the text with the names of what it is about (paths,
    repositories, ids, numbers) replaced by placeholders (:func:`~rb_otel.steering.pilot.text.normalise_text`),
    hashed (a truncated SHA-256: no content is kept). A task id given by the user (``metadata={"task_id": ...}``)
    is the key itself; this is for runs without one. ``""`` for an empty turn."""
    from rb_otel.steering.pilot.text import normalise_text  # (the pilot package imports this module)

    text = normalise_text(str(first_user_turn or ""))
    return "" if not text else "turn:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def request_code(request: str) -> float | None:
    """``request`` (a task id or :func:`request_key`) as the number a run summary keeps (48 bits of its SHA-256,
    exact in a float); ``None`` for no request."""
    if not request:
        return None
    return float(int(hashlib.sha256(str(request).encode("utf-8")).hexdigest()[:12], 16))
