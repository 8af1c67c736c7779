"""Where each development source comes from: its public repository, the pinned commit, and which path there each
of its files is (``../shared/data/README.md`` and ``../shared/data/signal/README.md`` list the same origins).

A source's folder holds files at their repository paths, except where a rule below says otherwise: the two oldest
signal sources hold their files flat, and three small records are a line or an element of a larger origin file.
Files the shared data's curator added (``labels.csv``), edited (a submission's ``submission.json`` with its contact
details removed) or that SQLite left beside a store (``-wal``/``-shm``) have no origin and are not fetched.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["ORIGINS", "Extract", "Origin"]


@dataclass(frozen=True, slots=True)
class Extract:
    """A record that is part of an origin file: line ``line`` (1-based, with its newline) of a JSON-lines file, or
    element ``element`` of a JSON list written again with ``json.dumps(element, indent=1)``."""

    line: int | None = None
    element: int | None = None

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in (("line", self.line), ("element", self.element)) if v is not None}


@dataclass(frozen=True, slots=True)
class Origin:
    """A source: ``name`` (its folder under the data root), ``repository`` (``owner/name`` on GitHub) at
    ``commit``, its licence, and ``origin_of``, which gives a file's path in the repository (and an
    :class:`Extract` when the file is part of one) from its path in the folder, or ``None`` for a file that has no
    origin."""

    name: str
    repository: str
    commit: str
    licence: str
    licence_files: tuple[str, ...]
    origin_of: Callable[[str], tuple[str, Extract | None] | None] = field(repr=False)


def _as_is(path: str) -> tuple[str, Extract | None] | None:
    if path == "labels.csv" or path.endswith("/submission.json"):
        return None
    return path, None


def _under(prefix: str) -> Callable[[str], tuple[str, Extract | None] | None]:
    def origin_of(path: str) -> tuple[str, Extract | None] | None:
        return (prefix + path, None) if path != "labels.csv" else None

    return origin_of


def _gemini(path: str) -> tuple[str, Extract | None] | None:
    run_folder = "swebench_results/20251118_gemini-3-pro-74pct/"
    if path == "results_summary.json":
        return run_folder + path, None
    instance = path.removesuffix(".traj.json")
    return (f"{run_folder}trajs/{instance}/{path}", None) if instance != path else None


def _table(table: dict[str, tuple[str, Extract | None]]) -> Callable[[str], tuple[str, Extract | None] | None]:
    return table.get


_MINI_SWE_AGENT_LICENCE = ("LICENSE.md",)
_TAU2_LICENCE = ("LICENSE",)

ORIGINS: tuple[Origin, ...] = (
    Origin(
        "io_harness",
        "initorigin/io-harness",
        "decf4b6",
        'Apache-2.0 (NOTICE: "IO Harness, Copyright 2026 Aakash Pawar (InitOrigin)")',
        ("LICENSE",),
        _table(
            {
                "store-0.22.0_populated.sqlite3": ("tests/fixtures/store-0.22.0/populated.sqlite3", None),
                "store-0.22.0_populated.json": ("tests/fixtures/store-0.22.0/populated.json", None),
                "store-0.29.0_aggregates.sqlite3": ("tests/fixtures/store-0.29.0/aggregates.sqlite3", None),
                "store-0.29.0_aggregates.json": ("tests/fixtures/store-0.29.0/aggregates.json", None),
            }
        ),
    ),
    Origin(
        "openhands",
        "OpenHands/OpenHands",
        "d6fab19",
        "MIT",
        ("LICENSE",),
        _table(
            {
                "ponylang__ponyc-4595.json": (
                    "evaluation/benchmarks/multi_swe_bench/examples/output.jsonl",
                    Extract(line=1),
                ),
                "tests_runtime_trajs_basic_interactions.json": ("tests/runtime/trajs/basic_interactions.json", None),
            }
        ),
    ),
    Origin(
        "swe_agent",
        "SWE-agent/SWE-agent",
        "3ea751c",
        "MIT",
        ("LICENSE",),
        _table(
            {
                "pydicom__pydicom-1458.traj": (
                    "tests/test_data/trajectories/gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95"
                    "__c-3.00__install-1/pydicom__pydicom-1458.traj",
                    None,
                ),
                "marshmallow-code__marshmallow-1867.function_calling_replace_from_source.traj": (
                    "trajectories/demonstrations/replay__marshmallow-code__marshmallow-1867__function_calling_"
                    "replace_from_source/marshmallow-code__marshmallow-1867.traj",
                    None,
                ),
            }
        ),
    ),
    Origin(
        "tau_bench",
        "sierra-research/tau-bench",
        "59a200c",
        "MIT",
        ("LICENSE",),
        _table(
            {
                "gpt-4o-airline_task13_trial0_reward0.json": (
                    "historical_trajectories/gpt-4o-airline.json",
                    Extract(element=13),
                ),
                "gpt-4o-airline_task13_trial2_reward1.json": (
                    "historical_trajectories/gpt-4o-airline.json",
                    Extract(element=113),
                ),
            }
        ),
    ),
    Origin(
        "signal/tau2_grok",
        "blakeelias/tau2-bench",
        "85cededeb56ce7340dfa16291d5aa4ee5f0e23f0",
        "MIT",
        _TAU2_LICENCE,
        _under("data/simulations/"),
    ),
    Origin(
        "signal/tau2_gpt41_sierra",
        "sierra-research/tau2-bench",
        "29510b1d0d47dbe502ada30079c642bd0d172ed9",
        "MIT",
        _TAU2_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/tau2_gpt41sft_sierra",
        "sierra-research/tau2-bench",
        "29510b1d0d47dbe502ada30079c642bd0d172ed9",
        "MIT",
        _TAU2_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/tau2_sonnet45_aide",
        "sierra-research/tau2-bench",
        "bfe508e486bce8484fd02e67dfd4bdead3ef5d74",
        "MIT",
        _TAU2_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/tau2_ironshell",
        "sierra-research/tau2-bench",
        "17044a0b19619b426f63a8dbbd008f7d4c0b32ba",
        "MIT",
        _TAU2_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/tau2_toolorchestra",
        "sierra-research/tau2-bench",
        "1b67be7813943253b9f3c12620507d961087ec2c",
        "MIT",
        _TAU2_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/tau2_whissle",
        "sierra-research/tau2-bench",
        "bbcb86ff2e6414631352a7b808b886691f419e3e",
        "MIT",
        _TAU2_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/mini_swe_agent_gemini3pro",
        "gruckion/mini-swe-agent",
        "d12a71affd95403b036b2bdbd827349b77bfffb9",
        "MIT",
        _MINI_SWE_AGENT_LICENCE,
        _gemini,
    ),
    Origin(
        "signal/msa_gpt5fam_cam",
        "wudi-alex/mini-swe-agent-CaM",
        "fae95e425f7ab1e3cfbb3eea3f784515fdcc208f",
        "MIT",
        _MINI_SWE_AGENT_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/msa2_deepseek_verified",
        "arifmohamedkhan/mini-swe-agent",
        "09c41a7bfd5242274e65ecfe011ba01aea02f5ed",
        "MIT",
        _MINI_SWE_AGENT_LICENCE,
        _as_is,
    ),
    Origin(
        "signal/terminal_bench_claude_code",
        "NJU-LINK/CodeTracer",
        "2d302191dd07e7c0c2da6f7a5e9451c7cbb62d34",
        'MIT (the repository\'s LICENSE.md: "Copyright (c) 2025 Kilian A. Lieret and Carlos E. Jimenez")',
        ("LICENSE.md",),
        _as_is,
    ),
)
