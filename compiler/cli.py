"""`pipec`: check `.pipe` pipelines, explain rules, emit plans.

Exit status: 0 clean (warnings allowed unless --error-on-warning), 1 findings, 2 usage,
configuration, I/O or syntax errors. Nothing here touches a GPU or a driver.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import __version__
from . import codes
from .config import ConfigError, load_settings, override
from .driver import compile_file
from .emit import plan_dot, plan_json
from .render import RENDERERS
from .toolchain import ToolchainUnavailable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pipec",
        description="Check a .pipe pipeline's graph-safety rules and emit its CUDA-graph plan. "
                    "Needs no GPU.",
        epilog="docs/cli.md describes every option; docs/rules.md every rule.",
    )
    p.add_argument("files", nargs="*", type=Path, metavar="FILE",
                   help=".pipe files to check (a folder means every .pipe file below it)")
    p.add_argument("--check", action="store_true",
                   help="check only (the default when --emit is not given)")
    p.add_argument("--emit", choices=("plan", "dot"), help="write the plan as JSON, or the DAG as DOT")
    p.add_argument("-o", "--output", type=Path, help="write --emit output (or the report) to this file")
    p.add_argument("--format", choices=sorted(RENDERERS),
                   default=os.environ.get("PIPEC_OUTPUT_FORMAT", "text"), help="diagnostic format")
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
    p.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    p.add_argument("--version", action="version", version=f"pipec {__version__}")
    return p


def _explain(code: str) -> int:
    if code.upper() == "ALL":
        sys.stdout.write(codes.rules_markdown())
        return EXIT_CLEAN
    rule = codes.lookup(code)
    if rule is None:
        print(f"pipec: error: `{code}` is not a rule code or name (see docs/rules.md)", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(rule.explanation())
    return EXIT_CLEAN


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.explain:
        return _explain(args.explain)
    if not args.files:
        parser().error("give at least one FILE (or --explain CODE)")
    if args.emit and len(args.files) != 1:
        parser().error("--emit takes exactly one FILE")
    if args.lanes is not None and args.lanes < 1:
        parser().error("--lanes must be at least 1")
    try:
        return _run(args)
    except ConfigError as error:
        print(f"pipec: error: {error}", file=sys.stderr)
    except ToolchainUnavailable as error:
        print(f"pipec: error: cannot compile kernels: {error}", file=sys.stderr)
    except KeyboardInterrupt:
        print("pipec: interrupted", file=sys.stderr)
    return EXIT_USAGE


def _expand(paths: list[Path]) -> list[Path]:
    out = []
    for path in paths:
        out.extend(sorted(path.rglob("*.pipe")) if path.is_dir() else [path])
    return out


def _run(args) -> int:
    diagnostics, usage_error = [], False
    artifact = None
    for path in _expand(args.files):
        settings = override(
            load_settings(path), include_dirs=args.include_dirs, compiler=args.compiler,
            arch=args.arch, lanes=args.lanes, select=args.select, ignore=args.ignore,
            defines=tuple(args.defines) if args.defines else None,
        )
        try:
            result = compile_file(path, settings, until="plan" if args.emit else "check")
        except (OSError, UnicodeDecodeError) as error:
            print(f"pipec: error: cannot read {path}: {getattr(error, 'strerror', None) or error}",
                  file=sys.stderr)
            usage_error = True
            continue
        diagnostics += result.diagnostics
        usage_error |= any(d.code in ("PC101", "PC109") for d in result.diagnostics)
        if args.emit and result.plan is not None:
            artifact = plan_json(result.plan) if args.emit == "plan" else plan_dot(result.plan)
    color = args.format in ("text", "concise") and not args.no_color and sys.stdout.isatty() \
        and "NO_COLOR" not in os.environ and not args.emit
    report = RENDERERS[args.format](diagnostics, color=color)
    if args.emit:
        sys.stderr.write(report)
        if artifact is not None:
            _write(args.output, artifact)
    elif args.output:
        _write(args.output, report)
    else:
        sys.stdout.write(report)
    if usage_error:
        return EXIT_USAGE
    errors = any(d.severity is codes.Severity.ERROR for d in diagnostics)
    warnings = any(d.severity is codes.Severity.WARNING for d in diagnostics)
    if args.emit and artifact is None:
        return EXIT_FINDINGS
    if args.exit_zero or not (errors or (warnings and args.error_on_warning)):
        return EXIT_CLEAN
    return EXIT_FINDINGS


def _write(path: Path | None, text: str) -> None:
    if path is None:
        sys.stdout.write(text)
    else:
        path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
