"""Launch resources against the device's real limits, before anything is launched.

The compiler checks block sizes and dynamic shared memory against the architecture it was told
to target; the device in hand may be smaller, and only the compiled kernel knows its registers
and static shared memory. Every kernel node is checked here against `cuFuncGetAttribute` and
`cuDeviceGetAttribute`, so a launch the driver would refuse becomes a finding with the node's
`.pipe` location instead of a failed launch."""

from __future__ import annotations

from dataclasses import dataclass

from ..compiler.plan_schema import KernelNodeSpec, Location, Plan
from .modules import Modules

SCOPE = "eager"  # the eager program loads every module anyway


@dataclass(frozen=True)
class LimitFinding:
    node: str
    location: Location
    message: str
    hint: str


class LaunchLimitsExceeded(Exception):
    def __init__(self, findings: list[LimitFinding]) -> None:
        self.findings = findings
        super().__init__("; ".join(f"{f.location}: {f.message}" for f in findings))


def check_launch_resources(plan: Plan, modules: Modules) -> list[LimitFinding]:
    device = modules.device
    cu, call = device.driver.cu, device.driver.call
    attributes = cu.CUfunction_attribute
    findings: list[LimitFinding] = []
    seen: set[Location] = set()
    for root in (plan.init, plan.step):
        if root is None:
            continue
        for node in plan.leaves(root):
            # a child graph used twice is one launch in the source: report it once
            if not isinstance(node, KernelNodeSpec) or node.location in seen:
                continue
            seen.add(node.location)
            function = modules.function(SCOPE, node.module, node.function)

            def attribute(name: str) -> int:
                return call("cuFuncGetAttribute", getattr(attributes, f"CU_FUNC_ATTRIBUTE_{name}"), function)

            threads = node.block[0] * node.block[1] * node.block[2]
            static_shared = attribute("SHARED_SIZE_BYTES")
            registers = attribute("NUM_REGS")
            kernel_max = attribute("MAX_THREADS_PER_BLOCK")
            on = f"{device.name} ({device.arch})"
            if threads > device.max_threads_per_block:
                findings.append(LimitFinding(node.name, node.location,
                    f"`{node.function}` is launched with {threads} threads per block; {on} allows "
                    f"{device.max_threads_per_block}", "use more blocks of fewer threads"))
            elif registers * threads > device.max_registers_per_block or threads > kernel_max:
                findings.append(LimitFinding(node.name, node.location,
                    f"`{node.function}` uses {registers} registers per thread: {threads} threads need "
                    f"{registers * threads}, {on} has {device.max_registers_per_block} per block "
                    f"(at most {kernel_max} threads of this kernel)",
                    f"launch at most {kernel_max} threads per block, or give the kernel "
                    "`__launch_bounds__` so the compiler uses fewer registers"))
            if static_shared + node.shared_bytes > device.max_shared_per_block:
                findings.append(LimitFinding(node.name, node.location,
                    f"`{node.function}` needs {static_shared} bytes of static and {node.shared_bytes} of "
                    f"dynamic shared memory; a block on {on} has at most {device.max_shared_per_block}",
                    "use less shared memory per block, or split the work across blocks"))
    return findings
