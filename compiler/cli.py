"""`pipec`: check `.pipe` pipelines, explain rules, emit plans.

Exit status: 0 clean (warnings allowed unless --error-on-warning), 1 findings, 2 usage,
configuration, I/O or syntax errors, or no kernel compiler. Every failure is one line on
stderr, never a traceback. Nothing here touches a GPU or a driver.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from pathlib import Path
from typing import NoReturn

from .._version import __version__
from ..errors import Error
from . import codes
from .config import CompileOptions, ConfigError, Settings, load_settings, override
from .diagnostics import Diagnostic
from .driver import compile_file, without_cycle_collection
from .emit import plan_dot, plan_json
from .picture import ProfileError, plan_svg, read_profile
from .render import RENDERERS, statistics_json, statistics_text
from .render.terminal import COLOR_CHOICES, finish_stdout, say, use_color, write_stdout
from .toolchain import ToolchainUnavailable, get_toolchain

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
STDIN = Path("-")


class UsageError(Error):
    """A mistake on the command line or in what it names; exit 2 with this one line."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (the usage itself is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        say(self.prog, "error", f"{message} (see `{self.prog} --help`)", color=use_color("auto", sys.stderr))
        self.exit(EXIT_USAGE)


class ShowVersion(argparse.Action):
    """`--version`: the tool's version and the NVRTC it would compile with."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and the NVRTC in use")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        write_stdout(f"{parser.prog} {__version__} ({describe_nvrtc()})\n")
        finish_stdout()
        parser.exit(EXIT_CLEAN)


def describe_nvrtc() -> str:
    nvrtc = get_toolchain("nvrtc")
    try:
        return f"NVRTC {nvrtc.version.removeprefix('nvrtc-')} from {nvrtc.library_path}"
    except ToolchainUnavailable:
        return "NVRTC not found"


def check_toolchain(options: CompileOptions) -> None:
    """Load the kernel compiler before any file is read, so a missing one is one error, and an
    architecture NVRTC cannot target is a usage error that lists the ones it can."""
    toolchain = get_toolchain(options.compiler)
    version = toolchain.version  # loads NVRTC or runs `nvcc --version`: a missing one fails here
    if options.compiler != "nvrtc":
        return
    supported = toolchain.supported_archs
    match = re.fullmatch(r"(sm_\d+)[af]?", options.arch)
    if match is None or match.group(1) not in supported:
        raise UsageError(f"architecture `{options.arch}` is not supported by NVRTC "
                         f"{version.removeprefix('nvrtc-')}; it supports {', '.join(supported)}")


def _codes(value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    for item in items:
        if item.upper() != "ALL" and not codes.select([item]):
            raise argparse.ArgumentTypeError(f"`{item}` matches no rule code or name")
    return items


def define(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier() or not value.strip():
        raise argparse.ArgumentTypeError(f"`{text}` is not NAME=EXPR")
    return name.strip(), value.strip()


def add_color_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--color", choices=COLOR_CHOICES, default="auto",
                   help="colour: auto (a terminal, unless NO_COLOR; or FORCE_COLOR), always or never")
    p.add_argument("--no-color", action="store_const", const="never", dest="color",
                   help="the same as --color never")


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="pipec",
        description="Check a .pipe pipeline's graph-safety rules and emit its CUDA-graph plan. "
                    "Needs no GPU.",
        epilog="Commands: `pipec format FILE...` (the one layout of .pipe files), `pipec lsp` (a "
               "language server on stdio), `pipec init [DIR]` (a starter project), `pipec completion SHELL`. docs/cli.md "
               "describes every option and exit code; docs/rules.md every rule.",
    )
    p.add_argument("files", nargs="*", type=Path, metavar="FILE",
                   help=".pipe files to check (a folder means every .pipe file below it; - reads stdin)")
    p.add_argument("--check", action="store_true",
                   help="check only (the default when --emit is not given)")
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
    p.add_argument("--select", type=_codes, help="only these codes (comma-separated codes, prefixes, names)")
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
SUBCOMMANDS = {"format": "format_cli", "lsp": "lsp", "init": "init_project", "completion": "completion"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0] in SUBCOMMANDS:
            module = importlib.import_module(f"{__package__}.{SUBCOMMANDS[argv[0]]}")
            return module.main(argv[1:])
        return _main(parser().parse_args(argv))
    finally:
        finish_stdout()


def _main(args: argparse.Namespace) -> int:
    color_errors = use_color(args.color, sys.stderr)
    if args.explain:
        return _explain(args.explain, color_errors)
    if args.stdin_filename and not args.files:
        args.files = [STDIN]
    try:
        _check_usage(args)
        return _run(args)
    except (UsageError, ConfigError) as error:
        say("pipec", "error", str(error), color=color_errors)
    except ToolchainUnavailable as error:
        say("pipec", "error", f"cannot compile kernels: {error}", color=color_errors)
    except KeyboardInterrupt:
        say("pipec", "error", "interrupted", color=color_errors)
    return EXIT_USAGE


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


def _inputs(paths: list[Path], stdin_filename: Path | None) -> list[tuple[Path, str | None]]:
    """(path, text) pairs: text is None for a file to read, stdin's text for `-`. A folder stands
    for the `.pipe` files below it and must hold one, so a mistyped CI path cannot pass."""
    out: list[tuple[Path, str | None]] = []
    for path in paths:
        if path == STDIN:
            out.append((stdin_filename or Path("stdin.pipe"), sys.stdin.read()))
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
    for path, text in _inputs(args.files, args.stdin_filename):
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


def _compile_one(args: argparse.Namespace, path: Path, text: str | None,
                 settings: Settings) -> tuple[list[Diagnostic], str | None]:
    """One file's diagnostics and, under --emit, its plan or DOT text when it has a plan."""
    result = compile_file(path, settings, until="plan" if args.emit else "check", text=text)
    if not args.emit or result.plan is None:
        return result.diagnostics, None
    if args.emit == "svg":
        try:
            profile = read_profile(args.profile) if args.profile else None
        except ProfileError as error:
            raise UsageError(str(error)) from None
        return result.diagnostics, plan_svg(result.plan, profile)
    return result.diagnostics, plan_json(result.plan) if args.emit == "plan" else plan_dot(result.plan)


def _report(args: argparse.Namespace, diagnostics: list, checked: int) -> str:
    if args.statistics:
        if args.output_format == "json":
            return statistics_json(diagnostics)
        return statistics_text(diagnostics, checked)
    color = use_color(args.color, sys.stdout) if args.output is None else args.color == "always"
    return RENDERERS[args.output_format](diagnostics, color=color, checked=checked)


def _write(path: Path | None, text: str) -> None:
    if path is None:
        write_stdout(text)
        return
    try:
        path.write_text(text)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from error


if __name__ == "__main__":
    sys.exit(main())
