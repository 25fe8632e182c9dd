"""`pipec`: check `.pipe` pipelines, explain rules, emit plans.

Exit status: 0 clean (warnings allowed unless --error-on-warning), 1 findings, 2 usage,
configuration, I/O or syntax errors, or no kernel compiler. Every failure is one line on
stderr, never a traceback. Nothing here touches a GPU or a driver.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from ..cli.arguments import OneLineParser, ShowVersion, UsageError, add_color_options, check_toolchain, define
from ..cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, report
from ..cli.terminal import finish_stdout, say, use_color, write_stdout
from ..errors import Error
from ..dsl.source import MAX_READ_BYTES, real_path
from ..files import write_atomically
from . import codes
from .config import Settings, load_settings, override
from .diagnostics import Diagnostic
from .emit import plan_dot, plan_json_pieces
from .picture import plan_svg, read_profile
from .render import RENDERERS, statistics_json, statistics_text
from .stages import compile_file, without_cycle_collection

EXIT_CLEAN, EXIT_FINDINGS = EXIT_OK, EXIT_FAILED
STDIN = Path("-")


def _codes(value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if bad := codes.unmatched(list(items)):
        raise argparse.ArgumentTypeError(f"`{bad[0]}` matches no rule code or name")
    return items


def _selection(value: str) -> tuple[str, ...]:
    """`--select`: codes as for `--ignore`, and at least one: an empty one (`--select ''`, an
    unset `$CODES`) would turn every rule off and pass."""
    items = _codes(value)
    if not items:
        raise argparse.ArgumentTypeError(f"`{value}` names no rule; leave --select out to check every rule")
    return items


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="pipec",
        description="Check a .pipe pipeline's graph-safety rules and emit its CUDA-graph plan. "
                    "Needs no GPU.",
        epilog="Commands: `pipec build FILE -o DIR` (a bundle, docs/native.md), `pipec format FILE...` (the "
               "one layout of .pipe files), `pipec lsp` (a language server on stdio), `pipec init [DIR]` (a "
               "starter project), `pipec completion SHELL`. docs/cli.md describes every option and exit code; "
               "docs/rules.md every rule.",
    )
    p.add_argument("files", nargs="*", type=Path, metavar="FILE",
                   help=".pipe files to check (a folder means every .pipe file below it; - reads stdin)")
    p.add_argument("--check", action="store_true",
                   help="check only (the default when --emit is not given); without FILE, the .pipe files "
                   "below the current folder")
    p.add_argument("--emit", choices=("plan", "dot", "svg"),
                   help="write the plan as JSON, or the DAG as DOT or as an SVG picture")
    p.add_argument("--profile", type=Path, metavar="TRACE.json",
                   help="with --emit svg: mark node times and the critical path of `piperun --trace`'s trace")
    p.add_argument("-o", "--output", type=Path, help="write --emit output (or the report) to this file")
    p.add_argument("--output-format", "--format", dest="output_format", choices=sorted(RENDERERS),
                   help="diagnostic format (default: $PIPEC_OUTPUT_FORMAT, else text)")
    p.add_argument("--statistics", action="store_true",
                   help="count the findings per code instead of listing them")
    p.add_argument("--stdin-filename", type=Path, metavar="PATH",
                   help="the path that text read from stdin (FILE -) stands for: its name in reports, "
                        "its folder for imports and configuration")
    p.add_argument("--select", type=_selection, help="only these codes (comma-separated codes, prefixes, names)")
    p.add_argument("--ignore", type=_codes, help="never report these codes")
    p.add_argument("--include-dir", action="append", type=Path, dest="include_dirs", default=None,
                   help="also look for imported files here (repeatable)")
    p.add_argument("--compiler", choices=("nvrtc", "nvcc"), help="kernel compiler (default: nvrtc)")
    p.add_argument("--arch", help="target architecture, e.g. sm_90 (default from config, else sm_90)")
    p.add_argument("--lanes", type=int, help="bound the parallel width of the plan (overrides `option lanes`)")
    p.add_argument("-D", "--define", action="append", type=define, dest="defines", default=None,
                   metavar="NAME=EXPR", help="override a constant of the file (repeatable)")
    p.add_argument("--explain", metavar="CODE", help="print the documentation of a rule and exit")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    p.add_argument("--error-on-warning", action="store_true", help="exit 1 on warnings too")
    add_color_options(p)
    p.add_argument("--version", action=ShowVersion)
    return p


# `pipec COMMAND ...`: the commands beside checking, each a module with its own `main(argv)`.
# A file or folder of one of these names is still checked as `pipec ./format`.
SUBCOMMANDS = {
    "build": "build_cli", "format": "format_cli", "lsp": "lsp", "init": "init_project", "completion": "completion",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        try:
            if argv and argv[0] in SUBCOMMANDS:
                module = importlib.import_module(f"{__package__}.{SUBCOMMANDS[argv[0]]}")
                return module.main(argv[1:])
            return _main(parser().parse_args(argv))
        finally:
            finish_stdout()
    except Error as error:  # stdout failed (OutputError): the report is lost, the check did not pass
        return report("pipec", error, color=False)


def _main(args: argparse.Namespace) -> int:
    color_errors = use_color(args.color, sys.stderr)
    if args.explain:
        return _explain(args.explain, color_errors)
    if args.stdin_filename and not args.files:
        args.files = [STDIN]
    elif args.check and not args.files and not args.emit:
        args.files = [Path(".")]  # `pipec --check` checks the project it is run in, as `ruff check` does
    try:
        _check_usage(args)
        return _run(args)
    except Error as error:
        return report("pipec", error, color=color_errors)
    except KeyboardInterrupt:
        say("pipec", "error", "interrupted", color=color_errors)
        return EXIT_INTERRUPTED


def _explain(code: str, color: bool) -> int:
    if code.upper() == "ALL":
        write_stdout(codes.rules_markdown())
        return EXIT_CLEAN
    rule = codes.lookup(code)
    if rule is None:
        say("pipec", "error", f"`{code}` is not a rule code or name (see docs/rules.md)", color=color)
        return EXIT_USAGE
    write_stdout(rule.explanation())
    return EXIT_CLEAN


def _check_usage(args: argparse.Namespace) -> None:
    if not args.files:
        raise UsageError("give at least one FILE, - for stdin, or --explain CODE")
    if args.emit and len(args.files) != 1:
        raise UsageError("--emit takes exactly one FILE")
    if args.profile and args.emit != "svg":
        raise UsageError("--profile goes with --emit svg")
    if args.files.count(STDIN) > 1:
        raise UsageError("stdin (-) can be read only once")
    if args.lanes is not None and args.lanes < 1:
        raise UsageError("--lanes must be at least 1")
    if args.output_format is None:
        args.output_format = os.environ.get("PIPEC_OUTPUT_FORMAT") or "text"
        if args.output_format not in RENDERERS:
            raise UsageError(f"PIPEC_OUTPUT_FORMAT={args.output_format} is not an output format "
                             f"(choose from {', '.join(sorted(RENDERERS))})")
    if args.statistics and (args.emit or args.output_format not in ("text", "concise", "json")):
        raise UsageError("--statistics goes with --output-format text, concise or json, and not with --emit")


def _inputs(paths: list[Path], stdin_filename: Path | None) -> list[tuple[Path, bytes | None]]:
    """(path, data) pairs: data is None for a file to read, stdin's bytes for `-`. A folder stands
    for the `.pipe` files below it and must hold one, so a mistyped CI path cannot pass."""
    out: list[tuple[Path, bytes | None]] = []
    for path in paths:
        if path == STDIN:
            # no more than a file would be read of it: `pipec - < /dev/zero` ends
            out.append((stdin_filename or Path("stdin.pipe"), sys.stdin.buffer.read(MAX_READ_BYTES + 1)))
        elif path.is_dir():
            found = sorted(path.rglob("*.pipe"))
            if not found:
                raise UsageError(f"no .pipe file in {path}")
            out.extend((file, None) for file in found)
        else:
            out.append((path, None))
    return out


def _run(args: argparse.Namespace) -> int:
    diagnostics, usage_error, checked = [], False, 0
    artifact = None
    inputs = _inputs(args.files, args.stdin_filename)
    _refuse_overwriting(args.output, [path for path, text in inputs if text is None])
    for path, text in inputs:
        settings = override(
            load_settings(path), include_dirs=args.include_dirs, compiler=args.compiler,
            arch=args.arch, lanes=args.lanes, select=args.select, ignore=args.ignore,
            defines=tuple(args.defines) if args.defines else None,
        )
        check_toolchain(settings.compile)
        # The compiler's objects are freed, by their reference counts, on leaving
        # `_compile_one`; re-enabled while they lived, the cycle collector would scan their
        # millions once more, finding nothing (a second on 40,000 nodes).
        with without_cycle_collection():
            try:
                found, plan_text = _compile_one(args, path, text, settings)
            except OSError as error:  # the text itself decodes into a PC101
                say("pipec", "error", f"cannot read {path}: {getattr(error, 'strerror', None) or error}",
                    color=use_color(args.color, sys.stderr))
                usage_error = True
                continue
        checked += 1
        diagnostics += found
        usage_error |= any(d.code in ("PC101", "PC112") for d in found)
        artifact = plan_text
    if args.emit:
        sys.stderr.write(RENDERERS[args.output_format](diagnostics, color=use_color(args.color, sys.stderr)))
        if artifact is not None:
            with without_cycle_collection():  # the plan's objects, as the compiler's above
                _write(args.output, artifact)
    else:
        _write(args.output, _report(args, diagnostics, checked))
    if usage_error:
        return EXIT_USAGE
    errors = any(d.severity is codes.Severity.ERROR for d in diagnostics)
    warnings = any(d.severity is codes.Severity.WARNING for d in diagnostics)
    if args.emit and artifact is None:
        return EXIT_FINDINGS
    if args.exit_zero or not (errors or (warnings and args.error_on_warning)):
        return EXIT_CLEAN
    return EXIT_FINDINGS


def _compile_one(args: argparse.Namespace, path: Path, text: bytes | None,
                 settings: Settings) -> tuple[list[Diagnostic], Iterable[str] | None]:
    """One file's diagnostics and, under --emit, its plan or DOT text when it has a plan: the
    plan's JSON in pieces, made while they are written (the text of a large plan is several
    times the plan's own memory)."""
    result = compile_file(path, settings, until="plan" if args.emit else "check", text=text)
    _refuse_overwriting(args.output, [source.path for source in result.sources])
    if not args.emit or result.plan is None:
        return result.diagnostics, None
    if args.emit == "svg":
        profile = read_profile(args.profile) if args.profile else None
        return result.diagnostics, [plan_svg(result.plan, profile)]
    return result.diagnostics, plan_json_pieces(result.plan) if args.emit == "plan" else [plan_dot(result.plan)]


def _report(args: argparse.Namespace, diagnostics: list, checked: int) -> str:
    if args.statistics:
        if args.output_format == "json":
            return statistics_json(diagnostics)
        return statistics_text(diagnostics, checked)
    color = use_color(args.color, sys.stdout) if args.output is None else args.color == "always"
    return RENDERERS[args.output_format](diagnostics, color=color, checked=checked)


def _refuse_overwriting(output: Path | None, sources: list[Path]) -> None:
    """`-o` naming a file the check reads (a FILE, an import, a kernel source) would replace
    the source with the report or the plan."""
    if output is None:
        return
    target = real_path(output)
    if any(real_path(source) == target for source in sources):
        raise UsageError(f"-o {output} names an input of the check; the output would replace it")


def _write(path: Path | None, text: str | Iterable[str]) -> None:
    if path is None:
        for piece in (text,) if isinstance(text, str) else text:
            write_stdout(piece)
        return
    try:
        write_atomically(path, text)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from error


if __name__ == "__main__":
    sys.exit(main())
