"""pipec: a compiler and runtime that turns a declarative GPU training step into a CUDA graph.

    import pipec
    with pipec.load("pipelines/rl_step.pipe") as pipeline:
        pipeline.step(1000)
        print(pipeline.readback())

Checking a pipeline (`pipec.check`) needs no GPU; loading one does.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

# Absolute, not relative: pytest imports this file as a module of no package when the
# checkout's folder name is no identifier (e.g. `pipec-main`).
from pipec._version import __version__
from pipec.errors import Error

if TYPE_CHECKING:
    from pipec.runtime import Backends, Pipeline
    from pipec.runtime.process_launchers import Launch

# Every exception pipec raises derives from `Error`; the concrete classes, importable from
# here without loading the compiler or the runtime until one is asked for.
ERRORS = {
    "PipelineError": "runtime.load", "CudaError": "runtime.driver", "NoDevice": "runtime.driver",
    "OutOfMemory": "runtime.memory", "BindError": "runtime.memory", "ClosedError": "runtime.views",
    "UpdateRefused": "runtime.update", "StateError": "runtime.state", "NodeFailed": "runtime.eager",
    "LaunchLimitsExceeded": "runtime.resources", "ProfileError": "runtime.profile_analysis",
    "ProfilerUnavailable": "runtime.profile_collect", "ConfigError": "compiler.config",
    "ToolchainUnavailable": "compiler.toolchain", "CompileFailed": "compiler.toolchain",
    "UsageError": "cli.arguments", "GemmError": "runtime.cublaslt", "LibraryRecordingError": "runtime.library",
    "DistributedError": "runtime.distributed", "CollectiveFailed": "runtime.collectives",
    "BundleError": "plan.bundle_format",
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


def load(path: str | Path, *, device: int = 0, bind: Mapping[str, object] | None = None,
         defines: Mapping[str, object] | None = None, lanes: int | None = None,
         include_dirs: tuple[Path, ...] | list[Path] = (), steps_per_launch: int = 1, unroll: bool = False,
         tune_gemms: bool = False, launch: Launch | None = None, backends: Backends | None = None) -> Pipeline:
    """Compile and load a pipeline on the GPU; returns a `Pipeline`. `defines` overrides constants
    of the file (`{"ENVS": 1024}`); `bind` maps buffer names to existing CUDA arrays (CuPy,
    PyTorch...) to use instead of allocating; `steps_per_launch` K runs K steps per launch, in a
    device-side loop or with `unroll` as K copies of the step in one graph; `tune_gemms` times
    the GEMM algorithms; `launch` is the launcher's view of this process; `backends` replaces
    the driver, cuBLASLt or the ranks' connection (`pipec.runtime.load.Backends`: the CPU
    tests' fakes). docs/python-api.md describes each."""
    from .runtime.load import Backends, LoadOptions, load as load_pipeline

    options = LoadOptions(device=device, bind=bind, defines=defines, lanes=lanes, include_dirs=tuple(include_dirs),
                          steps_per_launch=steps_per_launch, unroll=unroll, tune_gemms=tune_gemms, launch=launch)
    return load_pipeline(path, options, backends or Backends())


def load_bundle(directory: str | Path, *, device: int = 0, bind: Mapping[str, object] | None = None,
                launch: Launch | None = None, backends: Backends | None = None) -> Pipeline:
    """Load a bundle that `pipec build` wrote, on the GPU; returns a `Pipeline`. The options are
    `pipec.load`'s but those that compile (a bundle's constants are the build's); docs/python-api.md
    describes it."""
    from .runtime.bundle import load_bundle as load_from_bundle
    from .runtime.load import Backends

    return load_from_bundle(directory, device=device, bind=bind, launch=launch, backends=backends or Backends())
