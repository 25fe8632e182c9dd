"""pipec: a compiler and runtime that turns a declarative GPU training step into a CUDA graph.

    import pipec
    with pipec.load("pipelines/rl_step.pipe") as pipeline:
        pipeline.step(1000)
        print(pipeline.readback())

Checking a pipeline (`pipec.check`) needs no GPU; loading one does.
"""

from __future__ import annotations

from pathlib import Path

# Absolute, not relative: pytest imports this file as a module of no package when the
# checkout's folder name is no identifier (e.g. `pipec-main`).
from pipec._version import __version__

__all__ = ["__version__", "check", "load"]


def check(path: str | Path):
    """Compile a `.pipe` file without a GPU; returns the `Compilation` (diagnostics, plan)."""
    from .compiler import compile_file, load_settings

    return compile_file(Path(path), load_settings(Path(path)))


def load(path: str | Path, **options):
    """Compile and load a pipeline on the GPU (see `pipec.runtime.load.load`)."""
    from .runtime import load as load_pipeline

    return load_pipeline(path, **options)
