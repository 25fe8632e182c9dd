"""`pipec build FILE -o DIR`: check a pipeline and write its bundle (compiler/bundle.py).

The file is checked for every target architecture, as `pipec --check --arch A` would check
it; what `--check` refuses is refused here with the same diagnostics (exit 1), and nothing is
written. Exit 0: built (warnings allowed); 2: usage, configuration, I/O, no kernel compiler.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli.arguments import OneLineParser, UsageError, add_color_options, check_toolchain, define
from ..cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, report
from ..cli.terminal import say, use_color
from ..errors import Error
from ..plan.bundle_format import BundleError
from ..plan.gemm_algorithms import GemmAlgorithms, check_distinct, check_for_plan, read_file
from ..plan.schema import Plan
from .bundle import write_bundle
from .config import load_settings, override
from .diagnostics import Diagnostic
from .render import RENDERERS
from .stages import compile_file, without_cycle_collection
from .toolchain import CompileFailed


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="pipec build",
        description="Check a .pipe pipeline and write its bundle: the plan, the kernels compiled for "
                    "each architecture, PTX, initial buffer contents and a manifest of hashes. Needs no GPU.",
        epilog="docs/native.md describes the bundle; docs/cli.md every option.",
    )
    p.add_argument("file", type=Path, metavar="FILE", help="the .pipe file to build")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                   help="the bundle's folder (an existing bundle there is replaced)")
    p.add_argument("--arch", action="append", dest="archs", default=None, metavar="ARCH",
                   help="a target architecture, e.g. sm_90 (repeatable, or comma-separated; "
                        "default from config, else sm_90); the first is the plan's")
    p.add_argument("--compiler", choices=("nvrtc", "nvcc"), help="kernel compiler (default: nvrtc)")
    p.add_argument("-D", "--define", action="append", type=define, dest="defines", default=None,
                   metavar="NAME=EXPR", help="override a constant of the file (repeatable)")
    p.add_argument("--include-dir", action="append", type=Path, dest="include_dirs", default=None,
                   help="also look for imported files here (repeatable)")
    p.add_argument("--gemm-algorithms", action="append", type=Path, dest="gemm_algorithms", default=[],
                   metavar="F.json", help="GEMM algorithms chosen on a GPU (piperun FILE --save-gemm-algorithms F.json), "
                                          "stored in the bundle (repeatable: one file per GPU)")
    p.add_argument("--output-format", "--format", dest="output_format", choices=sorted(RENDERERS),
                   default="text", help="diagnostic format on stderr (default: text)")
    add_color_options(p)
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    color = use_color(args.color, sys.stderr)
    try:
        return _build(args, color)
    except Error as error:
        return report("pipec", error, color=color)
    except KeyboardInterrupt:
        say("pipec", "error", "interrupted", color=color)
    return EXIT_USAGE


def target_archs(given: list[str] | None, default: str) -> tuple[str, ...]:
    """`--arch sm_90 --arch sm_100` or `--arch sm_90,sm_100`, in the order given."""
    archs = tuple(a.strip() for item in (given or [default]) for a in item.split(",") if a.strip())
    if len(set(archs)) != len(archs):
        raise UsageError(f"an architecture is given twice: {', '.join(archs)}")
    if not archs:
        raise UsageError("--arch names no architecture")
    return archs


def _build(args: argparse.Namespace, color: bool) -> int:
    if not args.file.is_file():
        raise UsageError(f"cannot read {args.file}: no such file")
    base = override(load_settings(args.file), include_dirs=args.include_dirs, compiler=args.compiler,
                    defines=tuple(args.defines) if args.defines else None)
    archs = target_archs(args.archs, base.compile.arch)
    chosen = [(str(path), read_file(path)) for path in args.gemm_algorithms]  # a bad file stops it before compiling
    check_distinct(chosen)
    plan, diagnostics = None, []
    for arch in archs:
        settings = override(base, arch=arch)
        check_toolchain(settings.compile)
        with without_cycle_collection():
            try:
                compilation = compile_file(args.file, settings)
            except OSError as error:
                raise UsageError(f"cannot read {args.file}: {getattr(error, 'strerror', None) or error}") from None
        diagnostics += [d for d in compilation.diagnostics if d not in diagnostics]
        if compilation.plan is None:
            plan = None
            break
        plan = plan or compilation.plan
    sys.stderr.write(RENDERERS[args.output_format](sorted(diagnostics, key=Diagnostic.sort_key), color=color))
    if any(d.code in ("PC101", "PC112") for d in diagnostics):
        return EXIT_USAGE
    if plan is None:
        return EXIT_FAILED
    try:
        write_bundle(plan, archs, args.output, str(args.file), _checked_algorithms(chosen, plan))
    except CompileFailed as error:  # checked, yet a module fails for one arch or as PTX: its first line
        first = next((line for line in error.log.splitlines() if line.strip()), "no log")
        raise BundleError(f"a kernel module does not compile: {first}") from None
    return EXIT_OK


def _checked_algorithms(chosen: list[tuple[str, GemmAlgorithms]], plan: Plan) -> tuple[GemmAlgorithms, ...]:
    for where, algorithms in chosen:
        check_for_plan(algorithms, plan, where)
    return tuple(algorithms for _, algorithms in chosen)
