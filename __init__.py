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
    "LaunchLimitsExceeded": "runtime.resources", "ProfileError": "runtime.profile_analysis",
    "ProfilerUnavailable": "runtime.profile_collect", "ConfigError": "compiler.config",
    "ToolchainUnavailable": "compiler.toolchain", "CompileFailed": "compiler.toolchain",
    "UsageError": "cli.arguments", "GemmError": "runtime.cublaslt", "LibraryRecordingError": "runtime.library",
    "DistributedError": "runtime.distributed", "CollectiveFailed": "runtime.collectives",
    "ArgumentError": "api_arguments", "OutputError": "cli.terminal",
}

__all__ = ["ArgumentError", "BindError", "ClosedError", "CollectiveFailed", "CompileFailed", "ConfigError", "CudaError",
           "DistributedError", "Error", "GemmError", "LaunchLimitsExceeded", "LibraryRecordingError",
           "NoDevice", "NodeFailed", "OutOfMemory", "OutputError", "PipelineError", "ProfileError", "ProfilerUnavailable",
           "StateError", "ToolchainUnavailable", "UpdateRefused", "UsageError", "__version__", "check",
           "load"]


def __getattr__(name: str):
    if name in ERRORS:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{ERRORS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check(path: str | Path):
    """Compile a `.pipe` file without a GPU; returns the `Compilation` (diagnostics, plan)."""
    from .compiler import compile_file, load_settings

    return compile_file(Path(path), load_settings(Path(path)))


def load(path: str | Path, *, device: int = 0, bind=None, defines=None, lanes: int | None = None,
         include_dirs=(), steps_per_launch: int = 1, unroll: bool = False, tune_gemms: bool = False,
         launch=None, backends=None):
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
