"""pipec: a compiler and runtime that turns a declarative GPU training step into a CUDA graph.

    import pipec
    with pipec.load("pipelines/rl_step.pipe") as pipeline:
        pipeline.step(1000)
        print(pipeline.readback())

Checking a pipeline (`pipec.check`) needs no GPU; loading one does.
"""

from __future__ import annotations

import os
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
    "ArgumentError": "api_arguments", "OutputError": "cli.terminal", "BundleError": "plan.bundle_format",
}

__all__ = ["ArgumentError", "BindError", "BundleError", "ClosedError", "CollectiveFailed", "CompileFailed", "ConfigError",
           "CudaError", "DistributedError", "Error", "GemmError", "LaunchLimitsExceeded", "LibraryRecordingError",
           "NoDevice", "NodeFailed", "OutOfMemory", "OutputError", "PipelineError", "ProfileError", "ProfilerUnavailable",
           "StateError", "ToolchainUnavailable", "UpdateRefused", "UsageError", "__version__", "check",
           "load", "load_bundle"]


def __dir__() -> list[str]:
    """What `pipec` offers (`__all__`), without the names its own code imports."""
    return sorted(__all__)


def __getattr__(name: str):
    if name in ERRORS:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{ERRORS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check(path: str | os.PathLike | None = None, *, text: str | None = None, defines=None, select=None,
          ignore=None, arch: str | None = None, include_dirs=None, lanes: int | None = None):
    """Check a `.pipe` file without a GPU, as `pipec --check` does; returns the `Compilation`
    (`diagnostics`, each with `to_json()` giving the object `pipec --format json` prints, and
    `plan` when it checks clean). `text` is the source itself, which `path` (default
    `stdin.pipe` in the working folder) names for reports, imports and the configuration.
    `defines` ({"ENVS": 64}), `select` and `ignore` (lists of codes, prefixes or names), `arch`,
    `include_dirs` and `lanes` are the command line's `-D`, `--select`, `--ignore`, `--arch`,
    `--include-dir` and `--lanes`, on top of `[tool.pipec]`. Raises ArgumentError for a value
    that cannot mean anything, ConfigError for a bad `[tool.pipec]`, ToolchainUnavailable
    without a kernel compiler."""
    from .api_arguments import ArgumentError, check_arguments
    from .compiler import compile_file, load_settings
    from .compiler.config import override

    file, changes = check_arguments(path, text, defines=defines, select=select, ignore=ignore, arch=arch,
                                    include_dirs=include_dirs, lanes=lanes)
    settings = override(load_settings(file), **changes)
    try:
        return compile_file(file, settings, until="plan", text=text)
    except OSError as error:  # it exists (checked first), but cannot be read
        raise ArgumentError(f"path = {str(file)!r}: cannot read it: {error.strerror or error}") from None


def load(path: str | os.PathLike, *, device: int = 0, bind: Mapping[str, object] | None = None,
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

    # one string stays one, for the load to refuse (tuple() would make it a tuple of letters)
    folders = tuple(include_dirs) if isinstance(include_dirs, (list, tuple)) else include_dirs
    options = LoadOptions(device=device, bind=bind, defines=defines, lanes=lanes, include_dirs=folders,  # type: ignore[arg-type]  # checked in load
                          steps_per_launch=steps_per_launch, unroll=unroll, tune_gemms=tune_gemms, launch=launch)
    return load_pipeline(path, options, backends or Backends())


def load_bundle(directory: str | Path, *, device: int = 0, bind: Mapping[str, object] | None = None,
                launch: Launch | None = None, tune_gemms: bool = False, backends: Backends | None = None) -> Pipeline:
    """Load a bundle that `pipec build` wrote, on the GPU; returns a `Pipeline`. The options are
    `pipec.load`'s but those that compile (a bundle's constants are the build's); GEMM nodes run
    the algorithms the bundle stores where they hold, else the heuristic's; docs/python-api.md
    describes it."""
    from .runtime.bundle import load_bundle as load_from_bundle
    from .runtime.load import Backends

    return load_from_bundle(directory, device=device, bind=bind, launch=launch, tune_gemms=tune_gemms,
                            backends=backends or Backends())
