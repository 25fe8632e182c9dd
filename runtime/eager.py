"""The same nodes as the graph, launched one by one on a stream in program order (a
topological order of the DAG), from the `eager` module instance. Everything a launch needs is
prepared once; running is one driver call per node."""

from __future__ import annotations

from dataclasses import dataclass

from ..compiler.plan_schema import KernelNodeSpec, MemcpyNodeSpec, MemsetNodeSpec, NodeSpec, Plan
from .driver import CudaError, Driver
from .launch import KernelArgs
from .memory import BufferSet
from .modules import Modules

EAGER_SCOPE = "eager"


class NodeFailed(Exception):
    def __init__(self, node: NodeSpec, error: CudaError) -> None:
        self.node, self.error = node, error
        super().__init__(f"node `{node.name}` ({node.location}): {error}")


@dataclass
class _Op:
    function: object
    args: tuple
    node: NodeSpec
    call: str


class EagerProgram:
    def __init__(self, plan: Plan, graph: int, buffers: BufferSet, modules: Modules, stream) -> None:
        self.driver: Driver = modules.device.driver
        self.nodes = plan.leaves(graph)
        self.ops: list[_Op] = []
        self._keep: list[KernelArgs] = []
        for node in self.nodes:
            self.ops.append(self._prepare(node, buffers, modules, stream))

    def _prepare(self, node: NodeSpec, buffers: BufferSet, modules: Modules, stream) -> _Op:
        cu = self.driver.cu
        if isinstance(node, KernelNodeSpec):
            function = modules.function(EAGER_SCOPE, node.module, node.function, node.shared_bytes)
            args = KernelArgs(node, buffers)
            self._keep.append(args)
            return _Op(cu.cuLaunchKernel, (function, *node.grid, *node.block, node.shared_bytes,
                                           stream, args.address, 0), node, "cuLaunchKernel")
        if isinstance(node, MemsetNodeSpec):
            name = {1: "cuMemsetD8Async", 2: "cuMemsetD16Async", 4: "cuMemsetD32Async"}[node.element_size]
            pointer = buffers.pointer(node.buffer, node.byte_offset)
            return _Op(getattr(cu, name), (pointer, node.value, node.count, stream), node, name)
        assert isinstance(node, MemcpyNodeSpec)
        return _Op(cu.cuMemcpyDtoDAsync, (buffers.pointer(node.dst, node.dst_offset),
                                          buffers.pointer(node.src, node.src_offset), node.nbytes, stream),
                   node, "cuMemcpyDtoDAsync")

    def run(self, stream, *, synchronize_each: bool = False) -> None:
        """Launch every node once. `synchronize_each` waits after each node so that a fault is
        pinned on the node that caused it."""
        success, call = self.driver.success, self.driver.call
        for op in self.ops:
            err = op.function(*op.args)[0]
            if err != success:
                raise NodeFailed(op.node, CudaError(op.call, self.driver.error_name(err)))
            if synchronize_each:
                try:
                    call("cuStreamSynchronize", stream)
                except CudaError as error:
                    raise NodeFailed(op.node, error) from None
