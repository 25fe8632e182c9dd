"""A stand-in for `cuda.bindings.driver` so the runtime runs on CPU: `Driver(FakeCuda(...))`.

Every function returns `(CUresult, *outputs)` like the real bindings and is recorded in
`calls`. Memory is host memory: an allocation is a NumPy array and its address is the
"device" pointer, so memsets, copies, mapped buffers, state save/load and verification's
snapshots really move bytes; `cuPointerGetAttribute` still tells `cuMemHostAlloc`'s (host)
from `cuMemAlloc`'s (device), and a copy node keeps the memory types it was made with. Kernels
do not run: a kernel launch or kernel node records the function and its argument values,
decoded from the `kernelParams` array at the moment the call is made (as the driver copies
them), using `param_sizes` (bytes of each parameter, by kernel name). A graph keeps its nodes, their dependencies and child graphs; launching an
instantiated graph performs its memset and memcpy nodes in the order they were added (a
topological order), like eager execution does, so the two sides of `verify` agree. An
executable graph is its source graph (no copy), and a child graph node embeds its graph itself,
so `cuGraphExecKernelNodeSetParams` rewrites the node that later launches run; streams only
record the events they wait for (nothing runs asynchronously).

Stream capture (what runtime/library.py does around one library call): work enqueued on a
capturing stream (`enqueue`: kernel launches, async memsets and copies, and whatever a fake
library enqueues, such as tests/fake_cublaslt.py's matmul) becomes nodes of the graph that
`cuStreamEndCapture` returns, in a chain; a host function (`cuLaunchHostFunc`) becomes a host
node. Outside a capture the same work runs at once.

The kernels pipec generates to decide conditional nodes (compiler/templates/conditions.cu.j2)
do run, on host memory, eagerly and in graphs: they store their decision and, in a graph, set
their handle, so a conditional node runs the bodies the real driver would run.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import itertools
import struct
from dataclasses import dataclass, field

import numpy as np


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97


class CUfunction_attribute(enum.IntEnum):
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class CUmemorytype(enum.IntEnum):
    CU_MEMORYTYPE_HOST = 1
    CU_MEMORYTYPE_DEVICE = 2
    CU_MEMORYTYPE_ARRAY = 3
    CU_MEMORYTYPE_UNIFIED = 4


class CUpointer_attribute(enum.IntEnum):
    CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2


class CUstream_flags(enum.IntEnum):
    CU_STREAM_NON_BLOCKING = 1


class CUevent_flags(enum.IntEnum):
    CU_EVENT_DISABLE_TIMING = 2


class CUstreamWaitValue_flags(enum.IntEnum):
    CU_STREAM_WAIT_VALUE_GEQ = 0


class CUgraphNodeType(enum.IntEnum):
    CU_GRAPH_NODE_TYPE_KERNEL = 0
    CU_GRAPH_NODE_TYPE_MEMCPY = 1
    CU_GRAPH_NODE_TYPE_MEMSET = 2
    CU_GRAPH_NODE_TYPE_HOST = 3
    CU_GRAPH_NODE_TYPE_GRAPH = 4
    CU_GRAPH_NODE_TYPE_EMPTY = 5
    CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7
    CU_GRAPH_NODE_TYPE_CONDITIONAL = 13


class CUstreamCaptureMode(enum.IntEnum):
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1
    CU_STREAM_CAPTURE_MODE_RELAXED = 2


class CUgraphConditionalNodeType(enum.IntEnum):
    CU_GRAPH_COND_TYPE_IF = 0
    CU_GRAPH_COND_TYPE_WHILE = 1
    CU_GRAPH_COND_TYPE_SWITCH = 2


class _Params:
    """The driver's parameter structs: attribute bags, as the bindings' are to Python."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({vars(self)})"


class CUDA_KERNEL_NODE_PARAMS(_Params):
    pass


class CUDA_MEMSET_NODE_PARAMS(_Params):
    pass


class CUDA_MEMCPY3D(_Params):
    pass


class CUDA_CONDITIONAL_NODE_PARAMS(_Params):
    pass


class CUgraphEdgeData(_Params):
    pass


class CUgraphDependencyType(enum.IntEnum):
    CU_GRAPH_DEPENDENCY_TYPE_DEFAULT = 0
    CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1


class CUlaunchAttributeID(enum.IntEnum):
    CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class CUlaunchAttributeValue(_Params):
    pass


class CUlaunchAttribute(_Params):
    def __init__(self) -> None:
        self.value = CUlaunchAttributeValue()


class CUlaunchConfig(_Params):
    pass


class CUgraphNodeParams(_Params):
    def __init__(self) -> None:
        self.conditional = CUDA_CONDITIONAL_NODE_PARAMS()


@dataclass(frozen=True)
class Handle:
    kind: str  # stream | event | module | function | graph | exec | context | device
    number: int
    name: str = ""  # functions: the kernel's name

    def __int__(self) -> int:
        return self.number


@dataclass
class Call:
    name: str
    args: tuple


@dataclass
class KernelLaunch:
    function: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[bytes, ...]  # each parameter's bytes, as the driver copied them
    run: object = None  # what a fake library's kernel does to memory when it runs (a callable)


@dataclass
class Memset:
    dst: int
    element_size: int
    value: int
    count: int


@dataclass
class Memcpy:
    dst: int
    src: int
    nbytes: int
    # the memory types its parameters give: pipec's own copies say DEVICE; cudaMemcpyDefault's
    # (NCCL's one-rank copies) say UNIFIED, for the driver to resolve by address
    src_type: CUmemorytype = CUmemorytype.CU_MEMORYTYPE_DEVICE
    dst_type: CUmemorytype = CUmemorytype.CU_MEMORYTYPE_DEVICE


@dataclass
class Conditional:
    type: CUgraphConditionalNodeType
    handle: Handle
    context: Handle
    bodies: list[FakeGraph]


@dataclass
class GraphNode:
    handle: Handle
    kind: str  # kernel | memset | memcpy | graph | empty | conditional | host
    deps: tuple[Handle, ...]
    work: KernelLaunch | Memset | Memcpy | Conditional | None = None
    child: FakeGraph | None = None
    programmatic: tuple[Handle, ...] = ()  # producers of programmatic edges into this node


@dataclass
class FakeGraph:
    handle: Handle
    nodes: list[GraphNode] = field(default_factory=list)

    def node(self, handle: Handle) -> GraphNode:
        return next(n for n in self.nodes if n.handle == handle)


@dataclass(frozen=True)
class FunctionAttributes:
    registers: int = 32
    static_shared: int = 0
    max_threads: int = 1024


H200 = dict(name="Fake H200", capability=(9, 0), multiprocessors=132, max_threads_per_block=1024,
            max_registers_per_block=65536, max_shared_per_block=232448)


class FakeCuda:
    CUresult = CUresult
    CUdevice_attribute = CUdevice_attribute
    CUfunction_attribute = CUfunction_attribute
    CUmemorytype = CUmemorytype
    CUpointer_attribute = CUpointer_attribute
    CUstream_flags = CUstream_flags
    CUstreamWaitValue_flags = CUstreamWaitValue_flags
    CUevent_flags = CUevent_flags
    CUDA_KERNEL_NODE_PARAMS = CUDA_KERNEL_NODE_PARAMS
    CUDA_MEMSET_NODE_PARAMS = CUDA_MEMSET_NODE_PARAMS
    CUDA_MEMCPY3D = CUDA_MEMCPY3D
    CUgraphNodeType = CUgraphNodeType
    CUstreamCaptureMode = CUstreamCaptureMode
    CUgraphConditionalNodeType = CUgraphConditionalNodeType
    CUgraphNodeParams = CUgraphNodeParams
    CUgraphEdgeData = CUgraphEdgeData
    CUgraphDependencyType = CUgraphDependencyType
    CUlaunchAttributeID = CUlaunchAttributeID
    CUlaunchAttribute = CUlaunchAttribute
    CUlaunchConfig = CUlaunchConfig
    CU_GRAPH_COND_ASSIGN_DEFAULT = 1
    CU_MEMHOSTALLOC_PORTABLE = 1
    CU_MEMHOSTALLOC_DEVICEMAP = 2
    # Calls that only succeed here: synchronisation (nothing runs asynchronously), contexts.
    ACCEPTED = ("cuInit", "cuCtxSetCurrent", "cuDevicePrimaryCtxRelease", "cuStreamSynchronize",
                "cuStreamWaitValue32", "cuStreamWaitEvent", "cuEventRecord", "cuEventSynchronize", "cuEventDestroy",
                "cuFuncSetAttribute", "cuGraphUpload", "cuGraphKernelNodeCopyAttributes")

    def __init__(self, *, param_sizes: dict[str, tuple[int, ...]], memory_bytes: int = 1 << 30,
                 function_attributes: dict[str, FunctionAttributes] | None = None, **device) -> None:
        self.device = {**H200, **device}
        self.param_sizes = param_sizes
        self.function_attributes = function_attributes or {}
        self.memory_bytes = memory_bytes
        self.calls: list[Call] = []
        self.allocations: dict[int, np.ndarray] = {}  # address -> the memory behind it
        self.host_allocations: set[int] = set()  # those of cuMemHostAlloc (pinned host memory)
        self.graphs: dict[Handle, FakeGraph] = {}
        self.bodies: dict[Handle, FakeGraph] = {}  # conditional nodes' bodies, owned by the node
        self.conditional_handles: dict[Handle, tuple[FakeGraph, Handle, int, int]] = {}  # graph, ctx, default, flags
        self.condition_values: dict[int, int] = {}  # handle number -> value set in this launch
        self.executables: dict[Handle, FakeGraph] = {}
        self.modules: dict[Handle, bytes] = {}
        self.launches: list[KernelLaunch] = []  # kernels launched, eagerly or in a graph
        self.serialized: list[KernelLaunch] = []  # those launched with programmatic stream serialization
        self.streams: set[Handle] = set()
        self.capturing: dict[Handle, FakeGraph] = {}  # stream -> the graph its capture records
        self._numbers = itertools.count(1)

    def __getattribute__(self, name: str):
        if name in FakeCuda.ACCEPTED:
            attribute = lambda *args: (CUresult.CUDA_SUCCESS,)
        else:
            attribute = object.__getattribute__(self, name)
        if name.startswith("cu") and callable(attribute):
            calls = object.__getattribute__(self, "calls")

            @functools.wraps(attribute)
            def recorded(*args):
                calls.append(Call(name, args))
                return attribute(*args)
            return recorded
        return attribute

    def named(self, *names: str) -> list[Call]:
        return [c for c in self.calls if c.name in names]

    def live(self) -> dict[str, int]:
        """What is still allocated or loaded: all zeros once a pipeline is closed."""
        return {"allocations": len(self.allocations), "graphs": len(self.graphs),
                "executables": len(self.executables), "modules": len(self.modules),
                "streams": len(self.streams)}

    # --- helpers ----------------------------------------------------------------------------

    def _handle(self, kind: str, name: str = "") -> Handle:
        return Handle(kind, next(self._numbers), name)

    def _memory(self, address: int, nbytes: int) -> np.ndarray:
        """The bytes at [address, address + nbytes), which must lie inside one allocation."""
        for start, array in self.allocations.items():
            if start <= address and address + nbytes <= start + array.nbytes:
                return array[address - start: address - start + nbytes]
        raise AssertionError(f"the runtime touched {nbytes} bytes at {address:#x}, outside every allocation")

    def _allocate(self, nbytes: int):
        if nbytes + sum(a.nbytes for a in self.allocations.values()) > self.memory_bytes:
            return (CUresult.CUDA_ERROR_OUT_OF_MEMORY, 0)
        # 256-byte aligned, as cuMemAlloc's are (cuBLASLt's algorithm choice depends on alignment)
        padded = np.zeros(max(nbytes, 1) + 256, np.uint8)
        start = -padded.ctypes.data % 256
        array = padded[start:start + max(nbytes, 1)]
        self.allocations[array.ctypes.data] = array
        return (CUresult.CUDA_SUCCESS, array.ctypes.data)

    def _kernel(self, function: Handle, grid, block, shared_bytes: int, kernel_params: int) -> KernelLaunch:
        sizes = self.param_sizes[function.name]
        pointers = (ctypes.c_uint64 * len(sizes)).from_address(kernel_params)
        args = tuple(ctypes.string_at(p, size) for p, size in zip(pointers, sizes))
        return KernelLaunch(function.name, tuple(grid), tuple(block), shared_bytes, args)

    def _memset(self, work: Memset) -> None:
        view = self._memory(work.dst, work.count * work.element_size)
        view.view(f"u{work.element_size}")[:] = work.value

    def _memcpy(self, work: Memcpy) -> None:
        self._memory(work.dst, work.nbytes)[:] = self._memory(work.src, work.nbytes)

    def _graph(self, handle: Handle) -> FakeGraph:
        return self.graphs[handle] if handle in self.graphs else self.bodies[handle]

    def CUstream(self, number: int) -> Handle:
        """A stream handle from its value, as `cuda.bindings.driver.CUstream(int)` makes one."""
        return Handle("stream", int(number))

    def _find(self, graph: FakeGraph, handle: Handle) -> GraphNode | None:
        """The node `handle` in `graph`, its child graphs or its conditional nodes' bodies."""
        for node in graph.nodes:
            if node.handle == handle:
                return node
            inner = [node.child] if node.child else node.work.bodies if node.kind == "conditional" else []
            found = next((n for g in inner if (n := self._find(g, handle)) is not None), None)
            if found is not None:
                return found
        return None

    def CUgraph(self, number: int) -> Handle:
        """A graph handle from its value, as `cuda.bindings.driver.CUgraph(int)` makes one."""
        return next(h for h in (*self.graphs, *self.bodies) if h.number == number)

    def _decide(self, work: KernelLaunch) -> None:
        """Run a generated deciding kernel: store the decision in control[0] and, in a graph,
        set the handle (conditions.cu.j2 is the reference)."""
        kind = work.function.removeprefix("pipec_condition_")
        (handle,), (in_graph,) = struct.unpack("<Q", work.args[0]), struct.unpack("<I", work.args[1])
        if kind in ("every", "repeat"):
            control = self._memory(struct.unpack("<Q", work.args[2])[0], 8).view(np.uint32)
            operand = struct.unpack("<I", work.args[3])[0]
            if kind == "every":
                count = int(control[1]) + 1
                value = int(count >= operand)
                control[1] = 0 if value else count
            else:
                restart = struct.unpack("<I", work.args[4])[0]
                control[1] = operand if restart else (int(control[1]) - 1) % (1 << 32)
                value = int(control[1] > 0)
        else:
            dtype = np.dtype({"i32": "<i4", "u32": "<u4", "i64": "<i8", "u64": "<u8", "u8": "u1"}[kind])
            flag = int(self._memory(struct.unpack("<Q", work.args[2])[0], dtype.itemsize).view(dtype)[0])
            control = self._memory(struct.unpack("<Q", work.args[3])[0], 8).view(np.uint32)
            if not struct.unpack("<I", work.args[4])[0]:
                value = int(flag != 0)
            else:
                value = 0xFFFFFFFF if flag < 0 or flag > 0xFFFFFFFE else flag
        control[0] = value
        if in_graph:
            self.condition_values[handle] = value

    def _execute(self, work: KernelLaunch) -> None:
        self.launches.append(work)
        if work.run is not None:
            work.run()
        if work.function.startswith("pipec_condition_"):
            self._decide(work)

    def _run_conditional(self, node: Conditional) -> None:
        kinds = CUgraphConditionalNodeType
        value = lambda: self.condition_values.get(node.handle.number, 0)
        if node.type == kinds.CU_GRAPH_COND_TYPE_WHILE:
            while value():
                self._run(node.bodies[0])
            return
        chosen = (0 if value() else 1) if node.type == kinds.CU_GRAPH_COND_TYPE_IF else value()
        if chosen < len(node.bodies):
            self._run(node.bodies[chosen])

    def _run(self, graph: FakeGraph) -> None:
        for node in graph.nodes:
            if node.kind == "graph":
                self._run(node.child)
            elif node.kind == "conditional":
                self._run_conditional(node.work)
            elif node.kind == "memset":
                self._memset(node.work)
            elif node.kind == "memcpy":
                self._memcpy(node.work)
            elif node.kind == "kernel":
                self._execute(node.work)
            elif node.kind == "host":
                node.work()

    def _add(self, graph: Handle, deps, count: int, kind: str, work=None, child=None):
        assert len(deps) == count
        handle = self._handle("node")
        self._graph(graph).nodes.append(GraphNode(handle, kind, tuple(deps), work, child))
        return (CUresult.CUDA_SUCCESS, handle)

    # --- device and context -----------------------------------------------------------------

    def cuDriverGetVersion(self):
        return (CUresult.CUDA_SUCCESS, 12090)

    def cuDeviceGetCount(self):
        return (CUresult.CUDA_SUCCESS, 1)

    def cuDeviceGet(self, ordinal):
        return (CUresult.CUDA_SUCCESS, Handle("device", ordinal))

    def cuDevicePrimaryCtxRetain(self, device):
        return (CUresult.CUDA_SUCCESS, Handle("context", 1))

    def cuDeviceGetName(self, length, device):
        return (CUresult.CUDA_SUCCESS, self.device["name"].encode().ljust(length, b"\0"))

    def cuDeviceGetAttribute(self, attribute, device):
        a, d = CUdevice_attribute, self.device
        value = {
            a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: d["capability"][0],
            a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: d["capability"][1],
            a.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: d["multiprocessors"],
            a.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: d["max_threads_per_block"],
            a.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: d["max_registers_per_block"],
            a.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: d["max_shared_per_block"],
        }[attribute]
        return (CUresult.CUDA_SUCCESS, value)

    # --- streams and events -----------------------------------------------------------------

    def cuStreamCreate(self, flags):
        handle = self._handle("stream")
        self.streams.add(handle)
        return (CUresult.CUDA_SUCCESS, handle)

    def cuStreamDestroy(self, stream):
        self.streams.remove(stream)
        return (CUresult.CUDA_SUCCESS,)

    def enqueue(self, stream: Handle, kind: str, work) -> None:
        """Work on `stream`: a node of its capture's graph (after the work captured before it),
        or done now."""
        graph = self.capturing.get(Handle("stream", int(stream)))
        if graph is not None:
            deps = (graph.nodes[-1].handle,) if graph.nodes else ()
            graph.nodes.append(GraphNode(self._handle("node"), kind, deps, work))
        elif kind == "kernel":
            self._execute(work)
        elif kind == "memset":
            self._memset(work)
        elif kind == "memcpy":
            self._memcpy(work)
        else:
            work()

    def cuStreamBeginCapture(self, stream, mode):
        assert stream in self.streams and stream not in self.capturing
        self.capturing[stream] = FakeGraph(self._handle("graph"))
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamEndCapture(self, stream):
        graph = self.capturing.pop(stream)
        self.graphs[graph.handle] = graph
        return (CUresult.CUDA_SUCCESS, graph.handle)

    def cuLaunchHostFunc(self, stream, function, data):
        self.enqueue(stream, "host", lambda: function(data))
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphGetNodes(self, graph, count):
        nodes = self._graph(graph).nodes
        return (CUresult.CUDA_SUCCESS, [n.handle for n in nodes[:count]], len(nodes))

    def _node(self, handle: Handle) -> GraphNode:
        return next(n for g in (*self.graphs.values(), *self.bodies.values()) if (n := self._find(g, handle)))

    def cuGraphNodeGetType(self, handle):
        return (CUresult.CUDA_SUCCESS, CUgraphNodeType[f"CU_GRAPH_NODE_TYPE_{self._node(handle).kind.upper()}"])

    def cuGraphKernelNodeGetParams(self, handle):
        """The node's parameters; `work` carries what it does, so that a node added with them
        (a library's kernel copied into another graph) does the same."""
        work = self._node(handle).work
        params = CUDA_KERNEL_NODE_PARAMS()
        params.func = Handle("function", 0, work.function)
        params.gridDimX, params.gridDimY, params.gridDimZ = work.grid
        params.blockDimX, params.blockDimY, params.blockDimZ = work.block
        params.sharedMemBytes, params.work = work.shared_bytes, work
        return (CUresult.CUDA_SUCCESS, params)

    def cuGraphMemsetNodeGetParams(self, handle):
        work = self._node(handle).work
        params = CUDA_MEMSET_NODE_PARAMS()
        params.dst, params.elementSize, params.value, params.width = work.dst, work.element_size, work.value, work.count
        params.height, params.pitch = 1, work.count * work.element_size
        return (CUresult.CUDA_SUCCESS, params)

    def cuGraphMemcpyNodeGetParams(self, handle):
        """A copy's parameters: a host end's address in srcHost/dstHost, any other's in
        srcDevice/dstDevice, as cuda.h's CUDA_MEMCPY3D has them."""
        work, host = self._node(handle).work, CUmemorytype.CU_MEMORYTYPE_HOST
        params = CUDA_MEMCPY3D()
        params.srcMemoryType, params.dstMemoryType = work.src_type, work.dst_type
        params.srcHost, params.srcDevice = (work.src, 0) if work.src_type == host else (0, work.src)
        params.dstHost, params.dstDevice = (work.dst, 0) if work.dst_type == host else (0, work.dst)
        params.WidthInBytes, params.Height, params.Depth = work.nbytes, 1, 1
        return (CUresult.CUDA_SUCCESS, params)

    def cuGraphNodeGetDependencies(self, handle, count):
        deps = self._node(handle).deps
        return (CUresult.CUDA_SUCCESS, list(deps[:count]), len(deps))

    def cuFuncGetName(self, function):
        return (CUresult.CUDA_SUCCESS, function.name.encode())

    def cuEventCreate(self, flags):
        return (CUresult.CUDA_SUCCESS, self._handle("event"))

    def cuEventElapsedTime(self, start, end):
        return (CUresult.CUDA_SUCCESS, 0.001)

    # --- memory -----------------------------------------------------------------------------

    def cuMemAlloc(self, nbytes):
        return self._allocate(nbytes)

    def cuMemHostAlloc(self, nbytes, flags):
        result = self._allocate(nbytes)
        if result[0] == CUresult.CUDA_SUCCESS:
            self.host_allocations.add(result[1])
        return result

    def cuMemHostGetDevicePointer(self, host, flags):
        return (CUresult.CUDA_SUCCESS, host)  # unified addressing: the same address

    def cuMemFree(self, address):
        del self.allocations[address]
        return (CUresult.CUDA_SUCCESS,)

    def cuMemFreeHost(self, address):
        self.host_allocations.remove(address)
        return FakeCuda.cuMemFree(self, address)

    def cuPointerGetAttribute(self, attribute, address):
        """The memory type of an allocation's address; an address outside every allocation is
        one the driver does not know (pageable host memory), as the real driver answers."""
        assert attribute == CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
        for start, array in self.allocations.items():
            if start <= int(address) < start + array.nbytes:
                host = start in self.host_allocations
                return (CUresult.CUDA_SUCCESS, CUmemorytype.CU_MEMORYTYPE_HOST if host else CUmemorytype.CU_MEMORYTYPE_DEVICE)
        return (CUresult.CUDA_ERROR_INVALID_VALUE, 0)

    def cuMemcpyHtoD(self, dst, array, nbytes):
        self._memory(dst, nbytes)[:] = np.frombuffer(np.ascontiguousarray(array).tobytes()[:nbytes], np.uint8)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoH(self, out, src, nbytes):
        out.reshape(-1).view(np.uint8)[:nbytes] = self._memory(src, nbytes)
        return (CUresult.CUDA_SUCCESS,)

    def cuMemcpyDtoDAsync(self, dst, src, nbytes, stream):
        self.enqueue(stream, "memcpy", Memcpy(dst, src, nbytes))
        return (CUresult.CUDA_SUCCESS,)

    def _memset_call(size):
        def memset(self, dst, value, count, stream=None):
            if stream is None:
                self._memset(Memset(dst, size, value, count))
            else:
                self.enqueue(stream, "memset", Memset(dst, size, value, count))
            return (CUresult.CUDA_SUCCESS,)
        return memset

    cuMemsetD8 = cuMemsetD8Async = _memset_call(1)
    cuMemsetD16 = cuMemsetD16Async = _memset_call(2)
    cuMemsetD32 = cuMemsetD32Async = _memset_call(4)
    del _memset_call

    # --- modules and kernels ----------------------------------------------------------------

    def cuModuleLoadData(self, binary):
        handle = self._handle("module")
        self.modules[handle] = binary
        return (CUresult.CUDA_SUCCESS, handle)

    def cuModuleUnload(self, module):
        del self.modules[module]
        return (CUresult.CUDA_SUCCESS,)

    def cuModuleGetFunction(self, module, name):
        assert module in self.modules
        return (CUresult.CUDA_SUCCESS, self._handle("function", name.decode()))

    def cuFuncGetAttribute(self, attribute, function):
        values = self.function_attributes.get(function.name, FunctionAttributes())
        a = CUfunction_attribute
        return (CUresult.CUDA_SUCCESS, {
            a.CU_FUNC_ATTRIBUTE_NUM_REGS: values.registers,
            a.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: values.static_shared,
            a.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: values.max_threads,
        }[attribute])

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared_bytes, stream, kernel_params, extra):
        self.enqueue(stream, "kernel", self._kernel(function, (gx, gy, gz), (bx, by, bz), shared_bytes, kernel_params))
        return (CUresult.CUDA_SUCCESS,)

    def cuLaunchKernelEx(self, config, function, kernel_params, extra):
        """A launch with attributes (programmatic stream serialization: runs like any launch here)."""
        assert config.numAttrs == len(config.attrs)
        grid, block = (config.gridDimX, config.gridDimY, config.gridDimZ), (config.blockDimX, config.blockDimY,
                                                                          config.blockDimZ)
        work = self._kernel(function, grid, block, config.sharedMemBytes, kernel_params)
        if any(a.id == CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
               and a.value.programmaticStreamSerializationAllowed for a in config.attrs):
            self.serialized.append(work)
        self.enqueue(config.hStream, "kernel", work)
        return (CUresult.CUDA_SUCCESS,)

    # --- graphs -----------------------------------------------------------------------------

    def cuGraphCreate(self, flags):
        handle = self._handle("graph")
        self.graphs[handle] = FakeGraph(handle)
        return (CUresult.CUDA_SUCCESS, handle)

    def cuGraphDestroy(self, graph):
        del self.graphs[graph]
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphAddKernelNode(self, graph, deps, count, p):
        if hasattr(p, "work"):  # parameters read from another kernel node
            return self._add(graph, deps, count, "kernel", p.work)
        work = self._kernel(p.func, (p.gridDimX, p.gridDimY, p.gridDimZ),
                            (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes, p.kernelParams)
        return self._add(graph, deps, count, "kernel", work)

    def cuGraphAddMemsetNode(self, graph, deps, count, p, context):
        assert p.height == 1 and p.pitch == p.width * p.elementSize
        return self._add(graph, deps, count, "memset", Memset(p.dst, p.elementSize, p.value, p.width))

    def cuGraphAddMemcpyNode(self, graph, deps, count, p, context):
        device = CUmemorytype.CU_MEMORYTYPE_DEVICE
        assert p.srcMemoryType == device and p.dstMemoryType == device and p.Height == p.Depth == 1
        return self._add(graph, deps, count, "memcpy", Memcpy(p.dstDevice, p.srcDevice, p.WidthInBytes))

    def cuGraphAddChildGraphNode(self, graph, deps, count, child):
        return self._add(graph, deps, count, "graph", child=self.graphs[child])

    def cuGraphAddEmptyNode(self, graph, deps, count):
        return self._add(graph, deps, count, "empty")

    def cuGraphAddDependencies(self, graph, sources, targets, count):
        """The 12.x form without edge data: ordinary edges, which pipec adds with its nodes."""
        raise AssertionError("pipec adds ordinary edges with their nodes, programmatic ones with edge data")

    def cuGraphAddDependencies_v2(self, graph, sources, targets, edges, count):
        """CUDA 12.3+: edges with edge data; pipec adds programmatic ones between kernel nodes."""
        assert len(sources) == len(targets) == len(edges) == count
        for source, target, edge in zip(sources, targets, edges):
            assert edge.type == CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC and edge.from_port == 1
            producer, consumer = self._graph(graph).node(source), self._graph(graph).node(target)
            assert producer.kind == consumer.kind == "kernel", "a programmatic edge joins two kernel nodes"
            consumer.programmatic += (source,)
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphConditionalHandleCreate(self, graph, context, default, flags):
        handle = self._handle("conditional")
        self.conditional_handles[handle] = (self._graph(graph), context, default, flags)
        return (CUresult.CUDA_SUCCESS, handle)

    def cuGraphAddNode(self, graph, deps, count, params):
        """The 12.x form: (graph, dependencies, count, params); conditional nodes only."""
        assert params.type == CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
        c = params.conditional
        assert c.handle in self.conditional_handles, "a conditional node needs a handle made first"
        bodies = [FakeGraph(self._handle("graph")) for _ in range(c.size)]
        self.bodies.update((body.handle, body) for body in bodies)
        c.phGraph_out = [body.handle for body in bodies]  # the driver returns the bodies it made
        return self._add(graph, deps, count, "conditional", Conditional(c.type, c.handle, c.ctx, bodies))

    def cuGraphInstantiate(self, graph, flags):
        handle = self._handle("exec")
        self.executables[handle] = self.graphs[graph]
        return (CUresult.CUDA_SUCCESS, handle)

    def cuGraphLaunch(self, executable, stream):
        self.condition_values = {h.number: default for h, (_, _, default, flags) in self.conditional_handles.items()
                                 if flags & self.CU_GRAPH_COND_ASSIGN_DEFAULT}
        self._run(self.executables[executable])
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphExecKernelNodeSetParams(self, executable, handle, p):
        node = self._find(self.executables[executable], handle)
        assert node is not None and node.kind == "kernel", "not a kernel node of this executable graph"
        node.work = self._kernel(p.func, (p.gridDimX, p.gridDimY, p.gridDimZ),
                                 (p.blockDimX, p.blockDimY, p.blockDimZ), p.sharedMemBytes, p.kernelParams)
        return (CUresult.CUDA_SUCCESS,)

    def cuGraphChildGraphNodeGetGraph(self, handle):
        node = next(n for g in self.graphs.values() if (n := self._find(g, handle)) is not None)
        return (CUresult.CUDA_SUCCESS, node.child.handle)

    def cuGraphNodeFindInClone(self, original, clone):
        """A child graph node here embeds its graph itself (no clone): the node is its own."""
        assert self._find(self._graph(clone), original) is not None
        return (CUresult.CUDA_SUCCESS, original)

    def cuGraphExecDestroy(self, executable):
        del self.executables[executable]
        return (CUresult.CUDA_SUCCESS,)


# A small device: what PC316's fixtures are loaded on (a T4's limits).
SMALL_DEVICE = dict(name="Fake T4", capability=(7, 5), multiprocessors=40, max_threads_per_block=1024,
                    max_registers_per_block=65536, max_shared_per_block=65536)
GLUE_PARAM_SIZES = {
    "pipec_fill_8": (8, 8, 8), **{f"pipec_copy_{w}": (8, 8, 8) for w in (1, 2, 4, 8, 16)},
    **{f"pipec_condition_{t}": (8, 4, 8, 8, 4) for t in ("i32", "u32", "i64", "u64", "u8")},
    "pipec_condition_every": (8, 4, 8, 4), "pipec_condition_repeat": (8, 4, 8, 4, 4),
}


def param_sizes(program) -> dict[str, tuple[int, ...]]:
    """Bytes of each kernel parameter, from the kernels' signatures as the compiler read them
    from their sources, plus the glue kernels' (compiler/templates/glue_kernels.cu.j2)."""
    sizes = {k.name: tuple(8 if p.kind == "pointer" else p.dtype.size for p in k.params)
             for k in program.kernels.values()}
    return {**GLUE_PARAM_SIZES, **sizes}


class FakeCuda13(FakeCuda):
    """cuda-bindings 13: `cuGraphAddNode` and `cuGraphAddDependencies` take edge data too."""

    def cuGraphAddDependencies(self, graph, sources, targets, edges, count):
        return FakeCuda.cuGraphAddDependencies_v2(self, graph, sources, targets, edges, count)

    def cuGraphAddNode(self, graph, deps, edges, count, params):
        assert len(edges) == count and all(isinstance(e, CUgraphEdgeData) for e in edges)
        return FakeCuda.cuGraphAddNode(self, graph, deps, count, params)


def fake_driver(path, fake=FakeCuda, **options):
    """A `Driver` over a `FakeCuda` (or `fake`) that knows the kernels of the `.pipe` file at `path`."""
    import pipec
    from pipec.runtime.driver import Driver

    compilation = pipec.check(path)
    return Driver(fake(param_sizes=param_sizes(compilation.program), **options))
