"""The same nodes as the graph, launched one by one on a stream in program order (a
topological order of the DAG), from the `eager` module instance. Everything a launch needs is
prepared once; running is one driver call per node.

A conditional node is decided by the same generated kernel as in the graph; eager execution
waits for it, reads the decision it stored, and runs the chosen body (a loop body again while
the decision stays nonzero). `taken` counts, per conditional node, the bodies run: this is
the reference the graph's branches are verified against."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from ..plan.schema import (
    ChildGraphNodeSpec, CollectiveNodeSpec, ConditionalNodeSpec, GemmNodeSpec, KernelNodeSpec,
    MemcpyNodeSpec, MemsetNodeSpec, NodeSpec, Plan,
)
from ..errors import Error
from .collectives import Collectives, require_collectives
from .driver import CudaError, Driver
from .gemm_nodes import Gemms
from .graph import supports_programmatic_launch
from .kernel_params import KernelArgs
from .memory import BufferSet
from .modules import Modules

EAGER_SCOPE = "eager"


class NodeFailed(Error):
    def __init__(self, node: NodeSpec, error: CudaError) -> None:
        self.node, self.error = node, error
        super().__init__(f"node `{node.name}` ({node.location}): {error}")


@dataclass
class _Op:
    function: object
    args: tuple
    node: NodeSpec
    call: str


@dataclass
class _Branch:
    node: ConditionalNodeSpec
    decision: int  # the device address of the decision its kernel stored
    bodies: list[list]  # each a list of _Op and _Branch


def early_starters(plan: Plan, graph: int) -> set[str]:
    """The kernels a programmatic edge of the graph tree leads into (for an edge to a child graph
    node, the child graph's first nodes): eager execution launches them the same way."""
    def entries(node: NodeSpec) -> list[NodeSpec]:
        if not isinstance(node, ChildGraphNodeSpec):
            return [node]
        child = plan.graphs[node.graph]
        joined = {b for _, b in child.edges}
        return [e for inner in child.nodes if inner.id not in joined for e in entries(inner)]

    return {e.name for spec in plan.graph_tree(graph) for _, b in spec.programmatic() for e in entries(spec.nodes[b])}


def programmatic_launch_config(cu, node: KernelNodeSpec, stream):
    """A `cuLaunchKernelEx` configuration of the node's launch with programmatic stream
    serialization: the kernel may start before the launch before it on the stream has finished,
    as over a programmatic edge (CUDA 12.3+)."""
    attribute = cu.CUlaunchAttribute()
    attribute.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attribute.value.programmaticStreamSerializationAllowed = 1
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = node.grid
    config.blockDimX, config.blockDimY, config.blockDimZ = node.block
    config.sharedMemBytes = node.shared_bytes
    config.hStream = stream
    config.attrs = [attribute]
    config.numAttrs = 1
    return config


class EagerProgram:
    """`gemms` realises the GEMM nodes: the same calls, with the same algorithms, as the graph
    records; `collectives` the collective nodes, calling NCCL directly."""

    def __init__(self, plan: Plan, graph: int, buffers: BufferSet, modules: Modules, stream,
                 gemms: Gemms | None = None, collectives: Collectives | None = None) -> None:
        self.driver: Driver = modules.device.driver
        self.early_starters = early_starters(plan, graph) if supports_programmatic_launch(modules.device.arch) else set()
        self.gemms = gemms
        self.collectives = collectives
        self.nodes = plan.leaves(graph)
        self.ops: list[_Op] = []  # one per node of `nodes`, in that order
        self._keep: list[KernelArgs] = []
        self.program = self._prepare_graph(plan, graph, buffers, modules, stream)
        self.branching = any(isinstance(item, _Branch) for item in self.program)
        self.taken: dict[str, Counter] = {}  # conditional node -> body index -> times run
        self._decision = np.zeros(1, np.uint32)

    def _prepare_graph(self, plan: Plan, graph: int, buffers, modules, stream) -> list:
        items: list = []
        for node in plan.graphs[graph].nodes:
            if isinstance(node, ChildGraphNodeSpec):
                items += self._prepare_graph(plan, node.graph, buffers, modules, stream)
            elif isinstance(node, ConditionalNodeSpec):
                bodies = [self._prepare_graph(plan, b, buffers, modules, stream) for b in node.bodies]
                items.append(_Branch(node, buffers.pointer(node.control), bodies))
            else:
                op = self._prepare(node, buffers, modules, stream, node.name in self.early_starters)
                self.ops.append(op)
                items.append(op)
        return items

    def _prepare(self, node: NodeSpec, buffers: BufferSet, modules: Modules, stream, early: bool = False) -> _Op:
        """`early`: the node is the consumer of a programmatic edge in the graph, so it is launched
        with programmatic stream serialization, overlapping the launch before it as the graph does."""
        cu = self.driver.cu
        if isinstance(node, KernelNodeSpec):
            function = modules.function(EAGER_SCOPE, node.module, node.function, node.shared_bytes)
            args = KernelArgs(node, buffers)
            self._keep.append(args)
            if early:
                config = programmatic_launch_config(cu, node, stream)
                self._keep.append(config)
                return _Op(cu.cuLaunchKernelEx, (config, function, args.address, 0), node, "cuLaunchKernelEx")
            return _Op(cu.cuLaunchKernel, (function, *node.grid, *node.block, node.shared_bytes,
                                           stream, args.address, 0), node, "cuLaunchKernel")
        if isinstance(node, GemmNodeSpec):
            assert self.gemms is not None, "a plan with GEMM nodes runs with the pipeline's Gemms"
            return _Op(self.gemms.op(node).enqueue, (stream,), node, "cublasLtMatmul")
        if isinstance(node, MemsetNodeSpec):
            name = {1: "cuMemsetD8Async", 2: "cuMemsetD16Async", 4: "cuMemsetD32Async"}[node.element_size]
            pointer = buffers.pointer(node.buffer, node.byte_offset)
            return _Op(getattr(cu, name), (pointer, node.value, node.count, stream), node, name)
        if isinstance(node, CollectiveNodeSpec):
            return _Op(self._issue, (require_collectives(self.collectives, node), node, stream), node, "nccl")
        assert isinstance(node, MemcpyNodeSpec)
        return _Op(cu.cuMemcpyDtoDAsync, (buffers.pointer(node.dst, node.dst_offset),
                                          buffers.pointer(node.src, node.src_offset), node.nbytes, stream),
                   node, "cuMemcpyDtoDAsync")

    def _issue(self, collectives: Collectives, node: CollectiveNodeSpec, stream) -> tuple:
        """A collective as an op: NCCL's own errors raise; the result reads as the driver's."""
        collectives.issue(node, stream)
        return (self.driver.success,)

    def update_kernel(self, node: KernelNodeSpec, buffers: BufferSet, modules: Modules, stream) -> None:
        """Launch `node` with its new arguments and launch shape from now on."""
        op = next(op for op in self.ops if op.node.name == node.name)
        new = self._prepare(node, buffers, modules, stream, early=op.call == "cuLaunchKernelEx")
        op.function, op.args, op.node = new.function, new.args, new.node

    def run(self, stream, *, synchronize_each: bool = False) -> None:
        """Launch every node once. `synchronize_each` waits after each node so that a fault is
        pinned on the node that caused it."""
        self._run(self.program if self.branching else self.ops, stream, synchronize_each)

    def _run(self, items: list, stream, synchronize_each: bool) -> None:
        success, call = self.driver.success, self.driver.call
        for op in items:
            if isinstance(op, _Branch):
                self._run_branch(op, stream, synchronize_each)
                continue
            err = op.function(*op.args)[0]
            if err != success:
                raise NodeFailed(op.node, CudaError(op.call, self.driver.error_name(err)))
            if synchronize_each:
                try:
                    call("cuStreamSynchronize", stream)
                except CudaError as error:
                    raise NodeFailed(op.node, error) from None

    def _decided(self, branch: _Branch, stream) -> int:
        """The decision the branch's kernel stored, once everything before it has finished."""
        self.driver.call("cuStreamSynchronize", stream)
        self.driver.call("cuMemcpyDtoH", self._decision, branch.decision, 4)
        return int(self._decision[0])

    def _run_branch(self, branch: _Branch, stream, synchronize_each: bool) -> None:
        node, taken = branch.node, self.taken.setdefault(branch.node.name, Counter())
        decision = self._decided(branch, stream)
        if node.type == "while":
            while decision:
                taken[0] += 1
                self._run(branch.bodies[0], stream, synchronize_each)
                decision = self._decided(branch, stream)
            return
        # IF: nonzero runs the first body, zero the second (if any); SWITCH: body `decision`.
        chosen = (0 if decision else 1) if node.type == "if" else decision
        if chosen < len(branch.bodies):
            taken[chosen] += 1
            self._run(branch.bodies[chosen], stream, synchronize_each)
