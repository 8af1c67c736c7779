"""The agents the development data's README keeps apart: runs that the shipped pilots are *checked* on and must
never be fitted on (``../shared/data/signal/README.md``, "Kept apart"). A development fit refuses any of them, so one
cannot reach a fit by being put in the wrong folder.

Two checks, each by what the records themselves say (never by a field we would have had to add):

- **by run** (:func:`kept_apart`, :func:`refuse_kept_apart`): the harness, model and source the importers read from
  the files (:class:`AgentRecord`: a :class:`~rb_otel.training.dataset.LabelledRun` or an
  :class:`~rb_otel.importers.model.ImportedRun`). The OpenHands reader names its harness ``openhands <agent class>``
  and the tau-bench readers ``tau-bench``, from the files' own structure;
- **by file** (:func:`kept_apart_file`, :func:`refuse_kept_apart_files`): the markers of each file's format and
  agent in its first bytes, for every file under the folders a development fit reads, whatever the importers make
  of it (aider's chat transcripts are no run format at all):

  - OpenHands: an event history (``"history"`` whose events carry ``"source": "agent"|"user"|"environment"`` with an
    ``"action"`` or ``"observation"``, or its older ``[action, observation]`` pairs), or ``metadata.agent_class``
    ``CodeActAgent``;
  - tau-bench (v1) results: ``{task_id, reward, info, traj}`` elements, in a list or alone (its historical GPT-4o
    trajectories are such files; tau2-bench writes ``simulations`` instead);
  - aider: a chat transcript (``# aider chat started at``, ``> Aider v0.``) or aider's SWE-bench predictions
    (``"model_name_or_path": "aider...``, ``"edit_format"``);
  - the tau2-bench leaderboard submissions of gpt-oss-120b (a LangGraph agent) and of Claude Opus 4.6 (the Button
    agent, and the ``llm_agent`` file of the IronShell submission): an agent ``llm``, a submission ``model_name`` or
    an agent ``implementation`` naming them.

``rb-otel train`` on a user's own runs has no such rule: a user's OpenHands runs are theirs to fit.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "KEPT_APART",
    "AgentRecord",
    "KeptApart",
    "kept_apart",
    "kept_apart_file",
    "refuse_kept_apart",
    "refuse_kept_apart_files",
]


class AgentRecord(Protocol):
    """What a run says of its agent, as an importer read it."""

    @property
    def run_id(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def harness(self) -> str: ...

    @property
    def model(self) -> str: ...


@dataclass(frozen=True, slots=True)
class KeptApart:
    """One kept-apart agent: ``what`` (in the README's words) and the patterns its runs match (all given ones)."""

    what: str
    model: str = ""  # a regular expression on the normalised model
    harness: str = ""  # ... on the harness
    source: str = ""  # ... on the importer's source name

    def matches(self, run: AgentRecord) -> bool:
        checks = ((self.model, run.model), (self.harness, run.harness), (self.source, run.source))
        return all(re.search(pattern, value or "", re.IGNORECASE) for pattern, value in checks if pattern)


# Spellings of the two tau2 leaderboard models: ``claude-opus-4-6``, ``claude-opus-4.6``, ``Claude Opus 4.6``, ...
_OPUS_46 = r"opus[\s_-]*4[\s._-]*6"
_GPT_OSS_120B = r"gpt[\s_-]*oss[\s_-]*120b"
_OPENHANDS = "OpenHands CodeAct (with Claude 3.5 Sonnet on SWE-bench Verified)"
_AIDER = "aider's SWE-bench Lite runs"
_TAU_BENCH = "tau-bench's historical GPT-4o trajectories"
_GPT_OSS = "the tau2-bench leaderboard submission of gpt-oss-120b (a LangGraph agent)"
_OPUS = "the tau2-bench leaderboard submissions of Claude Opus 4.6 (the Button agent, IronShell's llm_agent file)"

KEPT_APART: tuple[KeptApart, ...] = (
    KeptApart(_OPENHANDS, model=r"claude-3[.-]5-sonnet"),
    KeptApart(_OPENHANDS, source=r"^openhands$"),
    KeptApart(_OPENHANDS, harness=r"openhands|codeact"),
    KeptApart(_AIDER, harness=r"aider"),
    KeptApart(_TAU_BENCH, source=r"^tau_bench$"),
    KeptApart(_TAU_BENCH, harness=r"^tau-bench"),
    KeptApart(_TAU_BENCH, model=r"^gpt-4o(-20\d\d-\d\d-\d\d)?$", harness=r"tau"),
    KeptApart(_GPT_OSS, model=_GPT_OSS_120B),
    KeptApart(_GPT_OSS, harness=r"langgraph"),
    KeptApart(_OPUS, model=_OPUS_46),
    KeptApart(_OPUS, harness=r"\bbutton\b"),
)


def kept_apart(run: AgentRecord) -> str | None:
    """Why ``run`` must stay out of every development fit (the README's words), or ``None``."""
    return next((rule.what for rule in KEPT_APART if rule.matches(run)), None)


def refuse_kept_apart(runs: Iterable[AgentRecord]) -> None:
    """``ValueError`` naming the first runs that the README keeps apart, if any is among ``runs``."""
    found = [(run, why) for run in runs if (why := kept_apart(run)) is not None]
    if found:
        shown = "; ".join(f"{run.run_id} ({run.harness or run.source}, {run.model or 'no model'}: {why})"
                          for run, why in found[:3])  # fmt: skip
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise ValueError(f"{len(found)} run(s) of agents kept apart from every fit: {shown}{more}")


#: How much of a file its markers are looked for in: a format's and an agent's markers are in its first records.
_HEAD = 1 << 17
_STRING = r'"\s*:\s*"[^"]*'
#: (why, marker): a file is kept apart when one marker is in its head (the module docstring's list).
_MARKERS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    (_OPENHANDS, re.compile(rb'"agent_class"\s*:\s*"CodeActAgent"')),
    (_OPENHANDS, re.compile(rb'"history"\s*:\s*\[\s*\{[^\[\]]{0,400}?"source"\s*:\s*"(?:agent|user|environment)"')),
    (
        _OPENHANDS,
        re.compile(rb'"history"\s*:\s*\[\s*\[\s*\{[^\[\]]{0,400}?"(?:action|observation)"\s*:'),
    ),  # older pairs
    (_OPENHANDS, re.compile(rb'^\s*\[\s*\{\s*"id"\s*:\s*\d+\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"source"\s*:\s*"')),
    (_TAU_BENCH, re.compile(rb'"traj"\s*:\s*\[\s*\{\s*"role"')),
    (_AIDER, re.compile(rb"^# aider chat started at|^> Aider v\d", re.MULTILINE)),
    (_AIDER, re.compile(rb'"model_name_or_path"\s*:\s*"aider|"edit_format"\s*:\s*"')),
    (_GPT_OSS, re.compile(rb'"(?:llm|model_name|model)' + _STRING.encode() + _GPT_OSS_120B.encode(), re.IGNORECASE)),
    (_GPT_OSS, re.compile(rb'"implementation"' + _STRING.encode() + rb"langgraph", re.IGNORECASE)),
    (_OPUS, re.compile(rb'"(?:llm|model_name|model)' + _STRING.encode() + _OPUS_46.encode(), re.IGNORECASE)),
    (_OPUS, re.compile(rb'"implementation"' + _STRING.encode() + rb"\bbutton", re.IGNORECASE)),
)


def kept_apart_file(path: Path) -> str | None:
    """Why the records in ``path`` must stay out of every development fit (a marker of a kept-apart agent in its
    first bytes: the module docstring), or ``None``; ``None`` for a file that cannot be read or is binary."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return None
    if b"\x00" in head:
        return None
    return next((why for why, marker in _MARKERS if marker.search(head)), None)


def refuse_kept_apart_files(paths: Sequence[str | Path]) -> None:
    """``ValueError`` naming the first files under ``paths`` (files, or folders with their subfolders, hidden ones
    left out) that hold records of an agent the README keeps apart (:func:`kept_apart_file`)."""
    found = [(file, why) for file in _files(paths) if (why := kept_apart_file(file)) is not None]
    if found:
        shown = "; ".join(f"{file} ({why})" for file, why in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        raise ValueError(f"{len(found)} file(s) of agents kept apart from every fit: {shown}{more}")


def _files(paths: Sequence[str | Path]) -> Iterable[Path]:
    for path in map(Path, paths):
        if not path.is_dir():
            yield path
            continue
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            yield from (Path(folder) / name for name in sorted(names) if not name.startswith("."))
