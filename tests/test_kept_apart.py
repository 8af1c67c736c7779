"""The kept-apart guard (``rb_otel.training.kept_apart``) on the real kept-apart agents' own markers: fixtures we
wrote ourselves in their structure (``tests/fixtures/formats/kept_apart``, README there: invented content, never
their records), recognised by file and by run, and refused by every research script that fits when put into a
development folder. The real records in the data root are recognised too (skipped with the reason where the data
root is absent; a failure under ``RB_OTEL_REQUIRE_REAL=1``)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest
from components import data_path, signal_source
from format_fixtures import FORMAT_FIXTURES

from rb_otel.steering.pilot.kinds import CODING, CUSTOMER_SERVICE
from rb_otel.training.dataset import read_dataset
from rb_otel.training.development import DEVELOPMENT_SOURCES, read_kind
from rb_otel.training.kept_apart import kept_apart, kept_apart_file, refuse_kept_apart, refuse_kept_apart_files

KEPT = FORMAT_FIXTURES / "kept_apart"
RESEARCH = Path(__file__).resolve().parent.parent / "research"
OPENHANDS, AIDER, TAU_BENCH = "OpenHands CodeAct", "aider's SWE-bench Lite", "tau-bench's historical GPT-4o"
GPT_OSS, OPUS = "gpt-oss-120b (a LangGraph agent)", "Claude Opus 4.6"

#: Each fixture (a file, or a folder whose files are one record set), the kind of agent it is, and why it is apart.
FIXTURES: list[tuple[str, str, str]] = [
    ("handwritten_openhands_output.json", CODING, OPENHANDS),
    ("handwritten_openhands_pairs.json", CODING, OPENHANDS),
    ("handwritten_openhands_events.json", CODING, OPENHANDS),
    ("handwritten_aider_chat.md", CODING, AIDER),
    ("handwritten_aider_predictions.jsonl", CODING, AIDER),
    ("handwritten_tau_bench_results.json", CUSTOMER_SERVICE, TAU_BENCH),
    ("handwritten_tau_bench_element.json", CUSTOMER_SERVICE, TAU_BENCH),
    ("handwritten_tau2_langgraph", CUSTOMER_SERVICE, GPT_OSS),
    ("handwritten_tau2_ironshell_llm_agent", CUSTOMER_SERVICE, OPUS),
    ("handwritten_tau2_button", CUSTOMER_SERVICE, OPUS),
]
IDS = [name for name, _, _ in FIXTURES]


@pytest.mark.parametrize(("name", "kind", "why"), FIXTURES, ids=IDS)
def test_each_kept_apart_agent_is_recognised_by_its_files_markers(name: str, kind: str, why: str) -> None:
    path = KEPT / name
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    reasons = {kept_apart_file(p) for p in files} - {None}
    assert len(reasons) == 1 and why in str(next(iter(reasons)))
    with pytest.raises(ValueError, match="kept apart from every fit"):
        refuse_kept_apart_files([path])


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("handwritten_openhands_output.json", OPENHANDS),  # harness "openhands CodeActAgent", Claude 3.5 Sonnet
        ("handwritten_openhands_events.json", OPENHANDS),  # harness "openhands", no model named
        ("handwritten_tau_bench_results.json", TAU_BENCH),
        ("handwritten_tau_bench_element.json", TAU_BENCH),  # detected as openai_messages: harness from its structure
        ("handwritten_tau2_langgraph", GPT_OSS),
        ("handwritten_tau2_ironshell_llm_agent", OPUS),
        ("handwritten_tau2_button", OPUS),  # the submission's agent, by its submission.json
    ],
)
def test_the_runs_read_from_them_are_recognised_by_their_agent(name: str, why: str) -> None:
    runs = read_dataset([KEPT / name]).runs
    assert runs and all(why in str(kept_apart(r)) for r in runs)
    with pytest.raises(ValueError, match="kept apart"):
        refuse_kept_apart(runs)


def test_the_format_fixtures_of_other_agents_are_not_kept_apart() -> None:
    apart_formats = {"kept_apart", "openhands", "tau_bench"}  # OpenHands and tau-bench are kept-apart formats
    files = [p for p in FORMAT_FIXTURES.rglob("*") if p.is_file() and p.relative_to(FORMAT_FIXTURES).parts[0]
             not in apart_formats]  # fmt: skip
    assert len(files) > 20
    assert [p for p in files if kept_apart_file(p)] == []
    refuse_kept_apart_files([FORMAT_FIXTURES / "claude_code", FORMAT_FIXTURES / "tau2_bench"])  # no error


# -- every reading path that fits refuses them -----------------------------------------------------------------


def _development_root(tmp_path: Path, name: str, kind: str) -> Path:
    """A data root whose first development source of ``kind`` is a folder holding the fixture ``name``."""
    folder = tmp_path / "signal" / DEVELOPMENT_SOURCES[kind][0]
    folder.mkdir(parents=True)
    source = KEPT / name
    if source.is_dir():
        shutil.copytree(source, folder / name)
    else:
        shutil.copy(source, folder / name)
    return tmp_path


def _script(name: str) -> ModuleType:
    """``research/<name>.py`` loaded as a module (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(f"research_{name}", RESEARCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("name", "kind", "why"), FIXTURES, ids=IDS)
def test_a_development_read_refuses_them(tmp_path: Path, name: str, kind: str, why: str) -> None:
    root = _development_root(tmp_path, name, kind)
    with pytest.raises(ValueError, match="kept apart from every fit"):
        read_kind(kind, root)


@pytest.mark.parametrize(("name", "kind", "why"), FIXTURES[::3], ids=IDS[::3])
def test_every_research_script_that_fits_refuses_them(tmp_path: Path, name: str, kind: str, why: str) -> None:
    root = _development_root(tmp_path, name, kind)
    folder = root / "signal" / DEVELOPMENT_SOURCES[kind][0]
    loaders = {
        "pilot1_weights": lambda m: m.read_runs(folder, "development"),
        "half_split": lambda m: m.read_source(folder),
        "family_ensembles": lambda m: m.kind_report(kind, root, 1),
        "leave_one_agent_out": lambda m: m.kind_report(kind, root, 0.02),
    }
    for script, load in loaders.items():
        with pytest.raises(ValueError, match="kept apart from every fit"):
            load(_script(script))


# -- the real records (integration) ---------------------------------------------------------------------------


def test_the_real_kept_apart_records_in_the_data_root_are_recognised() -> None:
    """The data root's OpenHands runs (an evaluation output record and a bare event list) and tau-bench GPT-4o
    elements are importer-test records of kept-apart agents: the guard knows them by their own markers."""
    files = sorted(data_path("openhands").glob("*.json")) + sorted(data_path("tau_bench").glob("*.json"))
    assert len(files) == 4
    assert [str(kept_apart_file(p)).split(" (")[0].split("'s")[0] for p in files] == [
        "OpenHands CodeAct", "OpenHands CodeAct", "tau-bench", "tau-bench"]  # fmt: skip
    runs = read_dataset(files).runs
    assert runs and all(kept_apart(r) for r in runs)


@pytest.mark.heavy
def test_no_development_source_is_refused() -> None:
    """The guard's markers never fire on the development data itself (every file of every source)."""
    names = dict.fromkeys(n for sources in DEVELOPMENT_SOURCES.values() for n in sources)
    folders = [signal_source(name) for name in names]
    refuse_kept_apart_files(folders)  # no error
