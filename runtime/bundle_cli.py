"""`piperun DIR`: what running a bundle changes in piperun. A bundle is compiled already, so
the options that compile (constants, lanes, include folders, device-side loops, unrolling) are
refused before any GPU work, each in one line; GEMM tuning compiles nothing: it times the
bundle's GEMMs on the GPU. Live updates (`--set`) come from the plan's live-update record: a
name it does not list as a constant that can change in place, or a value that is no number, is
refused before any GPU work too."""

from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path

from ..cli.arguments import UsageError
from ..plan.bundle_format import MANIFEST, PLAN
from ..plan.live import parse_value
from ..wording import verb


def is_bundle(path: Path) -> bool:
    """A folder holding a manifest: what `piperun` runs as a bundle rather than a `.pipe` file."""
    return path.is_dir() and (path / MANIFEST).is_file()


def refuse_compiling_options(args: argparse.Namespace) -> None:
    given = [option for option, used in (
        ("-D", args.defines), ("--lanes", args.lanes is not None),
        ("--include-dir", args.include_dirs), ("--steps-per-launch", args.steps_per_launch != 1),
        ("--unroll", args.unroll),
    ) if used]
    if given:
        raise UsageError(f"{', '.join(given)} {verb('compiles', len(given))} the pipeline, and {args.file} is a "
                         "bundle, compiled already: run the .pipe file with them (a bundle's constants are `pipec build -D`'s)")


def check_bundle_updates(args: argparse.Namespace) -> None:
    """Each `--set NAME=VALUE@STEP` names a constant the bundle's record can change in place and
    gives it a number or a boolean. The plan is read, not checked: the load checks the bundle."""
    if not args.updates:
        return
    try:
        values = json.loads((args.file / PLAN).read_bytes())["live"]["values"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # the load reports what is wrong with the bundle
    constants = {v["name"]: v for v in values if v.get("updatable")}
    for _, name, value in args.updates:
        if name not in constants:
            close = difflib.get_close_matches(name, list(constants), n=1)
            raise UsageError(f"--set {name}: {args.file} has no constant `{name}`"
                             + (f"; did you mean `{close[0]}`?" if close else
                                f" (its constants: {', '.join(sorted(constants)) or 'none'})"))
        if constants[name]["structural"] is not None:
            raise UsageError(f"--set {name}: `{name}` cannot change in place: it {constants[name]['structural']}"
                             f" (rebuild the bundle with `pipec build -D {name}={value}`)")
        if parse_value(value) is None:
            raise UsageError(f"--set {name}={value}: a bundle takes numbers and `true`/`false`, not expressions")
