"""``python -m rb_otel.datasets``: ``fetch`` (what ``make data`` runs), ``manifest`` (regenerate the manifest
from the shared data) and ``where`` (print the data root the tests would read)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rb_otel.datasets.fetch import DEFAULT_MIRROR, Unreachable, fetch
from rb_otel.datasets.manifest import MANIFEST, build_manifest, load_manifest, manifest_text
from rb_otel.datasets.root import DataNotFound, data_root, repository_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rb_otel.datasets", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    get = commands.add_parser("fetch", help="download and check every source into --into (what `make data` runs)")
    default_into = (repository_root() or Path.cwd()) / "data"
    get.add_argument("--into", type=Path, default=default_into, help=f"default: {default_into}")
    get.add_argument("--source", action="append", default=[], help="only this source (repeatable)")
    get.add_argument("--mirror", default=DEFAULT_MIRROR, help="where {repository}/raw/{commit}/{path} is served")
    get.add_argument("--jobs", type=int, default=8, help="files downloaded at once")
    get.add_argument("--manifest", type=Path, default=MANIFEST)
    describe = commands.add_parser("manifest", help="write the manifest from a data root (maintainers)")
    describe.add_argument("--from", dest="root", type=Path, default=None, help="default: the data root")
    describe.add_argument("--out", type=Path, default=MANIFEST)
    commands.add_parser("where", help="print the data root tests and research scripts would read")
    args = parser.parse_args(argv)
    try:
        if args.command == "where":
            print(data_root())
            return 0
        if args.command == "manifest":
            return _manifest(args.root or data_root(), args.out)
    except DataNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _fetch(args)


def _fetch(args: argparse.Namespace) -> int:
    try:
        sources = load_manifest(args.manifest)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    unknown = sorted(set(args.source) - {s.name for s in sources})
    if unknown:
        print(f"error: unknown source {', '.join(unknown)}; choose from {', '.join(s.name for s in sources)}",
              file=sys.stderr)  # fmt: skip
        return 2
    chosen = [s for s in sources if not args.source or s.name in args.source]
    try:
        results = fetch(chosen, args.into, mirror=args.mirror, jobs=args.jobs,
                        progress=lambda line: print(line, file=sys.stderr, flush=True))  # fmt: skip
    except Unreachable as exc:  # offline, or a wrong --mirror: one line, not one per file
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"interrupted: what was downloaded is kept in {args.into / '.partial'}; run again to continue",
              file=sys.stderr)  # fmt: skip
        return 130
    failed = [r for r in results if not r.ok]
    if failed:
        print(f"{len(failed)} of {len(results)} sources failed (each line above says why)", file=sys.stderr)
        return 1
    print(f"{len(results)} sources in {args.into}", file=sys.stderr)
    return 0


def _manifest(root: Path, out: Path) -> int:
    sources = build_manifest(root)
    scratch = out.with_name(out.name + ".part")
    scratch.write_text(manifest_text(sources), encoding="utf-8")
    scratch.replace(out)
    files = sum(len(s.files) for s in sources)
    print(f"{out}: {len(sources)} sources, {files} files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
