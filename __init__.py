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
from pipec.errors import Error

# Every exception pipec raises derives from `Error`; the concrete classes, importable from
# here without loading the compiler or the runtime until one is asked for.
ERRORS = {
    "PipelineError": "runtime.load", "CudaError": "runtime.driver", "NoDevice": "runtime.driver",
    "OutOfMemory": "runtime.memory", "BindError": "runtime.memory", "ClosedError": "runtime.views",
    "UpdateRefused": "runtime.update", "StateError": "runtime.state", "NodeFailed": "runtime.eager",
    "LaunchLimitsExceeded": "runtime.resources", "ProfileError": "runtime.profile",
    "ProfilerUnavailable": "runtime.profile_cupti", "ConfigError": "compiler.config",
    "ToolchainUnavailable": "compiler.toolchain", "CompileFailed": "compiler.toolchain",
    "UsageError": "compiler.cli", "GemmError": "runtime.gemm", "LibraryRecordingError": "runtime.library",
    "DistributedError": "runtime.distributed", "CollectiveFailed": "runtime.collectives",
    "BundleError": "compiler.bundle_format",
}

__all__ = ["BindError", "BundleError", "ClosedError", "CollectiveFailed", "CompileFailed", "ConfigError", "CudaError",
           "DistributedError", "Error", "GemmError", "LaunchLimitsExceeded", "LibraryRecordingError",
           "NoDevice", "NodeFailed", "OutOfMemory", "PipelineError", "ProfileError", "ProfilerUnavailable",
           "StateError", "ToolchainUnavailable", "UpdateRefused", "UsageError", "__version__", "check",
           "load", "load_bundle"]


def __getattr__(name: str):
    if name in ERRORS:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{ERRORS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check(path: str | Path):
    """Compile a `.pipe` file without a GPU; returns the `Compilation` (diagnostics, plan)."""
    from .compiler import compile_file, load_settings

    return compile_file(Path(path), load_settings(Path(path)))


def load(path: str | Path, **options):
    """Compile and load a pipeline on the GPU (see `pipec.runtime.load.load`)."""
    from .runtime import load as load_pipeline

    return load_pipeline(path, **options)


def load_bundle(directory: str | Path, **options):
    """Load a bundle that `pipec build` wrote, on the GPU (see `pipec.runtime.bundle.load_bundle`)."""
    from .runtime.bundle import load_bundle as load_from_bundle

    return load_from_bundle(directory, **options)
