"""Building the CUDA graph explicitly from a plan: `cuGraphAddKernelNode`, memset and memcpy
nodes, `cuGraphAddChildGraphNode` for child graphs, each node added with its dependencies.
No stream capture anywhere. Instantiated and uploaded once; a replay is one `cuGraphLaunch`."""

from __future__ import annotations

from ..compiler.plan_schema import (
    ChildGraphNodeSpec, KernelNodeSpec, MemcpyNodeSpec, MemsetNodeSpec, NodeSpec, Plan,
)
from .driver import Device
from .launch import KernelArgs
from .memory import BufferSet
from .modules import Modules


class BuiltGraph:
    """The step as a CUgraph and its executable instance.

    `drop` names nodes to build as empty nodes instead (same edges, no work): a planted fault
    for testing that verification notices a node missing from the graph."""

    def __init__(self, plan: Plan, root: int, buffers: BufferSet, modules: Modules, device: Device,
                 stream, drop: frozenset[str] = frozenset()) -> None:
        self.plan, self.buffers, self.modules, self.device = plan, buffers, modules, device
        self.drop = drop
        self.call, self.cu = device.driver.call, device.driver.cu
        self.graphs: list = []
        self.arguments: dict[str, KernelArgs] = {}  # every kernel node's arguments, by node name
        self.root_nodes: dict[str, object] = {}  # top-level node handles, by node name
        # Every kernel, memset and memcpy node's handle at any depth, by node name: what a
        # profiler maps graph node ids back to.
        self.leaf_nodes: dict[str, object] = {}
        self.node_count = 0
        self.exec = None
        try:
            self.root = self._build(root, top=True)
            self.exec = self.call("cuGraphInstantiate", self.root, 0)
            self.call("cuGraphUpload", self.exec, stream)
        except BaseException:
            self.close()
            raise

    def _build(self, index: int, top: bool = False, into=None):
        """The nodes of plan graph `index`, added to `into` (a child graph node's embedded
        graph) or to a new graph."""
        spec = self.plan.graphs[index]
        graph = into
        if graph is None:
            graph = self.call("cuGraphCreate", 0)
            self.graphs.append(graph)
        predecessors: list[list[int]] = [[] for _ in spec.nodes]
        for a, b in spec.edges:
            predecessors[b].append(a)
        handles: list = []
        for node in spec.nodes:
            deps = [handles[p] for p in predecessors[node.id]]
            handle = self._add(graph, node, deps, spec.scope)
            handles.append(handle)
            if top:
                self.root_nodes[node.name] = handle
        return graph

    def _add(self, graph, node: NodeSpec, deps: list, scope: str):
        if node.name in self.drop:
            return self.call("cuGraphAddEmptyNode", graph, deps, len(deps))
        if isinstance(node, ChildGraphNodeSpec):
            # The driver embeds a copy of the graph it is given, so an empty one goes in and the
            # nodes are added to the embedded copy: the handles kept in `leaf_nodes` are then
            # the nodes that instantiation clones, which a profiler maps its records back to.
            empty = self.call("cuGraphCreate", 0)
            try:
                handle = self.call("cuGraphAddChildGraphNode", graph, deps, len(deps), empty)
            finally:
                self.call("cuGraphDestroy", empty)
            self._build(node.graph, into=self.call("cuGraphChildGraphNodeGetGraph", handle))
            return handle
        self.node_count += 1
        handle = self._add_leaf(graph, node, deps, scope)
        self.leaf_nodes[node.name] = handle
        return handle

    def _add_leaf(self, graph, node: NodeSpec, deps: list, scope: str):
        if isinstance(node, KernelNodeSpec):
            return self.call("cuGraphAddKernelNode", graph, deps, len(deps), self._kernel_params(node, scope))
        if isinstance(node, MemsetNodeSpec):
            params = self.cu.CUDA_MEMSET_NODE_PARAMS()
            params.dst = self.buffers.pointer(node.buffer, node.byte_offset)
            params.elementSize = node.element_size
            params.value = node.value
            params.width = node.count
            params.height = 1
            params.pitch = node.count * node.element_size
            return self.call("cuGraphAddMemsetNode", graph, deps, len(deps), params, self.device.context)
        assert isinstance(node, MemcpyNodeSpec)
        params = self.cu.CUDA_MEMCPY3D()
        params.srcMemoryType = self.cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
        params.srcDevice = self.buffers.pointer(node.src, node.src_offset)
        params.dstMemoryType = self.cu.CUmemorytype.CU_MEMORYTYPE_DEVICE
        params.dstDevice = self.buffers.pointer(node.dst, node.dst_offset)
        params.WidthInBytes = node.nbytes
        params.Height = 1
        params.Depth = 1
        return self.call("cuGraphAddMemcpyNode", graph, deps, len(deps), params, self.device.context)

    def _kernel_params(self, node: KernelNodeSpec, scope: str):
        args = KernelArgs(node, self.buffers)
        self.arguments[node.name] = args
        params = self.cu.CUDA_KERNEL_NODE_PARAMS()
        params.func = self.modules.function(scope, node.module, node.function, node.shared_bytes)
        params.gridDimX, params.gridDimY, params.gridDimZ = node.grid
        params.blockDimX, params.blockDimY, params.blockDimZ = node.block
        params.sharedMemBytes = node.shared_bytes
        params.kernelParams = args.address
        return params

    def close(self) -> None:
        if self.exec is not None:
            self.call("cuGraphExecDestroy", self.exec)
            self.exec = None
        for graph in self.graphs:
            self.call("cuGraphDestroy", graph)
        self.graphs.clear()
