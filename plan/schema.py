"""The plan: the one data structure the compiler hands the runtime, and its JSON form.

A plan is frozen data: graphs of primitive nodes (kernel, memset, memcpy, child graph,
conditional, gemm) with their edges, the gemm nodes grouped by the library kernel they reach,
the buffers with their initial values, and the kernel modules to compile. Every node keeps
its `.pipe` location and its accesses, so the runtime can name the node behind a failure or a
difference. `to_json` and `from_json` are inverses: `pipec --emit plan` writes a
plan that reads back into equal objects. This module imports nothing else of the compiler.
"""

from __future__ import annotations

import hashlib
import types
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import cache
from typing import NewType, Union, get_args, get_origin, get_type_hints

# An expression of the live-update record (plan/live.py): literals and tuples of them, nested.
Expression = NewType("Expression", object)

# Every class below has slots: a plan of a million nodes holds millions of its objects, and an
# object without a __dict__ takes a fifth of the memory.

@dataclass(frozen=True, slots=True)
class Location:
    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class AccessSpec:
    buffer: str
    start: int  # elements
    stop: int
    mode: str  # r | w | rw


@dataclass(frozen=True, slots=True)
class ArgSpec:
    # pointer | scalar | handle (the handle of conditional `value`; 0 in eager execution) |
    # in_graph (1 in the graph, 0 in eager execution)
    kind: str
    ctype: str  # "ptr", or the scalar's type name (f32, i32, u64, bool, ...)
    buffer: str | None = None
    byte_offset: int = 0
    value: int | float | None = None


@dataclass(frozen=True, slots=True)
class KernelNodeSpec:
    id: int
    name: str
    location: Location
    accesses: tuple[AccessSpec, ...]
    module: int
    function: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[ArgSpec, ...]


@dataclass(frozen=True, slots=True)
class MemsetNodeSpec:
    id: int
    name: str
    location: Location
    accesses: tuple[AccessSpec, ...]
    buffer: str
    byte_offset: int
    element_size: int  # 1, 2 or 4 bytes
    value: int  # the element's bit pattern
    count: int  # elements of element_size


@dataclass(frozen=True, slots=True)
class MemcpyNodeSpec:
    id: int
    name: str
    location: Location
    accesses: tuple[AccessSpec, ...]
    src: str
    src_offset: int  # bytes
    dst: str
    dst_offset: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class ChildGraphNodeSpec:
    id: int
    name: str
    location: Location
    accesses: tuple[AccessSpec, ...]
    graph: int


@dataclass(frozen=True, slots=True)
class ConditionalNodeSpec:
    """A CUDA conditional node. Its bodies are graphs built into the node; the kernel node
    before it (and, for `while`, the last node of its body) decides it on the device and
    leaves the decision in `control[0]`, where eager execution reads it."""

    id: int
    name: str
    location: Location
    accesses: tuple[AccessSpec, ...]
    type: str  # if | switch | while: the CUDA conditional node type
    construct: str  # if | switch | every | while | repeat: what the program wrote
    handle: int  # the conditional handle's index in the plan
    bodies: tuple[int, ...]  # graph indices: then (and else), the cases, or the loop body
    flag: str | None  # the buffer whose element decides (if, switch, while)
    flag_element: int | None
    control: str  # the u32[2] buffer holding the decision (and the counter)


@dataclass(frozen=True, slots=True)
class MatrixSpec:
    """One operand of a library node: a row-major matrix (or a strided batch of them) inside
    a buffer, as the program wrote it, before any transpose."""

    buffer: str
    byte_offset: int
    dtype: str  # f32 | f16 | bf16 (a ReLU mask: u8, one bit per element)
    rows: int
    cols: int
    ld: int  # elements between the starts of consecutive rows
    batch_stride: int  # elements between consecutive matrices of a batch; 0: one shared matrix


@dataclass(frozen=True, slots=True)
class GemmNodeSpec:
    """`c = alpha * op(a) @ op(b) + beta * c` and its epilogue, per matrix of a batch, in the
    program's row-major terms: op(a) is m x k, op(b) k x n, c m x n. The runtime records the
    one cuBLASLt call into a graph of its own and adds it as a child graph node."""

    id: int
    name: str
    location: Location
    accesses: tuple[AccessSpec, ...]
    m: int
    n: int
    k: int
    batch: int
    a: MatrixSpec
    b: MatrixSpec
    c: MatrixSpec
    trans_a: bool
    trans_b: bool
    alpha: float
    beta: float
    compute: str  # f32 | tf32 (f32 operands only) : the multiply's precision; f32 accumulates
    # none | relu | gelu | bias | relu_bias | gelu_bias (forward, optionally with aux);
    # drelu | dgelu (backward, reading aux) with or without bias_grad; bgrad_a (bias_grad = the
    # row sums of op(a))
    epilogue: str
    bias: MatrixSpec | None  # a 1 x n row added to every row of c
    aux: MatrixSpec | None  # forward: written (ReLU mask or GELU input); backward: read
    bias_grad: MatrixSpec | None  # written: 1 x n (drelu/dgelu) or 1 x m (bgrad_a)
    workspace: str  # the node's own workspace buffer
    workspace_bytes: int


@dataclass(frozen=True, slots=True)
class CollectiveOperandSpec:
    """One NCCL call of a collective node: `count` elements of `dtype` per rank from `src` (at
    `src_offset` bytes) to `dst`, the same view for the in-place allreduce and broadcast.
    allgather writes `count * world size` elements, reducescatter reads them."""

    dtype: str
    count: int  # elements each rank sends (allgather, broadcast, allreduce) or receives (reducescatter)
    src: str
    src_offset: int
    dst: str
    dst_offset: int

    def describe(self) -> str:
        return f"{self.count} x {self.dtype}"


@dataclass(frozen=True, slots=True)
class CollectiveNodeSpec:
    """One NCCL collective over every rank of the run: one call per operand (several only for
    allreduce and broadcast), issued between ncclGroupStart and ncclGroupEnd when there are
    several, so that NCCL runs them as one kernel. The runtime records the call or the group
    into a graph of its own (runtime/collectives.py)."""

    id: int
    name: str
    location: Location
    accesses: tuple[AccessSpec, ...]
    collective: str  # allreduce | broadcast | allgather | reducescatter
    op: str | None  # sum | avg | max | min (allreduce, reducescatter)
    operands: tuple[CollectiveOperandSpec, ...]
    root: int | None  # broadcast

    def describe(self) -> str:
        """What every rank must agree on, one line (the collective sequence's entry)."""
        op = f" {self.op}" if self.op else ""
        root = f" from {self.root}" if self.root is not None else ""
        operands = ", ".join(operand.describe() for operand in self.operands)
        return f"{self.collective}{op} {operands}{root} ({self.name})"


NodeSpec = Union[KernelNodeSpec, MemsetNodeSpec, MemcpyNodeSpec, ChildGraphNodeSpec, ConditionalNodeSpec,
                 GemmNodeSpec, CollectiveNodeSpec]
NODE_KINDS = {KernelNodeSpec: "kernel", MemsetNodeSpec: "memset", MemcpyNodeSpec: "memcpy",
              ChildGraphNodeSpec: "graph", ConditionalNodeSpec: "conditional", GemmNodeSpec: "gemm",
              CollectiveNodeSpec: "collective"}


@dataclass(frozen=True, slots=True)
class HazardEdge:
    src: int
    dst: int
    kind: str  # RAW | WAR | WAW
    buffer: str


@dataclass(frozen=True, slots=True)
class EdgeKind:
    """How the runtime adds one edge: programmatic (the consumer may start while the producer
    runs, and waits for it in `griddepcontrol.wait`) or ordinary, with the reason."""

    src: int
    dst: int
    programmatic: bool
    reason: str  # why the edge is ordinary; empty for a programmatic one


@dataclass(frozen=True, slots=True)
class GraphSpec:
    index: int
    name: str
    scope: str  # module instances are per scope: one per child graph, "eager" for eager work
    nodes: tuple[NodeSpec, ...]
    edges: tuple[tuple[int, int], ...]  # what the runtime adds: hazards and lane order, reduced
    hazards: tuple[HazardEdge, ...]  # the reduced hazard DAG, for people and tools
    edge_kinds: tuple[EdgeKind, ...] = ()  # one per entry of `edges`, in its order

    def programmatic(self) -> set[tuple[int, int]]:
        return {(e.src, e.dst) for e in self.edge_kinds if e.programmatic}


@dataclass(frozen=True, slots=True)
class ModuleSpec:
    index: int
    name: str
    path: str | None  # a kernel source file, or None for generated code
    source: str | None  # generated code
    include_dirs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AddressSpec:
    """One element of a table of addresses: the device address of `buffer`, plus `byte_offset`."""

    buffer: str
    byte_offset: int


@dataclass(frozen=True, slots=True)
class InitSpec:
    kind: str  # zeros | uninit | fill | uniform | normal | load | addresses
    args: tuple[float | int, ...]
    seed: int | None
    path: str | None
    # `addresses`: the table's elements, 64-bit addresses the runtime writes once the buffers
    # are allocated or bound (and again after it restores the table's contents)
    addresses: tuple[AddressSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class BufferSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]
    memory: str  # device | mapped
    init: InitSpec
    labels: tuple[str, ...]
    nbytes: int
    location: Location
    step_first_access: str | None  # read | write | None: what the step does to it first
    replicated: bool = False  # declared the same bits on every rank (`piperun --verify` checks)


@dataclass(frozen=True, slots=True)
class GemmUseSpec:
    node: str  # the gemm node's name
    scope: str  # the scope it runs in: a child graph's instance path, "step", "shared" or "eager"


@dataclass(frozen=True, slots=True)
class GemmGroupSpec:
    """GEMM nodes with one descriptor, so one library kernel (the same CUfunction) in every
    scope they run in: library kernels are loaded once per process, not once per child graph
    the way pipec loads its own modules. `scopes` adds "eager": eager calls reach the same
    kernels."""

    key: str  # the descriptor below, in one line
    m: int
    n: int
    k: int
    batch: int
    types: tuple[str, str, str]  # a, b, c
    trans_a: bool
    trans_b: bool
    epilogue: str
    compute: str
    alignment: int  # bytes: the largest power of two (at most 256) dividing every operand's offset
    nodes: tuple[GemmUseSpec, ...]
    scopes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LiveValueSpec:
    """One value of the live-update record, in the order the compiler computes them: a constant
    of the main file (`updatable`: what `-D`, `Pipeline.update` and `pipec_update_constants`
    set), or a constant of an imported file whose binding reads one. `expr` defines it over the
    values before it and `value` is what it was compiled with (plan/live.py's literals; both None
    for a value that is no number). An updatable value is `structural` (why a change would need
    a new graph: its first such use, with its `.pipe` location) or reaches the `sites` listed."""

    name: str
    location: Location
    updatable: bool
    expr: Expression | None
    value: Expression | None
    structural: str | None
    sites: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LiveSiteSpec:
    """One field of a step kernel node that updatable values reach: scalar argument `index`
    (`field` "arg"), axis `index` of "grid" or "block", or "shared_bytes", computed by `expr`.
    A launch shape must be an integer from `low` to `high`, a grid dimension a multiple of the
    kernel's cluster (`multiple`), and the block's threads at most `threads`; an argument is
    checked against its type, and against `low` and `high` when they are not None."""

    graph: int
    node: int
    field: str  # arg | grid | block | shared_bytes
    index: int
    expr: Expression
    low: int | None
    high: int | None
    multiple: int
    threads: int


@dataclass(frozen=True, slots=True)
class LiveSpec:
    """What a runtime needs to change constants without the compiler (docs/plan.md)."""

    values: tuple[LiveValueSpec, ...] = ()
    sites: tuple[LiveSiteSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    pipe: str
    pipe_sha256: str
    pipec_version: str
    arch: str
    compiler: str
    lanes: int
    buffers: tuple[BufferSpec, ...]
    modules: tuple[ModuleSpec, ...]
    graphs: tuple[GraphSpec, ...]
    step: int | None
    init: int | None
    gemm_groups: tuple[GemmGroupSpec, ...] = ()  # computed from the graphs; for people and tools
    # The launcher constants the plan was compiled with: a runtime given a communicator checks
    # it is rank `rank` of `world_size` (a plan reading RANK differs between the ranks).
    world_size: int = 1
    rank: int = 0
    live: LiveSpec = LiveSpec()  # the live-update record (plan/live.py)

    def buffer(self, name: str) -> BufferSpec:
        return next(b for b in self.buffers if b.name == name)

    def leaves(self, graph: int) -> list[NodeSpec]:
        """Every kernel, memset and memcpy of a graph and its children (and of every body of
        its conditional nodes), in program order: a valid order for eager execution when no
        conditional node skips or repeats a body."""
        out: list[NodeSpec] = []
        for node in self.graphs[graph].nodes:
            if isinstance(node, (ChildGraphNodeSpec, ConditionalNodeSpec)):
                for child in child_graphs(node):
                    out.extend(self.leaves(child))
            else:
                out.append(node)
        return out

    def graph_tree(self, graph: int):
        """A graph and every graph nested in it."""
        yield self.graphs[graph]
        for node in self.graphs[graph].nodes:
            for child in child_graphs(node):
                yield from self.graph_tree(child)


def collective_sequence(plan: Plan) -> list[CollectiveNodeSpec]:
    """The collectives a run issues, in the order every rank issues them: the init's, then one
    step's, in program order (the communicator's token chains them so, runtime and eager)."""
    return [node for root in (plan.init, plan.step) if root is not None
            for node in plan.leaves(root) if isinstance(node, CollectiveNodeSpec)]


def collective_sequence_hash(plan: Plan) -> str:
    """A digest of `collective_sequence`: equal on every rank of a run that can work."""
    text = "\n".join(node.describe() for node in collective_sequence(plan))
    return hashlib.sha256(text.encode()).hexdigest()


def child_graphs(node: NodeSpec) -> tuple[int, ...]:
    """The graphs a node holds: a child graph, a conditional node's bodies, or none."""
    if isinstance(node, ChildGraphNodeSpec):
        return (node.graph,)
    if isinstance(node, ConditionalNodeSpec):
        return node.bodies
    return ()


def to_json(value):
    """The plan (or any part of it) as JSON-ready data; nodes carry their kind."""
    names = _field_names(type(value))
    if names is not None:
        data = {}
        if type(value) in NODE_KINDS:
            data["kind"] = NODE_KINDS[type(value)]
        for name in names:
            data[name] = to_json(getattr(value, name))
        return data
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


@cache
def _field_names(kind: type) -> tuple[str, ...] | None:
    """A dataclass's field names, None for any other type: asked once per type, not per value
    (a plan has millions of values)."""
    return tuple(f.name for f in fields(kind)) if is_dataclass(kind) else None


def from_json(data: dict) -> Plan:
    """The plan that `to_json` wrote, as equal objects (JSON lists become the tuples)."""
    return _decode(Plan, data)


_NODE_BY_KIND = {kind: cls for cls, kind in NODE_KINDS.items()}


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


@cache
def _hints(cls) -> dict:
    return get_type_hints(cls)


def _decode(annotation, value):
    if annotation is Expression:
        return _tuples(value)
    if is_dataclass(annotation):
        hints = _hints(annotation)
        # a field with a default may be absent: written by a pipec from before the field
        return annotation(**{f.name: _decode(hints[f.name], value[f.name]) for f in fields(annotation)
                             if f.name in value or f.default is MISSING})
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        return tuple(_decode(a, v) for a, v in zip(args, value, strict=True))
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:  # an optional value (`MatrixSpec | None`)
            return _decode(members[0], value)
        if isinstance(value, dict):  # a node: its kind says which
            return _decode(_NODE_BY_KIND[value["kind"]], value)
        return value  # a scalar: int, float or str as JSON gave it
    return value
