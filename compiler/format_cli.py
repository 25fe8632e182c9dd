"""`pipec format FILE...`: write `.pipe` files in the one layout of dsl/format.

Exit status, as `ruff format`'s: 0 done (with --check or --diff: every file already formatted),
1 with --check or --diff when a file would change, 2 a usage error, a file that cannot be read
or written, or one that does not parse (reported as `pipec --check` reports it, PC101).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from ..cli.arguments import OneLineParser, add_color_options
from ..cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ..cli.terminal import say, use_color, write_stdout
from ..dsl.errors import PipeSyntaxError
from ..dsl.format import FormatError, format_source
from ..dsl.source import SourceFile
from ..files import write_atomically
from ..wording import counted
from .cli import STDIN
from .diagnostics import Diagnostic
from .render import RENDERERS


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="pipec format", description="Format .pipe files in place (docs/cli.md).")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE",
                   help=".pipe files (a folder means every .pipe file below it; - reads stdin, writes stdout)")
    p.add_argument("--check", action="store_true",
                   help="change nothing; exit 1 and name the files that would change")
    p.add_argument("--diff", action="store_true",
                   help="change nothing; print what would change as a unified diff, exit 1 if anything would")
    p.add_argument("--stdin-filename", type=Path, metavar="PATH", help="the name of stdin's text in messages")
    add_color_options(p)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    color = use_color(args.color, sys.stderr)
    changed, unchanged, failed = [], 0, False
    for path in _files(args.files, color):
        if path is None:
            failed = True
            continue
        outcome = _format_one(path, args, color)
        if outcome is None:
            failed = True
        elif outcome:
            changed.append(path)
        else:
            unchanged += 1
    if STDIN not in args.files:
        _summary(args, changed, unchanged)
    if failed:
        return EXIT_USAGE
    return EXIT_FAILED if changed and (args.check or args.diff) else EXIT_OK


def _files(paths: list[Path], color: bool):
    """The files to format; None for a named path that holds none."""
    for path in paths:
        if path != STDIN and path.is_dir():
            found = sorted(path.rglob("*.pipe"))
            if not found:
                say("pipec format", "error", f"no .pipe file in {path}", color=color)
                yield None
            yield from found
        else:
            yield path


def _format_one(path: Path, args: argparse.Namespace, color: bool) -> bool | None:
    """Whether the file changes (or would); None when it cannot be read, parsed or written."""
    try:
        if path == STDIN:
            source = SourceFile((args.stdin_filename or Path("stdin.pipe")).resolve(), sys.stdin.read())
        else:
            source = SourceFile.read(path)
    except OSError as error:
        say("pipec format", "error", f"cannot read {path}: {error.strerror or error}", color=color)
        return None
    try:
        formatted = format_source(source)
    except PipeSyntaxError as error:
        diagnostic = Diagnostic(error.code, error.message, error.span, error.hint or "")
        sys.stderr.write(RENDERERS["concise"]([diagnostic], color=color))
        return None
    except FormatError as error:
        say("pipec format", "error", str(error), color=color)
        return None
    change = formatted != source.text
    if path == STDIN and not (args.check or args.diff):
        write_stdout(formatted)
    elif args.diff and change:
        shown = source.display_path()
        write_stdout("".join(difflib.unified_diff(source.text.splitlines(True), formatted.splitlines(True),
                                                  f"{shown}\t(original)", f"{shown}\t(formatted)")))
    elif args.check and change:
        write_stdout(f"Would reformat: {source.display_path()}\n")
    elif change and not (args.check or args.diff):
        try:
            write_atomically(path, formatted)
        except OSError as error:
            say("pipec format", "error", f"cannot write {path}: {error.strerror or error}", color=color)
            return None
    return change


def _summary(args: argparse.Namespace, changed: list[Path], unchanged: int) -> None:
    verb = "would be reformatted" if args.check or args.diff else "reformatted"
    parts = [f"{counted(len(changed), 'file')} {verb}"] if changed else []
    if unchanged:
        parts.append(f"{counted(unchanged, 'file')} {'already formatted' if args.check or args.diff else 'left unchanged'}")
    if parts:
        (sys.stderr if args.diff else sys.stdout).write(", ".join(parts) + "\n")

