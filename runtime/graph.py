"""Building the CUDA graph explicitly from a plan: `cuGraphAddKernelNode`, memset and memcpy
nodes, `cuGraphAddChildGraphNode` for child graphs, `cuGraphAddNode` for conditional nodes
(whose body graphs the driver creates and pipec fills like any other), each node added with its
dependencies. A GEMM node is its one cuBLASLt call recorded by runtime/library.py (the only
stream capture in pipec, scoped to that call) and added as a child graph node. Instantiated and
uploaded once; a replay is one `cuGraphLaunch`."""

from __future__ import annotations

import inspect

from ..plan.schema import (
    ChildGraphNodeSpec, CollectiveNodeSpec, ConditionalNodeSpec, GemmNodeSpec, KernelNodeSpec,
    MemcpyNodeSpec, MemsetNodeSpec, NodeSpec, Plan,
)
from .collectives import Collectives, require_collectives
from .driver import Device, NoDevice
from .gemm_nodes import Gemms
from .kernel_params import KernelArgs
from .library import graph_nodes, record_call
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
    the graph itself it does report, so every activity record leads back to a plan node. For
    the same reason a GEMM node's recorded nodes are copied into the graph itself
    (`library_nodes`), instead of a child graph node holding them.

    A graph whose programmatic edges start or end at child graph nodes opens pipec's own child
    graphs the same way (`open_children`: an edge joins nodes of one graph), and keeps each
    library call's recording whole in a child graph node: copied, a recording runs slower
    (c51_step at HIDDEN 512 on an H200: 111 us a step against 108 with child graph nodes).

    `gemms` realises the GEMM nodes (the pipeline's, so that the graph records each node's call
    with the algorithm its eager launches use)."""

    def __init__(self, plan: Plan, root: int, buffers: BufferSet, modules: Modules, device: Device,
                 stream, drop: frozenset[str] = frozenset(), flatten: bool = False,
                 gemms: Gemms | None = None, collectives: Collectives | None = None) -> None:
        self.plan, self.buffers, self.modules, self.device = plan, buffers, modules, device
        self.gemms = gemms
        self.collectives = collectives  # records collective nodes (runtime/collectives.py)
        self.drop = drop
        self.call, self.cu = device.driver.call, device.driver.cu
        self.graphs: list = []
        self.arguments: dict[str, KernelArgs] = {}  # every kernel node's arguments, by node name
        self.root_nodes: dict[str, object] = {}  # top-level node handles, by node name
        # Every kernel, memset and memcpy node's handle at any depth, by node name: what a
        # profiler maps graph node ids back to.
        self.leaf_nodes: dict[str, object] = {}
        # The child graph nodes that embed a leaf (a clone of the graph it was added to), by name.
        self.embedded_in: dict[str, list] = {}
        # The kernels each GEMM node's recording launches (names where the driver reports them).
        self.library_kernels: dict[str, tuple[str, ...]] = {}
        # Flattened: the nodes copied from each GEMM node's recording, by node name.
        self.library_nodes: dict[str, list] = {}
        self.handles: dict[int, object] = {}  # conditional handles, by the plan's handle index
        self.node_count = 0
        self.programmatic_edges = 0
        # Programmatic edges need compute capability 9.0; below it every edge is ordinary
        # (the kernels' waits compile to nothing there, kernels/pdl.cuh).
        self.programmatic_launch = supports_programmatic_launch(device.arch)
        self.kernel_nodes: set[int] = set()  # the kernel nodes added so far, the ends of programmatic edges
        # An edge between child graph nodes is programmatic between the kernels at their ends,
        # which only an opened child graph lets the parent join.
        self.flatten = flatten
        self.open_children = flatten or (self.programmatic_launch and programmatic_at_child_graphs(plan, root))
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

    def _add_body(self, graph, spec, entry: list, top: bool = False, entry_early: list | None = None) -> list:
        """Adds `spec`'s nodes to `graph`, its first nodes after `entry` (and, over programmatic
        edges, `entry_early`); returns the handles that later nodes must follow (its last nodes,
        or `entry` when it has none)."""
        predecessors: list[list[int]] = [[] for _ in spec.nodes]
        for a, b in spec.edges:
            predecessors[b].append(a)
        programmatic = spec.programmatic() if self.programmatic_launch else set()
        ends: list[list] = []  # per node: the handles a successor depends on
        for node in spec.nodes:
            preds = predecessors[node.id]
            if preds:
                deps = [h for p in preds if (p, node.id) not in programmatic for h in ends[p]]
                early = [h for p in preds if (p, node.id) in programmatic for h in ends[p]]
            else:
                deps, early = list(entry), list(entry_early or ())
            ends.append(self._add(graph, node, deps, early, spec.scope))
            if top and len(ends[-1]) == 1:
                self.root_nodes[node.name] = ends[-1][0]
        followed = {a for a, _ in spec.edges}
        return [h for node in spec.nodes if node.id not in followed for h in ends[node.id]] or entry

    def _add(self, graph, node: NodeSpec, deps: list, early: list, scope: str) -> list:
        """One node after `deps`, and after `early` over programmatic edges: those join two kernel
        nodes, added after the consumer with edge data; any other is added as an ordinary edge
        (a dropped node, a child graph that is not opened)."""
        if isinstance(node, ChildGraphNodeSpec) and self.open_children:
            return self._add_body(graph, self.plan.graphs[node.graph], deps, entry_early=early)
        kernel = isinstance(node, KernelNodeSpec) and node.name not in self.drop
        producers = [h for h in early if int(h) in self.kernel_nodes] if kernel else []
        deps = deps + [h for h in early if not any(h is p for p in producers)]
        if isinstance(node, KernelNodeSpec):
            self._create_handles(graph, node)  # even when dropped: the node it decides needs it
        if node.name in self.drop:
            return [self.call("cuGraphAddEmptyNode", graph, deps, len(deps))]
        if isinstance(node, ChildGraphNodeSpec):
            child = self._build(node.graph)
            handle = self.call("cuGraphAddChildGraphNode", graph, deps, len(deps), child)
            for leaf in self.plan.leaves(node.graph):  # innermost child graph node first
                self.embedded_in.setdefault(leaf.name, []).append(handle)
            return [handle]
        if isinstance(node, ConditionalNodeSpec):
            return [self._add_conditional(graph, node, deps)]
        self.node_count += 1
        if isinstance(node, (GemmNodeSpec, CollectiveNodeSpec)):
            return self._add_library(graph, node, deps)
        handle = self._add_leaf(graph, node, deps, scope)
        self.leaf_nodes[node.name] = handle
        if kernel:
            self.kernel_nodes.add(int(handle))
            for producer in producers:
                add_programmatic_dependency(self.call, self.cu, graph, producer, handle)
                self.programmatic_edges += 1
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

    def _add_library(self, graph, node: GemmNodeSpec | CollectiveNodeSpec, deps: list) -> list:
        """A library node: its one call (cuBLASLt's or NCCL's) recorded, as a child graph node
        (which holds its own clone of the recording, so the recording goes); flattened, the
        recording's nodes themselves. Returns the handles a successor depends on."""
        if isinstance(node, GemmNodeSpec):
            assert self.gemms is not None, "a plan with GEMM nodes is built with the pipeline's Gemms"
            op = self.gemms.op(node)
            recording = record_call(self.device, op.what, op.enqueue)
        else:
            recording = require_collectives(self.collectives, node).record(node)
        self.library_kernels[node.name] = recording.kernels
        try:
            if self.flatten:
                self.library_nodes[node.name], ends = copy_nodes(self.call, self.cu, self.device.context,
                                                                  recording.graph, graph, deps)
                return ends
            handle = self.call("cuGraphAddChildGraphNode", graph, deps, len(deps), recording.graph)
            self.leaf_nodes[node.name] = handle
            return [handle]
        finally:
            recording.close(self.device)

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


def copy_nodes(call, cu, context, source, graph, deps: list) -> tuple[list, list]:
    """The kernel and memset nodes of `source` (a library's recording) added to `graph`, with
    their dependencies among them (the first ones after `deps`) and each kernel's launch
    attributes (a cluster shape, for one). Returns the copies and the copies no other follows."""
    nodes = graph_nodes(call, source)
    predecessors = {int(n): [int(p) for p in _dependencies(call, n)] for n in nodes}
    kernel = cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_KERNEL
    copies: dict[int, object] = {}
    while len(copies) < len(nodes):  # a node after every node it depends on
        for node in nodes:
            if int(node) in copies or any(p not in copies for p in predecessors[int(node)]):
                continue
            after = [copies[p] for p in predecessors[int(node)]] or deps
            if call("cuGraphNodeGetType", node) == kernel:
                copy = call("cuGraphAddKernelNode", graph, after, len(after), call("cuGraphKernelNodeGetParams", node))
                call("cuGraphKernelNodeCopyAttributes", copy, node)
            else:  # a memset: a recording holds nothing else (runtime/library.py)
                copy = call("cuGraphAddMemsetNode", graph, after, len(after), call("cuGraphMemsetNodeGetParams", node),
                            context)
            copies[int(node)] = copy
    followed = {p for ps in predecessors.values() for p in ps}
    # An empty recording leaves its successors after what came before it, as a body does.
    return list(copies.values()), [c for n, c in copies.items() if n not in followed] or deps


def _dependencies(call, node) -> list:
    """The nodes `node` depends on (cuda-bindings 13 returns their edge data too)."""
    count = call("cuGraphNodeGetDependencies", node, 0)[-1]
    return list(call("cuGraphNodeGetDependencies", node, count)[0])[:count] if count else []


def add_node(call, cu, graph, deps: list, params):
    """`cuGraphAddNode`: cuda-bindings 13 takes the dependencies' edge data as well (graph,
    dependencies, edge data, count, params); 12.x takes four arguments."""
    if len(inspect.signature(cu.cuGraphAddNode).parameters) >= 5:
        edges = [cu.CUgraphEdgeData() for _ in deps]
        return call("cuGraphAddNode", graph, deps, edges, len(deps), params)
    return call("cuGraphAddNode", graph, deps, len(deps), params)


def programmatic_at_child_graphs(plan: Plan, root: int) -> bool:
    """Whether a programmatic edge of the graph tree starts or ends at a child graph node."""
    return any(isinstance(graph.nodes[a], ChildGraphNodeSpec) or isinstance(graph.nodes[b], ChildGraphNodeSpec)
               for graph in plan.graph_tree(root) for a, b in graph.programmatic())


def supports_programmatic_launch(arch: str) -> bool:
    """Whether a device of this architecture (`sm_90`) has programmatic dependent launch."""
    return int(arch.removeprefix("sm_").rstrip("abf")) >= 90


def add_programmatic_dependency(call, cu, graph, producer, consumer) -> None:
    """One programmatic edge (CUDA 12.3+): from the producer's programmatic port, so the consumer
    may start once every block of the producer has triggered (`griddepcontrol.launch_dependents`)
    or exited, and sees the producer's writes after its `griddepcontrol.wait`. cuda-bindings 13
    takes the edge data in `cuGraphAddDependencies`; 12.x in `cuGraphAddDependencies_v2`."""
    edge = cu.CUgraphEdgeData()
    edge.type = cu.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    edge.from_port = PROGRAMMATIC_PORT
    if len(inspect.signature(cu.cuGraphAddDependencies).parameters) >= 5:
        call("cuGraphAddDependencies", graph, [producer], [consumer], [edge], 1)
    else:
        call("cuGraphAddDependencies_v2", graph, [producer], [consumer], [edge], 1)


PROGRAMMATIC_PORT = 1  # CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, a #define the bindings do not all export
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
