"""`pipec.load(path)`: the front door that joins the compiler and the runtime.

It compiles the `.pipe` file to a plan (stopping with the compiler's diagnostics if it does not
check), opens the device, compiles the plan's modules for the device's own architecture, and
builds the `Pipeline`. Whatever stops a load that the program could fix arrives as one
`PipelineError` carrying diagnostics, rendered like the compiler's: a kernel launch over the
device's real limits is PC316 at the launch's `.pipe` location.
"""

from __future__ import annotations

from pathlib import Path

from ..compiler import cache, compile_file, load_settings
from ..compiler.artifacts import module_binaries
from ..compiler.config import override
from ..compiler.diagnostics import Diagnostic
from ..compiler.launch_loop import repeat_step
from ..compiler.plan_schema import ConditionalNodeSpec, Plan, collective_sequence
from ..compiler.render import RENDERERS
from ..compiler.toolchain import CompileFailed
from ..dsl.source import SourceFile, Span
from ..errors import Error
from .distributed import connect
from .launchers import SINGLE, Launch
from .driver import Driver, open_device, release_device
from .gemm import GemmError, GemmSettings
from .library import LibraryRecordingError
from .pipeline import Pipeline
from .resources import LaunchLimitsExceeded, LimitFinding


class PipelineError(Error):
    """The pipeline cannot be loaded: `diagnostics` says why, or `message` where no rule does."""

    def __init__(self, diagnostics: list[Diagnostic], message: str = "") -> None:
        self.diagnostics, self.message = diagnostics, message
        super().__init__(self.render())

    def render(self, *, color: bool = False) -> str:
        return RENDERERS["text"](self.diagnostics, color=color) if self.diagnostics else self.message + "\n"


def load(path: str | Path, *, device: int = 0, bind: dict[str, object] | None = None,
         defines: dict[str, object] | None = None, lanes: int | None = None,
         include_dirs: tuple[Path, ...] = (), drop_nodes: frozenset[str] = frozenset(),
         driver: Driver | None = None, steps_per_launch: int = 1, unroll: bool = False,
         tune_gemms: bool = False, gemm_library=None, launch: Launch | None = None,
         connect_ranks=connect) -> Pipeline:
    """Compile and load a pipeline. `defines` overrides constants of the file (`{"ENVS": 1024}`);
    `bind` maps buffer names to existing CUDA arrays (CuPy, PyTorch...) to use instead of
    allocating; `drop_nodes` builds those nodes as empty ones (a planted fault, for testing
    verification); `driver` replaces the CUDA driver (the CPU tests' fake). With
    `steps_per_launch` K > 1 the step runs K times inside a device-side loop, or with `unroll` as
    K copies of its nodes in one graph (a step with an `every` block is refused): `step(n)` and
    `run_eager(n)` then run n * K steps. GEMM nodes run the heuristic's first algorithm, or with
    `tune_gemms` the fastest of its best candidates timed on the GPU; either choice is kept in
    the artifact cache for later loads. `gemm_library` replaces nvmath-python's cuBLASLt binding
    (the CPU tests' fake). `launch` is the launcher's view of this process
    (runtime/launchers.py): its RANK, WORLD_SIZE and LOCAL_RANK become constants of the file,
    and its ranks connect (`connect_ranks`, replaced by the CPU tests) before the pipeline is
    built; a plan with collectives and no launcher runs on a communicator of one rank."""
    path = Path(path)
    settings = override(load_settings(path), lanes=lanes, include_dirs=include_dirs or None,
                        step_copies=steps_per_launch if unroll else None)

    def compile_plan(values: dict[str, object]) -> tuple[Plan, list[SourceFile]]:
        """The plan for the file with these constant values (the load's, then an update's)."""
        chosen = override(settings, defines=tuple((k, str(v)) for k, v in values.items()) or None)
        compilation = compile_file(path, chosen)
        if compilation.plan is None:
            raise PipelineError(compilation.diagnostics)
        if compilation.plan.step is None:
            raise PipelineError([], f"{path}: there is no `step` block to run")
        if unroll and steps_per_launch > 1 and any(
                isinstance(n, ConditionalNodeSpec) and n.construct == "every"
                for g in compilation.plan.graphs for n in g.nodes):
            # each copy would count its own replays, once a launch, not the steps
            raise PipelineError([], f"{path}: the step has an `every` block, which counts replays: "
                                    "unrolled, each copy would count launches; use the device-side loop "
                                    "(without unroll)")
        return (compilation.plan if unroll else repeat_step(compilation.plan, steps_per_launch),
                compilation.sources)

    if tune_gemms and launch is not None and launch.world_size > 1:
        # Each rank would time its own candidates and could keep another algorithm: replicated
        # results computed by GEMMs would then differ between ranks.
        raise PipelineError([], f"{path}: --tune-gemms (tune_gemms) runs on one rank only; tune with "
                                "WORLD_SIZE = 1, and the ranks reuse the cached choices")
    defines = {**(defines or {}), **(launch.constants() if launch else {})}
    plan, sources = compile_plan(defines)
    opened = open_device(device, driver)
    try:
        binaries = module_binaries(plan, opened.arch)
    except CompileFailed as failure:
        release_device(opened)
        raise PipelineError([], f"{path}: the kernels do not compile for {opened.describe()}:\n"
                                f"{failure.log.rstrip()}") from None
    except BaseException:
        release_device(opened)
        raise
    try:
        gemm = GemmSettings(gemm_library, cache.cache_dir() / "gemm" if cache.enabled() else None, tune_gemms)
        distributed = None
        if launch is not None or collective_sequence(plan):
            distributed = connect_ranks(plan, launch or SINGLE)
    except BaseException:
        release_device(opened)
        raise
    try:
        return Pipeline(plan, binaries, opened, bind=bind, drop_nodes=drop_nodes,
                        recompile=lambda values: compile_plan({**defines, **values})[0],
                        gemm=gemm, distributed=distributed)
    except (GemmError, LibraryRecordingError) as error:
        raise PipelineError([], f"{path}: {error}") from None
    except LaunchLimitsExceeded as error:
        by_path = {s.display_path(): s for s in sources}
        raise PipelineError([_diagnostic(f, by_path) for f in error.findings]) from None


def _diagnostic(finding: LimitFinding, sources: dict[str, SourceFile]) -> Diagnostic:
    location = finding.location
    span = Span.of_line(sources[location.file], location.line, location.column)
    return Diagnostic("PC316", finding.message, span, finding.hint)
