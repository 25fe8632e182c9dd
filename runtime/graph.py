"""Building the CUDA graph explicitly from a plan: `cuGraphAddKernelNode`, memset and memcpy
nodes, `cuGraphAddChildGraphNode` for child graphs, `cuGraphAddNode` for conditional nodes
(whose body graphs the driver creates and pipec fills like any other), each node added with its
dependencies. No stream capture anywhere. Instantiated and uploaded once; a replay is one
`cuGraphLaunch`."""

from __future__ import annotations

import inspect

from ..compiler.plan_schema import (
    ChildGraphNodeSpec, CollectiveNodeSpec, ConditionalNodeSpec, KernelNodeSpec, MemcpyNodeSpec, MemsetNodeSpec, NodeSpec,
    Plan,
)
from .collectives import Collectives, require_collectives
from .driver import Device, NoDevice
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
                 stream, drop: frozenset[str] = frozenset(), flatten: bool = False,
                 collectives: Collectives | None = None) -> None:
        self.plan, self.buffers, self.modules, self.device = plan, buffers, modules, device
        self.collectives = collectives  # records collective nodes (runtime/collectives.py)
        self.drop = drop
        self.flatten = flatten
        self.call, self.cu = device.driver.call, device.driver.cu
        self.graphs: list = []
        self.arguments: dict[str, KernelArgs] = {}  # every kernel node's arguments, by node name
        self.root_nodes: dict[str, object] = {}  # top-level node handles, by node name
        # Every kernel, memset and memcpy node's handle at any depth, by node name: what a
        # profiler maps graph node ids back to.
        self.leaf_nodes: dict[str, object] = {}
        # The child graph nodes that embed a leaf (a clone of the graph it was added to), by name.
        self.embedded_in: dict[str, list] = {}
        self.handles: dict[int, object] = {}  # conditional handles, by the plan's handle index
        self.node_count = 0
        self.exec = None
        check_driver_for_conditionals(plan, root, device.driver_version)
        try:
            self.root = self._build(root, top=True)
            self.exec = self.call("cuGraphInstantiate", self.root, 0)
            self.call("cuGraphUpload", self.exec, stream)
        except BaseException:
            self.close()
            raise

    def _build(self, index: int, top: bool = False):
        graph = self.call("cuGraphCreate", 0)
        self.graphs.append(graph)
        self._add_body(graph, self.plan.graphs[index], [], top)
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
        if isinstance(node, KernelNodeSpec):
            self._create_handles(graph, node)  # even when dropped: the node it decides needs it
        if node.name in self.drop:
            return [self.call("cuGraphAddEmptyNode", graph, deps, len(deps))]
        if isinstance(node, ChildGraphNodeSpec):
            if self.flatten:
                return self._add_body(graph, self.plan.graphs[node.graph], deps)
            child = self._build(node.graph)
            handle = self.call("cuGraphAddChildGraphNode", graph, deps, len(deps), child)
            for leaf in self.plan.leaves(node.graph):  # innermost child graph node first
                self.embedded_in.setdefault(leaf.name, []).append(handle)
            return [handle]
        if isinstance(node, ConditionalNodeSpec):
            return [self._add_conditional(graph, node, deps)]
        if isinstance(node, CollectiveNodeSpec):
            # the recorded NCCL call as a child graph (the driver clones the recording into it)
            recording = require_collectives(self.collectives, node).record(node)
            return [self.call("cuGraphAddChildGraphNode", graph, deps, len(deps), recording.graph)]
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
        args = KernelArgs(node, self.buffers, self.handles)
        self.arguments[node.name] = args
        params = self.cu.CUDA_KERNEL_NODE_PARAMS()
        params.func = self.modules.function(scope, node.module, node.function, node.shared_bytes)
        params.gridDimX, params.gridDimY, params.gridDimZ = node.grid
        params.blockDimX, params.blockDimY, params.blockDimZ = node.block
        params.sharedMemBytes = node.shared_bytes
        params.kernelParams = args.address
        return params

    def _create_handles(self, graph, node: KernelNodeSpec) -> None:
        """The handle a deciding kernel sets, created on the graph that holds its conditional
        node (the kernel before the node comes first). Each launch starts with the handle at
        0 (`CU_GRAPH_COND_ASSIGN_DEFAULT`): a node whose kernel did not run runs no body."""
        for arg in node.args:
            if arg.kind == "handle" and int(arg.value) not in self.handles:  # the handle's index
                self.handles[int(arg.value)] = self.call(
                    "cuGraphConditionalHandleCreate", graph, self.device.context, 0,
                    self.cu.CU_GRAPH_COND_ASSIGN_DEFAULT)

    def _add_conditional(self, graph, node: ConditionalNodeSpec, deps: list):
        cu = self.cu
        params = cu.CUgraphNodeParams()
        params.type = cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle = self.handles[node.handle]
        params.conditional.type = getattr(cu.CUgraphConditionalNodeType, f"CU_GRAPH_COND_TYPE_{node.type.upper()}")
        params.conditional.size = len(node.bodies)
        params.conditional.ctx = self.device.context
        handle = add_node(self.call, cu, graph, deps, params)
        # The driver creates the body graphs and owns them with the node: filled, never destroyed.
        for body, index in zip(params.conditional.phGraph_out, node.bodies):
            self._add_body(cu.CUgraph(int(body)), self.plan.graphs[index], [])
        return handle

    def update_kernel(self, node: KernelNodeSpec, scope: str) -> None:
        """New arguments and launch shape for a kernel node of the executable graph, for its
        next launches (those enqueued already run as they were)."""
        if node.name in self.drop:
            return
        handle = self.leaf_nodes[node.name]
        for child_node in self.embedded_in.get(node.name, ()):  # the node's clone in each embedding
            handle = self.call("cuGraphNodeFindInClone", handle,
                               self.call("cuGraphChildGraphNodeGetGraph", child_node))
        self.call("cuGraphExecKernelNodeSetParams", self.exec, handle, self._kernel_params(node, scope))

    def close(self) -> None:
        if self.exec is not None:
            self.call("cuGraphExecDestroy", self.exec)
            self.exec = None
        for graph in self.graphs:
            self.call("cuGraphDestroy", graph)
        self.graphs.clear()


def add_node(call, cu, graph, deps: list, params):
    """`cuGraphAddNode`: cuda-bindings 13 takes the dependencies' edge data as well (graph,
    dependencies, edge data, count, params); 12.x takes four arguments."""
    if len(inspect.signature(cu.cuGraphAddNode).parameters) >= 5:
        edges = [cu.CUgraphEdgeData() for _ in deps]
        return call("cuGraphAddNode", graph, deps, edges, len(deps), params)
    return call("cuGraphAddNode", graph, deps, len(deps), params)


ELSE_AND_SWITCH_DRIVER = 12080  # CUDA 12.8: IF nodes with an else body, and SWITCH nodes


def check_driver_for_conditionals(plan: Plan, root: int, version: int) -> None:
    """Every driver pipec opens has IF and WHILE nodes (12.4); else bodies and switches need 12.8."""
    if version >= ELSE_AND_SWITCH_DRIVER:
        return
    for graph in plan.graph_tree(root):
        for node in graph.nodes:
            if isinstance(node, ConditionalNodeSpec) and (node.type == "switch" or len(node.bodies) > 1):
                what = "`switch`" if node.type == "switch" else "`if` with `else`"
                raise NoDevice(f"the CUDA driver supports API {version // 1000}.{version % 1000 // 10}; "
                               f"{what} on the device ({node.location}) needs 12.8 or newer")
