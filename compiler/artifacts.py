"""The compiled artifacts of a plan: one binary per plan module, for one target architecture.

The plan names its modules (a kernel source file, or generated glue code); what runs is a
cubin built for the device in hand, which may not be the architecture the plan was checked
for. Binaries are cached on disk by content, options, compiler version and architecture.
"""

from __future__ import annotations

from pathlib import Path

from . import kernel_analysis
from ..plan.schema import Plan
from .toolchain import get_toolchain


def module_binaries(plan: Plan, arch: str, target: str = "cubin") -> tuple[bytes, ...]:
    """Every module of `plan` compiled for `arch` (`sm_90`), by module index; with
    `target="ptx"`, their PTX for a virtual `arch` (`compute_90`), which the driver compiles for
    any newer device. Raises CompileFailed when a source no longer compiles,
    ToolchainUnavailable without a compiler."""
    toolchain = get_toolchain(plan.compiler)
    return tuple(
        kernel_analysis.compile_generated_cubin(spec.name, spec.source, toolchain, arch, target)
        if spec.source is not None
        else kernel_analysis.compile_cubin(Path(spec.path), tuple(Path(d) for d in spec.include_dirs),
                                           toolchain, arch, target)
        for spec in plan.modules
    )
