"""`pipec.load(path)`: the front door that joins the compiler and the runtime.

It compiles the `.pipe` file to a plan (stopping with the compiler's diagnostics if it does not
check), opens the device, compiles the plan's modules for the device's own architecture, and
builds the `Pipeline`. Whatever stops a load that the program could fix arrives as one
`PipelineError` carrying diagnostics, rendered like the compiler's: a kernel launch over the
device's real limits is PC316 at the launch's `.pipe` location.

What a caller asks for is one `LoadOptions`; what the runtime drives (the CUDA driver,
cuBLASLt, the ranks' connection) is one `Backends`, which the CPU tests replace whole.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..api_arguments import (
    ArgumentError, constants, flag, folders, instance, names, optional_whole_number, source_file, whole_number,
)
from ..compiler import cache, compile_file, load_settings
from ..compiler.artifacts import module_binaries
from ..compiler.config import Settings, override
from ..compiler.diagnostics import Diagnostic
from ..compiler.render import RENDERERS
from ..compiler.steps_per_launch import StepsPerLaunchRefused
from ..compiler.toolchain import CompileFailed
from ..dsl.source import SourceFile, Span
from ..errors import Error
from ..plan.schema import Plan, collective_sequence
from .cublaslt import GemmError, GemmSettings
from .distributed import Distributed, connect
from .driver import Device, Driver, open_device, release_device
from .library import LibraryRecordingError
from .pipeline import Pipeline
from .process_launchers import SINGLE, Launch
from .resources import LaunchLimitsExceeded, LimitFinding


class PipelineError(Error):
    """The pipeline cannot be loaded: `diagnostics` says why, or `message` where no rule does."""

    def __init__(self, diagnostics: list[Diagnostic], message: str = "") -> None:
        self.diagnostics, self.message = diagnostics, message
        super().__init__(self.render())

    def render(self, *, color: bool = False) -> str:
        return RENDERERS["text"](self.diagnostics, color=color) if self.diagnostics else self.message + "\n"


@dataclass(frozen=True)
class LoadOptions:
    """What `pipec.load` is asked for (docs/python-api.md describes each)."""

    device: int = 0
    bind: Mapping[str, object] | None = None  # buffer name: an existing CUDA array to use
    defines: Mapping[str, object] | None = None  # constant name: value, over the file's
    lanes: int | None = None
    include_dirs: tuple[Path, ...] = ()
    steps_per_launch: int = 1  # K steps per launch: a device-side loop, or with `unroll` K copies
    unroll: bool = False
    tune_gemms: bool = False  # time the heuristic's best GEMM algorithms and keep the fastest
    launch: Launch | None = None  # the launcher's view of this process (runtime/process_launchers.py)


@dataclass(frozen=True)
class Backends:
    """What the runtime drives, each replaceable (the CPU tests pass their fakes as one object):
    `driver` for cuda.bindings' driver API, `cublaslt` for nvmath-python's cuBLASLt binding,
    `connect_ranks` for the ranks' channel and communicator. `drop_nodes` builds those nodes as
    empty ones: a planted fault, for testing verification."""

    driver: Driver | None = None
    cublaslt: object = None
    connect_ranks: Callable[[Plan, Launch], Distributed] = connect
    drop_nodes: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class PipeFile:
    """A `.pipe` file with the settings and constants it was loaded with: its plan, for those
    constants and any new values on top (what `Pipeline.update` compiles)."""

    path: Path
    settings: Settings
    defines: Mapping[str, object]

    def compile(self, values: Mapping[str, object]) -> tuple[Plan, list[SourceFile]]:
        chosen = {**self.defines, **values}
        settings = override(self.settings, defines=tuple((k, str(v)) for k, v in chosen.items()) or None)
        try:
            compilation = compile_file(self.path, settings)
        except StepsPerLaunchRefused as refused:
            raise PipelineError([], str(refused)) from None
        except OSError as error:  # it exists (checked first), but cannot be read
            raise ArgumentError(f"path = {str(self.path)!r}: cannot read it: {error.strerror or error}") from None
        if compilation.plan is None:
            raise PipelineError(compilation.diagnostics)
        if compilation.plan.step is None:
            raise PipelineError([], f"{self.path}: there is no `step` block to run")
        return compilation.plan, compilation.sources

    def recompile(self, values: dict[str, object]) -> Plan:
        return self.compile(values)[0]


def load(path: str | os.PathLike, options: LoadOptions = LoadOptions(), backends: Backends = Backends()) -> Pipeline:
    """Compile and load a pipeline. With `steps_per_launch` K > 1, `step(n)` and `run_eager(n)`
    run n * K steps. GEMM nodes run the heuristic's first algorithm, or with `tune_gemms` the
    fastest of its best candidates; either choice is kept in the artifact cache for later loads.
    Under a launcher (`launch`) its RANK, WORLD_SIZE and LOCAL_RANK become constants of the file,
    and its ranks connect before the pipeline is built; a plan with collectives and no launcher
    runs on a communicator of one rank."""
    path, options, backends = _checked(path, options, backends)
    launch = options.launch
    refuse_tuning_on_ranks(path, options.tune_gemms, launch)
    settings = override(load_settings(path), lanes=options.lanes, include_dirs=options.include_dirs or None,
                        steps_per_launch=options.steps_per_launch, unroll=options.unroll)
    pipe = PipeFile(path, settings, {**(options.defines or {}), **(launch.constants() if launch else {})})
    plan, sources = pipe.compile({})
    with ExitStack() as until_built:
        device = open_device(options.device, backends.driver)
        until_built.callback(release_device, device)
        binaries = _binaries(path, plan, device)
        distributed = None
        if launch is not None or collective_sequence(plan):
            distributed = backends.connect_ranks(plan, launch or SINGLE)
        until_built.pop_all()  # the pipeline owns the device and the ranks' connection from here
    gemm = gemm_settings(backends, options.tune_gemms)
    try:
        return Pipeline(plan, binaries, device, bind=options.bind, drop_nodes=backends.drop_nodes,
                        recompile=pipe.recompile, gemm=gemm, distributed=distributed)
    except (GemmError, LibraryRecordingError) as error:
        raise PipelineError([], f"{path}: {error}") from None
    except LaunchLimitsExceeded as error:
        by_path = {s.display_path(): s for s in sources}
        raise PipelineError([_diagnostic(f, by_path) for f in error.findings]) from None


def _checked(path: object, given_options: object, given_backends: object) -> tuple[Path, LoadOptions, Backends]:
    """The arguments of a load, each refused with one ArgumentError when it cannot mean
    anything (api_arguments.py), before anything is compiled or a device is looked for."""
    if not isinstance(given_options, LoadOptions):
        raise ArgumentError(f"options = {given_options!r}: expected a pipec.runtime.LoadOptions")
    if not isinstance(given_backends, Backends):
        raise ArgumentError(f"backends = {given_backends!r}: expected a pipec.runtime.Backends")
    options, backends = given_options, given_backends
    if options.bind is not None and (not isinstance(options.bind, Mapping)
                                     or not all(isinstance(name, str) for name in options.bind)):
        raise ArgumentError(f"bind = {options.bind!r}: expected a mapping of buffer names to CUDA arrays")
    checked = replace(
        options, device=whole_number("device", options.device), defines=constants("defines", options.defines),
        lanes=optional_whole_number("lanes", options.lanes, 1),
        include_dirs=folders("include_dirs", options.include_dirs),
        steps_per_launch=whole_number("steps_per_launch", options.steps_per_launch, 1),
        unroll=flag("unroll", options.unroll), tune_gemms=flag("tune_gemms", options.tune_gemms),
        launch=instance("launch", options.launch, Launch, "a pipec.runtime.process_launchers.Launch"))
    instance("driver", backends.driver, Driver, "a pipec.runtime.driver.Driver")
    backends = replace(backends, drop_nodes=names("drop_nodes", backends.drop_nodes))
    return source_file("path", path), checked, backends


def refuse_tuning_on_ranks(path: Path, tune_gemms: bool, launch: Launch | None) -> None:
    """Each rank would time its own candidates and could keep another algorithm: replicated
    results computed by GEMMs would then differ between ranks."""
    if tune_gemms and launch is not None and launch.world_size > 1:
        raise PipelineError([], f"{path}: --tune-gemms (tune_gemms) runs on one rank only; tune with "
                                "WORLD_SIZE = 1, and the ranks reuse the choices (the artifact cache's, "
                                "or a bundle's from `pipec build --gemm-algorithms`)")


def gemm_settings(backends: Backends, tune: bool) -> GemmSettings:
    """How `pipec.load` realises GEMM nodes: chosen algorithms are kept in (and reused from)
    the artifact cache. (A bundle's load uses the algorithms the bundle stores instead.)"""
    return GemmSettings(backends.cublaslt, cache.cache_dir() / "gemm" if cache.enabled() else None, tune)


def _binaries(path: Path, plan: Plan, device: Device) -> tuple[bytes, ...]:
    try:
        return module_binaries(plan, device.arch)
    except CompileFailed as failure:
        raise PipelineError([], f"{path}: the kernels do not compile for {device.describe()}:\n"
                                f"{failure.log.rstrip()}") from None


def _diagnostic(finding: LimitFinding, sources: dict[str, SourceFile]) -> Diagnostic:
    location = finding.location
    span = Span.of_line(sources[location.file], location.line, location.column)
    return Diagnostic("PC316", finding.message, span, finding.hint)
