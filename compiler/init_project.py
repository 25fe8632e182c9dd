"""`pipec init [DIR]`: a starter project that checks clean: a pyproject.toml whose [tool.pipec]
table makes `kernels/` an include folder, one kernel, one pipeline that launches it, and a
pre-commit configuration running `pipec --check` and `pipec format` from the environment.
It writes nothing when any of its files exists already."""

from __future__ import annotations

import re
from pathlib import Path

from ..cli.arguments import OneLineParser
from ..cli.exits import EXIT_OK, EXIT_USAGE
from ..cli.terminal import say, write_stdout
from ..files import write_atomically

PYPROJECT = '''[project]
name = "{name}"
version = "0.1.0"
requires-python = ">=3.11"
# checking needs NVRTC only (nvrtc13 for CUDA 13); running on a GPU: pipec[cu12]
dependencies = ["pipec[nvrtc12]"]

# pipec's settings (docs/cli.md, "Configuration"): imports of kernel sources are looked up
# next to the pipeline first, then in these folders.
[tool.pipec]
include-dirs = ["kernels"]
arch = "sm_90"
'''

KERNEL = '''// kernels/saxpy.cu: y = a * x + y, element-wise (docs/kernels.md tells how kernels are written).
/// pipec: extent x = n
/// pipec: extent y = n
extern "C" __global__ void saxpy(const float* x, float* y, float a, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
'''

PIPELINE = '''# pipelines/step.pipe: one step, one CUDA graph (docs/language.md describes the language).
from "saxpy.cu" import saxpy

const N = 1 << 16
const BLOCK = 256

buffer x: f32[N] = uniform(-1.0, 1.0, seed=1)
buffer y: f32[N]

step {
    launch saxpy<<<ceil_div(N, BLOCK), BLOCK>>>(in x, inout y, 0.5, N)
}
'''

PRE_COMMIT = '''# pre-commit (https://pre-commit.com): `pre-commit install` runs these before each commit,
# with the pipec of the environment you installed the project in.
repos:
  - repo: local
    hooks:
      - id: pipec
        name: pipec --check (graph-safety rules of the pipelines)
        entry: pipec --check pipelines/
        language: system
        files: \\.(pipe|cu|cuh)$
        pass_filenames: false
      - id: pipec-format
        name: pipec format (the one layout of .pipe files)
        entry: pipec format
        language: system
        files: \\.pipe$
'''

FILES = {"pyproject.toml": PYPROJECT, "kernels/saxpy.cu": KERNEL, "pipelines/step.pipe": PIPELINE,
         ".pre-commit-config.yaml": PRE_COMMIT}


def parser() -> OneLineParser:
    p = OneLineParser(prog="pipec init", description="Create a starter pipec project (docs/cli.md).")
    p.add_argument("dir", nargs="?", type=Path, default=Path("."), metavar="DIR",
                   help="the project's folder, created if missing (default: the current folder)")
    return p


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    existing = [name for name in FILES if (args.dir / name).exists()]
    if existing:
        say("pipec init", "error", f"{args.dir} already has {', '.join(existing)}; nothing was written",
            color=False)
        return EXIT_USAGE
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", args.dir.resolve().name).strip("-._") or "pipeline"
    try:
        for relative, text in FILES.items():
            target = args.dir / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(target, text.replace("{name}", name))
    except OSError as error:
        say("pipec init", "error", f"cannot write in {args.dir}: {error.strerror or error}", color=False)
        return EXIT_USAGE
    where = "" if args.dir == Path(".") else f" {args.dir / 'pipelines'}"
    write_stdout(f"created {', '.join(FILES)} in {args.dir}; check it with `pipec --check{where}`\n")
    return EXIT_OK
