"""`piperun DIR`: what running a bundle changes in piperun. A bundle is compiled already, so
the options that compile (constants, lanes, include folders, device-side loops, unrolling,
live updates, GEMM tuning) are refused before any GPU work, each in one line."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cli.arguments import UsageError
from ..plan.bundle_format import MANIFEST
from ..wording import verb


def is_bundle(path: Path) -> bool:
    """A folder holding a manifest: what `piperun` runs as a bundle rather than a `.pipe` file."""
    return path.is_dir() and (path / MANIFEST).is_file()


def refuse_compiling_options(args: argparse.Namespace) -> None:
    given = [option for option, used in (
        ("-D", args.defines), ("--set", args.updates), ("--lanes", args.lanes is not None),
        ("--include-dir", args.include_dirs), ("--steps-per-launch", args.steps_per_launch != 1),
        ("--unroll", args.unroll), ("--tune-gemms", args.tune_gemms),
    ) if used]
    if given:
        raise UsageError(f"{', '.join(given)} {verb('compiles', len(given))} the pipeline, and {args.file} is a "
                         "bundle, compiled already: run the .pipe file with them (a bundle's constants are `pipec build -D`'s)")
