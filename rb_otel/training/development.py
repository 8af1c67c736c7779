"""The steering signal's development runs, by kind of agent: what ``make held-out`` fits and judges the default
pilots on (docs/signal.md, "Leave one agent out: the headline").

The sources are the development data's (``signal/*`` under the data root, :mod:`rb_otel.datasets`), each read
natively (every outcome from the source's own records: a tau2 reward, a SWE-bench evaluation report); runs without
an outcome are left out and counted. Nothing the data's README keeps apart may be among them
(:mod:`rb_otel.training.kept_apart`): reading refuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rb_otel.datasets import data_root, source_folder
from rb_otel.steering.pilot.kinds import CODING, CUSTOMER_SERVICE
from rb_otel.training.dataset import Dataset, LabelledRun, grouped, read_dataset
from rb_otel.training.kept_apart import refuse_kept_apart

__all__ = ["DEVELOPMENT_SOURCES", "KindRuns", "read_kind"]

#: The development sources of each kind (folders or archives under the data root's ``signal/``).
DEVELOPMENT_SOURCES: dict[str, tuple[str, ...]] = {
    CUSTOMER_SERVICE: (
        "tau2_grok",
        "tau2_gpt41_sierra",
        "tau2_gpt41sft_sierra",
        "tau2_sonnet45_aide",
        "tau2_ironshell",
        "tau2_toolorchestra",
        "tau2_whissle",
    ),
    CODING: ("mini_swe_agent_gemini3pro", "msa_gpt5fam_cam", "msa2_deepseek_verified"),
}


@dataclass(slots=True)
class KindRuns:
    """The labelled runs of one kind, and per source how many runs had no outcome (left out) and what could not
    be read."""

    kind: str
    runs: list[LabelledRun]
    unlabelled: dict[str, int] = field(default_factory=dict)
    problems: dict[str, int] = field(default_factory=dict)


def read_kind(
    kind: str,
    root: Path | None = None,
    *,
    sources: tuple[str, ...] | None = None,
    progress: Callable[[str], None] | None = None,
) -> KindRuns:
    """Every labelled development run of ``kind`` (``sources`` narrows them), task groups joined across sources;
    ``ValueError`` when a run of an agent the README keeps apart is among them."""
    say = progress or (lambda _: None)
    base = data_root() if root is None else root
    out = KindRuns(kind, [])
    for name in sources or DEVELOPMENT_SOURCES[kind]:
        folder = source_folder(f"signal/{name}", base)
        data: Dataset = read_dataset([folder])
        out.runs += data.runs
        out.unlabelled[name] = data.unlabelled
        out.problems[name] = len(data.problems)
        say(f"{name}: {len(data.runs)} labelled runs, {data.unlabelled} without an outcome (left out)")
    refuse_kept_apart(out.runs)
    out.runs = grouped(out.runs)
    return out
