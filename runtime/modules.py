"""Kernel modules: the compiled binaries of the plan's modules (built for the device's own
architecture before the runtime starts), loaded once per scope. A scope is one child graph's
instance, or `eager` for work launched outside graphs, so no CUfunction is ever shared
between them."""

from __future__ import annotations

from collections.abc import Sequence

from .driver import Device

# Shared memory, static and dynamic together, every block may use without opting in: beyond
# it the function's dynamic limit must be raised to what the launch asks for.
SHARED_WITHOUT_OPT_IN = 48 * 1024


class Modules:
    def __init__(self, binaries: Sequence[bytes], device: Device) -> None:
        self.binaries = binaries  # one per plan module, by index
        self.device = device
        self._loaded: dict[tuple[str, int], object] = {}
        self._functions: dict[tuple[str, int, str], object] = {}
        self._static_shared: dict[tuple[str, int, str], int] = {}

    def function(self, scope: str, module: int, name: str, shared_bytes: int = 0):
        call = self.device.driver.call
        key = (scope, module, name)
        if key not in self._functions:
            if (scope, module) not in self._loaded:
                self._loaded[(scope, module)] = call("cuModuleLoadData", self.binaries[module])
            function = call("cuModuleGetFunction", self._loaded[(scope, module)], name.encode())
            self._functions[key] = function
        function = self._functions[key]
        if shared_bytes:
            attributes = self.device.driver.cu.CUfunction_attribute
            if key not in self._static_shared:
                self._static_shared[key] = call("cuFuncGetAttribute", attributes.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                                function)
            if self._static_shared[key] + shared_bytes > SHARED_WITHOUT_OPT_IN:
                call("cuFuncSetAttribute", function, attributes.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                     shared_bytes)
        return function

    @property
    def instance_count(self) -> int:
        return len(self._loaded)

    @property
    def scopes(self) -> set[str]:
        return {scope for scope, _ in self._loaded}

    def close(self) -> None:
        for module in self._loaded.values():
            self.device.driver.call("cuModuleUnload", module)
        self._loaded.clear()
        self._functions.clear()
