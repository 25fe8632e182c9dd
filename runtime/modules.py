"""Kernel modules: compiled once per plan module for the device's architecture (cached on
disk), loaded once per scope. A scope is one child graph's instance, or `eager` for work
launched outside graphs, so no CUfunction is ever shared between them."""

from __future__ import annotations

from pathlib import Path

from ..compiler import kernels
from ..compiler.plan import Plan
from ..compiler.toolchain import get_toolchain
from .driver import Device, call, cu


class Modules:
    def __init__(self, plan: Plan, device: Device) -> None:
        self.plan = plan
        self.device = device
        self.toolchain = get_toolchain(plan.compiler)
        self._cubins: dict[int, bytes] = {}
        self._loaded: dict[tuple[str, int], object] = {}
        self._functions: dict[tuple[str, int, str], object] = {}

    def cubin(self, index: int) -> bytes:
        if index not in self._cubins:
            spec = self.plan.modules[index]
            if spec.source is not None:
                binary = kernels.compile_generated_cubin(spec.name, spec.source, self.toolchain, self.device.arch)
            else:
                binary = kernels.compile_cubin(Path(spec.path), tuple(Path(d) for d in spec.include_dirs),
                                               self.toolchain, self.device.arch)
            self._cubins[index] = binary
        return self._cubins[index]

    def function(self, scope: str, module: int, name: str, shared_bytes: int = 0):
        key = (scope, module, name)
        if key not in self._functions:
            if (scope, module) not in self._loaded:
                self._loaded[(scope, module)] = call("cuModuleLoadData", self.cubin(module))
            function = call("cuModuleGetFunction", self._loaded[(scope, module)], name.encode())
            self._functions[key] = function
        function = self._functions[key]
        if shared_bytes > 48 * 1024:
            if shared_bytes > self.device.max_shared_per_block:
                raise ValueError(f"`{name}` asks for {shared_bytes} bytes of shared memory; "
                                 f"{self.device.name} allows {self.device.max_shared_per_block}")
            attribute = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            call("cuFuncSetAttribute", function, attribute, shared_bytes)
        return function

    @property
    def instance_count(self) -> int:
        return len(self._loaded)

    @property
    def scopes(self) -> set[str]:
        return {scope for scope, _ in self._loaded}

    def close(self) -> None:
        for module in self._loaded.values():
            call("cuModuleUnload", module)
        self._loaded.clear()
        self._functions.clear()
