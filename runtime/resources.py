"""Launch resources against the device's real limits, before anything is launched.

The compiler checks block sizes and dynamic shared memory against the architecture it was told
to target; the device in hand may be smaller, and only the compiled kernel knows its registers
and static shared memory. Every kernel node is checked here against `cuFuncGetAttribute` and
`cuDeviceGetAttribute`, so a launch the driver would refuse becomes a finding with the node's
`.pipe` location instead of a failed launch."""

from __future__ import annotations

from dataclasses import dataclass

from ..plan.schema import KernelNodeSpec, Location, Plan
from ..errors import Error
from .driver import Device
from .eager import EAGER_SCOPE
from .modules import Modules


@dataclass(frozen=True)
class LimitFinding:
    location: Location  # the launch in the `.pipe` file
    message: str
    hint: str


class LaunchLimitsExceeded(Error):
    def __init__(self, findings: list[LimitFinding]) -> None:
        self.findings = findings
        super().__init__("; ".join(f"{f.location}: {f.message}" for f in findings))


@dataclass(frozen=True)
class _Compiled:
    """What the compiled kernel needs, from `cuFuncGetAttribute`."""

    registers: int  # per thread
    static_shared: int  # bytes
    max_threads: int  # per block, given its registers and `__launch_bounds__`


def check_launch_resources(plan: Plan, modules: Modules) -> list[LimitFinding]:
    findings: list[LimitFinding] = []
    seen: set[Location] = set()
    for root in (plan.init, plan.step):
        for node in plan.leaves(root) if root is not None else ():
            # a child graph used twice is one launch in the source: report it once
            if isinstance(node, KernelNodeSpec) and node.location not in seen:
                seen.add(node.location)
                findings += _launch_findings(node, _compiled(modules, node), modules.device)
    return findings


def _compiled(modules: Modules, node: KernelNodeSpec) -> _Compiled:
    driver = modules.device.driver
    function = modules.function(EAGER_SCOPE, node.module, node.function)  # loaded for eager runs anyway

    def attribute(name: str) -> int:
        return driver.call("cuFuncGetAttribute",
                           getattr(driver.cu.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}"), function)

    return _Compiled(attribute("NUM_REGS"), attribute("SHARED_SIZE_BYTES"),
                     attribute("MAX_THREADS_PER_BLOCK"))


def _launch_findings(node: KernelNodeSpec, kernel: _Compiled, device: Device) -> list[LimitFinding]:
    found = []
    threads = node.block[0] * node.block[1] * node.block[2]
    on = f"{device.name} ({device.arch})"
    if threads > device.max_threads_per_block:
        found.append(LimitFinding(
            node.location, f"`{node.function}` is launched with {threads} threads per block; {on} "
            f"allows {device.max_threads_per_block}", "use more blocks of fewer threads"))
    elif threads > kernel.max_threads or kernel.registers * threads > device.max_registers_per_block:
        found.append(LimitFinding(
            node.location, f"`{node.function}` uses {kernel.registers} registers per thread: {threads} "
            f"threads need {kernel.registers * threads}, {on} has {device.max_registers_per_block} per "
            f"block (at most {kernel.max_threads} threads of this kernel)",
            f"launch at most {kernel.max_threads} threads per block, or give the kernel "
            "`__launch_bounds__` so the compiler uses fewer registers"))
    if kernel.static_shared + node.shared_bytes > device.max_shared_per_block:
        found.append(LimitFinding(
            node.location, f"`{node.function}` needs {kernel.static_shared} bytes of static and "
            f"{node.shared_bytes} of dynamic shared memory; a block on {on} has at most "
            f"{device.max_shared_per_block}", "use less shared memory per block, or split the work "
            "across blocks"))
    return found
