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
    for testing that verification notices a node missing from the graph.

    `flatten` adds child graphs' nodes to their parent instead of child graph nodes, with the
    same dependencies: what the driver itself does when it instantiates a graph (seen on an
    H200). The profiler builds its graph so, because instantiation gives a child graph's nodes
    new ids without reporting them as clones (CUPTI's GRAPHNODE_CLONED), while nodes added to
    the graph itself it does report, so every activity record leads back to a plan node."""

    def __init__(self, plan: Plan, root: int, buffers: BufferSet, modules: Modules, device: Device,
                 stream, drop: frozenset[str] = frozenset(), flatten: bool = False) -> None:
        self.plan, self.buffers, self.modules, self.device = plan, buffers, modules, device
        self.drop = drop
        self.flatten = flatten
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

    def _build(self, index: int, top: bool = False):
        spec = self.plan.graphs[index]
        graph = self.call("cuGraphCreate", 0)
        self.graphs.append(graph)
        self._add_body(graph, spec, [], top)
        return graph

    def _add_body(self, graph, spec, entry: list, top: bool = False) -> list:
        """Adds `spec`'s nodes to `graph`, its first nodes after `entry`; returns the handles
        that later nodes must follow (its last nodes, or `entry` when it has none)."""
        predecessors: list[list[int]] = [[] for _ in spec.nodes]
        for a, b in spec.edges:
            predecessors[b].append(a)
        ends: list[list] = []  # per node: the handles a successor depends on
        for node in spec.nodes:
            deps = [h for p in predecessors[node.id] for h in ends[p]] if predecessors[node.id] else entry
            ends.append(self._add(graph, node, deps, spec.scope))
            if top and len(ends[-1]) == 1:
                self.root_nodes[node.name] = ends[-1][0]
        followed = {a for a, _ in spec.edges}
        return [h for node in spec.nodes if node.id not in followed for h in ends[node.id]] or entry

    def _add(self, graph, node: NodeSpec, deps: list, scope: str) -> list:
        if node.name in self.drop:
            return [self.call("cuGraphAddEmptyNode", graph, deps, len(deps))]
        if isinstance(node, ChildGraphNodeSpec):
            if self.flatten:
                return self._add_body(graph, self.plan.graphs[node.graph], deps)
            child = self._build(node.graph)
            return [self.call("cuGraphAddChildGraphNode", graph, deps, len(deps), child)]
        self.node_count += 1
        handle = self._add_leaf(graph, node, deps, scope)
        self.leaf_nodes[node.name] = handle
        return [handle]

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
