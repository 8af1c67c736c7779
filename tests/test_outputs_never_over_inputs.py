"""No ``rb-otel`` command writes over what it reads: every subcommand, every argument that writes, against every
argument that reads, each spelled so that the output is the input (the same path, ``./``, absolute, ``..``, a
symbolic link, a hard link, a file read from an input folder, a folder reached through a link, a hard link to a
file in an input folder).

The table is drawn from the parser itself (``rb_otel.cli.inputs``: each command declares the role of every
argument that takes text), so a command or a writing flag added later is in it, and an argument that takes text
and declares no role fails here. Each case runs the real ``main``: exit 2, one line on standard error naming the
output and the input, the input byte for byte as it was, and nothing else written.
"""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from rb_otel.cli import main
from rb_otel.cli.inputs import INPUT, OUTPUT, OUTPUT_FOLDER, needs_role, roles
from rb_otel.cli.main import build_parser
from rb_otel.cli.output import check_outputs


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


COMMANDS = _commands()
#: Every way the tests spell "the same file" (see _case).
SPELLINGS = ("same", "dot", "absolute", "dotdot", "symlink", "hardlink", "folder", "linked-folder", "folder-hardlink")


def _action(parser: argparse.ArgumentParser, dest: str) -> argparse.Action:
    return next(a for a in parser._actions if a.dest == dest)


def _filler(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """A value a required argument can take (nothing is read: the check comes first)."""
    if roles(parser).get(action.dest) == INPUT:
        return "filler.jsonl"
    if action.choices is not None:
        return str(next(iter(action.choices)))
    if action.type in (int, float):
        return "1"
    return "x"


def _argv(name: str, values: dict[str, str]) -> list[str]:
    """``rb-otel NAME`` with ``values`` (dest -> text) and a filler for every other required argument."""
    parser = COMMANDS[name]
    argv = [name]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        positional = not action.option_strings
        if action.dest in values:
            text = values[action.dest]
        elif action.required or (positional and action.nargs not in ("?", "*")):
            text = _filler(parser, action)
        else:
            continue
        argv += [text] if positional else [action.option_strings[0], text]
    return argv


@dataclass(frozen=True)
class Case:
    command: str
    output: str  # the dest of the argument that writes
    input: str  # the dest of the argument that reads
    spelling: str

    def __str__(self) -> str:
        return f"{self.command}:{self.output}<-{self.input}:{self.spelling}"


def _cases() -> list[Case]:
    cases = []
    for name, parser in COMMANDS.items():
        declared = roles(parser)
        reads = [dest for dest, role in declared.items() if role == INPUT]
        for dest, role in declared.items():
            if role in (OUTPUT, OUTPUT_FOLDER):
                cases += [Case(name, dest, read, spelling) for read in reads for spelling in SPELLINGS]
    return cases


CASES = _cases()


def test_every_argument_that_takes_text_declares_what_it_is() -> None:
    """A flag that could name a file declares whether it is read, written, or no file at all; so a writing flag
    added without its declaration fails here, and once declared it is in the table below."""
    undeclared = [
        f"rb-otel {name} {(action.option_strings or [action.dest])[0]}"
        for name, parser in COMMANDS.items()
        for action in parser._actions
        if needs_role(action) and action.dest not in roles(parser)
    ]
    assert undeclared == [], (
        "declare these with rb_otel.cli.inputs.declare(parser, dest=INPUT | OUTPUT | OUTPUT_FOLDER | VALUE)"
    )


def test_the_table_covers_every_command_that_both_reads_and_writes() -> None:
    covered = {case.command for case in CASES}
    for name, parser in COMMANDS.items():
        declared = set(roles(parser).values())
        if INPUT in declared and declared & {OUTPUT, OUTPUT_FOLDER}:
            assert name in covered
        else:
            assert name not in covered  # the demo writes but reads nothing given to it
    assert {"report", "ab-report", "evaluate", "train", "replay", "baselines"} <= covered


def _folder_file(case: Case) -> Path:
    """The file an output folder argument writes first, as the command declares it (``outputs``)."""
    args = build_parser().parse_args(_argv(case.command, {case.output: "outdir"}))
    return Path(next(iter(args.outputs(args))))


def _spell(target: Path, spelling: str, tmp: Path) -> str:
    """Another name of ``target`` (relative to ``tmp``), as ``spelling`` says; for ``folder`` and
    ``linked-folder``, a name of the folder that holds it."""
    plain = str(target)
    if spelling == "same":
        return plain
    if spelling == "dot":
        return f"./{plain}"
    if spelling == "absolute":
        return str(tmp / target)
    if spelling == "dotdot":
        (tmp / "sub").mkdir(exist_ok=True)
        return f"sub/../{plain}"
    if spelling == "symlink":
        (tmp / "link.jsonl").symlink_to(tmp / target)
        return "link.jsonl"
    if spelling in ("hardlink", "folder-hardlink"):
        os.link(tmp / target, tmp / "hard.jsonl")
        return "hard.jsonl"
    if spelling == "folder":
        return str(target.parent)
    assert spelling == "linked-folder"
    (tmp / "linked").symlink_to(tmp / target.parent, target_is_directory=True)
    return "linked"


def _files(tmp: Path) -> dict[str, bytes]:
    return {str(p.relative_to(tmp)): p.read_bytes() for p in tmp.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_an_output_that_is_an_input_is_refused_before_any_work(
    case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    folder_output = roles(COMMANDS[case.command])[case.output] == OUTPUT_FOLDER
    target = _folder_file(case) if folder_output else Path("data/in.jsonl")
    (tmp_path / target).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / target).write_bytes(b'{"resourceSpans": []}\n' + str(case).encode() + b"\n")
    (tmp_path / "filler.jsonl").write_bytes(b"{}\n")
    spelled = _spell(target, case.spelling, tmp_path)
    if folder_output:  # the command writes the file in the folder it is given: the input names that file
        given, written, output = spelled, "outdir", str(target)
    elif case.spelling in ("folder", "linked-folder"):  # the input is the folder, the output a file it holds
        given, written, output = spelled, str(target), str(target)
    elif case.spelling == "folder-hardlink":  # the input is the folder, the output a hard link to a file in it
        given, written, output = str(target.parent), spelled, spelled
    else:  # the input as it is, the output another name of it
        given, written, output = str(target), spelled, str(Path(spelled))
    before = _files(tmp_path)
    code = main(_argv(case.command, {case.input: given, case.output: written}))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    assert f"cannot write {output}:" in err[0] and given in err[0].split(":", 2)[-1], err[0]
    assert _files(tmp_path) == before  # the input as it was, and nothing else written


def test_a_folder_file_the_command_does_not_read_may_be_written(tmp_path: Path) -> None:
    """``rb-otel report out --out out/report.html``: the page is no trace file, so the folder's read leaves it
    out, and writing it over the last one is what the docs show."""
    (tmp_path / "report.html").write_text("<html></html>")
    (tmp_path / "traces.jsonl").write_text("{}\n")
    args = build_parser().parse_args(["report", str(tmp_path), "--out", str(tmp_path / "report.html")])
    check_outputs(args)  # no error
    args = build_parser().parse_args(["report", str(tmp_path), "--out", str(tmp_path / "traces.jsonl")])
    with pytest.raises(OSError, match="reads it from the input folder"):
        check_outputs(args)


def test_a_default_output_this_mode_does_not_write_is_no_clash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``report report.html --summary`` writes no page, so ``--out``'s default (report.html) is not an output;
    the same default is one in the page's mode, and refused there."""
    monkeypatch.chdir(tmp_path)
    Path("report.html").write_text("{}\n")
    check_outputs(build_parser().parse_args(["report", "report.html", "--summary"]))  # no error
    with pytest.raises(OSError, match=r"same file as the input report\.html"):
        check_outputs(build_parser().parse_args(["report", "report.html"]))


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        (["baselines", "{url}", "--json", "{file}"], "sqlite://{file}"),
        (["report", "{url}", "--summary", "--json", "{file}"], "chdb://{folder}"),
    ],
    ids=["sqlite", "chdb"],
)
def test_an_input_named_by_its_url_is_an_input_too(
    argv: list[str], url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "store" / "in.db"
    file.parent.mkdir()
    file.write_bytes(b"not touched")
    names = {"file": str(file), "folder": str(file.parent)}
    names["url"] = url.format(**names)
    assert main([part.format(**names) for part in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    named = re.compile(f"input (folder )?{re.escape(names['url'])};")  # the input as it was given
    assert len(err) == 1 and f"cannot write {file}:" in err[0] and named.search(err[0]), err
    assert file.read_bytes() == b"not touched"
