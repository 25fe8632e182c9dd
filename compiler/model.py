"""The checked model: what a `.pipe` program means once names, types and loops are resolved.

`resolve` builds it from the syntax tree; checks inspect it; `plan` lowers it. Every node has
a fixed launch configuration and a list of accesses (buffer, element range, read/write).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal, Union

from ..dsl import ast
from ..dsl.source import SourceFile, Span
from .diagnostics import Label, Use
from .live import LaunchLive, LiveTerm, LiveTracker
from ..plan.dtypes import BUFFER_DTYPES, DTYPES, DType  # noqa: F401  (resolve names them here)


# The words the model's fields take: the checks, lowering and the plan switch on them.
InitKind = Literal["zeros", "uninit", "fill", "uniform", "normal", "load", "addresses"]
ParamKind = Literal["pointer", "scalar", "unsupported"]
WriteProof = Literal["yes", "no", "unknown"]  # can the PTX write through a pointer (ptx/writes.py)
FindingRule = Literal["atomics", "spin-wait", "fence-barrier", "grid-sync", "unfollowed-call"]
WaivableRule = Literal["atomics", "spin-wait", "fence-barrier"]
Qualifier = Literal["in", "out", "inout"]
Compute = Literal["f32", "tf32"]
# forward, optionally with aux: none | relu | gelu | bias | relu_bias | gelu_bias; backward,
# reading aux: drelu | dgelu; bgrad_a: the bias gradient alone (the row sums of op(a))
Epilogue = Literal["none", "relu", "gelu", "bias", "relu_bias", "gelu_bias", "drelu", "dgelu", "bgrad_a"]
DecideRole = Literal["flag", "every", "repeat-start", "repeat-next"]
Construct = Literal["if", "switch", "every", "while", "repeat"]
ConditionalKind = Literal["if", "switch", "while"]  # the CUDA conditional node types
CollectiveKind = Literal["allreduce", "broadcast", "allgather", "reducescatter"]
Reduction = Literal["sum", "avg", "max", "min"]
CopyMethod = Literal["memcpy", "kernel"]


class Mode(enum.IntEnum):
    """What an access does; `mode & Mode.WRITE` tests a bit. An IntEnum, not an IntFlag: the
    modes are never combined, and IntFlag's operators run in Python (a microsecond each, on
    millions of accesses), where IntEnum's are int's."""

    READ = 1
    WRITE = 2
    READ_WRITE = 3

    def describe(self) -> str:
        return {1: "reads", 2: "writes", 3: "reads and writes"}[int(self)]


# --- buffers ----------------------------------------------------------------------------------


# The element type of a table of device addresses (`buffer t: ptr[3] = addresses(a, b, c)`):
# the runtime fills it with the addresses of the buffers it names, and the plan holds it as the
# u64 words they are. Only this declaration makes one.
ADDRESS = DType("ptr", 8, "u", "uint64")


@dataclass(frozen=True)
class Init:
    kind: InitKind
    args: tuple[float | int, ...] = ()
    seed: int | None = None
    path: Path | None = None
    entries: tuple[PointerArg, ...] = ()  # `addresses(...)`: the buffer (or slice) each address points to


@dataclass(frozen=True, eq=False)
class Buffer:
    name: str
    dtype: DType
    shape: tuple[int, ...]
    mapped: bool
    labels: tuple[str, ...]
    init: Init
    span: Span
    replicated: bool = False  # declared identical on every rank (checked by `piperun --verify`)

    @property
    def count(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.size

    @property
    def memory(self) -> str:
        return "mapped" if self.mapped else "device"

    @property
    def is_table(self) -> bool:
        """A table of addresses: what a kernel reads through it is the named buffers'."""
        return self.dtype is ADDRESS


# --- kernels ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extent:
    """`/// pipec: extent NAME = EXPR` on a kernel: the least number of elements NAME needs."""

    expr: ast.Expr
    span: Span


@dataclass(frozen=True)
class Site:
    """A line of a kernel's CUDA source where its PTX does something: the kernel's own line
    that reaches it (the span), and the lines between, in headers and helpers (the trail)."""

    span: Span
    trail: tuple[Label, ...] = ()


@dataclass(frozen=True)
class Param:
    index: int
    name: str
    kind: ParamKind
    dtype: DType | None  # element type of a pointer (None for void*), or the scalar's type
    const: bool = False
    write_only: bool = False
    extent: Extent | None = None
    ctype: str = ""  # the C type as the compiler reported it, for messages
    written: WriteProof = "unknown"
    written_span: Span | None = None  # the kernel's line that reaches the first store (or the one pipec cannot follow)
    written_trail: tuple[Label, ...] = ()  # the store itself and the lines between, in headers and helpers
    table: bool = False  # a pointer to pointers (`const float* const*`): binds a table of addresses
    read_first: Site | None = None  # a load of memory this thread has not stored first (ptx/first_reads.py)
    read_through: Site | None = None  # a load through a pointer loaded from its memory (ptx/writes.py)
    written_through: Site | None = None  # a store through such a pointer

    def describe(self) -> str:
        return f"parameter {self.index + 1} `{self.name}` ({self.ctype})"


@dataclass(frozen=True)
class KernelFinding:
    """Something a kernel's PTX does that a graph-safety rule forbids."""

    rule: FindingRule
    instruction: str
    span: Span  # the kernel's own line that reaches the instruction, from the PTX line info
    trail: tuple[Label, ...] = ()  # the instruction itself and the lines between, in headers and helpers


@dataclass(frozen=True)
class EarlyAccess:
    """A global access a kernel can make before `griddepcontrol.wait` (compiler/ptx/pdl.py)."""

    params: tuple[int, ...] | None  # the parameters its address derives from; None: any of them
    mode: str  # r | w | rw
    instruction: str
    span: Span  # the kernel's own line that reaches it
    trail: tuple[Label, ...] = ()  # the access itself and the lines between, in headers and helpers


@dataclass(frozen=True)
class LaunchControl:
    """Programmatic dependent launch as the kernel's PTX does it: whether it waits for its
    predecessor on every path, what it touches before, and where it lets dependents start."""

    waits: str = "never"  # every-path | some-paths | never
    early: tuple[EarlyAccess, ...] = ()
    trigger: Span | None = None

    @property
    def asks_for_programmatic_launch(self) -> bool:
        return self.waits != "never" or self.trigger is not None


@dataclass(frozen=True, eq=False)
class KernelSource:
    path: Path
    file: SourceFile
    key: str  # content hash of the source, its includes, the options and the toolchain


@dataclass(frozen=True, eq=False)
class Kernel:
    name: str
    source: KernelSource
    params: tuple[Param, ...]
    max_threads: int | None  # from __launch_bounds__
    findings: tuple[KernelFinding, ...]
    decl_span: Span  # the signature in the CUDA source
    cluster: tuple[int, int, int] | None = None  # blocks per cluster, from __cluster_dims__
    launch_control: LaunchControl = LaunchControl()
    unknown_read: Site | None = None  # a load through a pointer of unknown origin (ptx/writes.py)
    unknown_write: Site | None = None  # a store through one


# --- nodes ------------------------------------------------------------------------------------


# Access and PointerArg are values, never changed once made, but not `frozen`: a frozen
# dataclass sets each field through object.__setattr__, which tripled their cost, and a
# 100,000-node step makes a million of each. Their equality and hash are a frozen one's.
@dataclass(unsafe_hash=True, slots=True)
class Access:
    buffer: Buffer
    start: int
    stop: int
    mode: Mode
    span: Span

    def overlaps(self, other: Access) -> bool:
        return (
            self.buffer is other.buffer and self.start < other.stop and other.start < self.stop
        )


@dataclass(unsafe_hash=True, slots=True)
class PointerArg:
    buffer: Buffer
    start: int
    stop: int
    sliced: bool
    qualifier: Qualifier | None  # as written
    span: Span


@dataclass(frozen=True)
class ValueArg:
    value: int | float | bool
    span: Span


@dataclass(frozen=True)
class NullArg:
    span: Span


@dataclass(frozen=True)
class RuntimeValueArg:
    """A buffer element or the step index where a value was expected: it would be baked."""

    description: str
    buffer: Buffer | None
    span: Span


Arg = Union[PointerArg, ValueArg, NullArg, RuntimeValueArg]


@dataclass(eq=False)
class LaunchNode:
    name: str
    kernel: Kernel
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[Arg, ...]
    span: Span
    config_span: Span
    accesses: tuple[Access, ...] = ()
    group: int | None = None
    live: LaunchLive | None = None  # what updatable constants reach (compiler/live.py)

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(eq=False)
class FillNode:
    name: str
    buffer: Buffer
    start: int
    stop: int
    value: int | float
    span: Span
    accesses: tuple[Access, ...] = ()
    group: int | None = None


@dataclass(eq=False)
class CopyNode:
    name: str
    src: PointerArg
    dst: PointerArg
    span: Span
    accesses: tuple[Access, ...] = ()
    group: int | None = None


@dataclass(frozen=True)
class MatrixView:
    """A GEMM operand: `batch` row-major `rows` x `cols` matrices, one after the other, from
    element `start` of a buffer. Views are contiguous: the leading dimension is `cols`, and a
    batch's matrices follow each other (a single matrix serves every entry of a batch)."""

    buffer: Buffer
    start: int
    batch: int  # 1: one matrix (2-D); more: a strided batch (3-D)
    rows: int
    cols: int
    batched: bool  # written 3-D (even of one matrix)
    span: Span

    @property
    def count(self) -> int:
        return self.batch * self.rows * self.cols

    @property
    def stop(self) -> int:
        return self.start + self.count


@dataclass(eq=False)
class GemmNode:
    """`c = alpha * op(a) @ op(b) + bias + beta * c` and its epilogue, per matrix of a batch
    (program terms, row-major: op(a) m x k, op(b) k x n, c m x n). The auxiliary output and
    the bias gradient are element ranges: their layout is the library's (compiler/resolve/gemm.py)."""

    name: str
    a: MatrixView
    b: MatrixView
    c: MatrixView
    trans_a: bool
    trans_b: bool
    m: int
    n: int
    k: int
    batch: int
    alpha: float
    beta: float
    compute: Compute
    epilogue: Epilogue
    bias: MatrixView | None
    aux: MatrixView | None  # 1 x (elements the library touches), in the aux buffer's elements
    aux_ld: int  # the aux matrix's leading dimension (ReLU mask: in bits), 0 without aux
    bias_grad: MatrixView | None
    workspace: Buffer
    span: Span
    accesses: tuple[Access, ...] = ()
    group: int | None = None


@dataclass(eq=False)
class GraphNode:
    """One use of a child graph: its own instance of the graph's nodes."""

    name: str
    body: GraphBody
    span: Span
    group: int | None = None

    @cached_property
    def accesses(self) -> tuple[Access, ...]:
        return tuple(a for item in self.body.items for a in item.accesses)


@dataclass(eq=False)
class DecideNode:
    """A kernel pipec generates (compiler/templates/conditions.cu.j2) that decides a conditional
    node on the device: it reads the flag or steps the counter, stores the decision in the
    node's control buffer and sets the node's handle (`cudaGraphSetConditional`)."""

    name: str
    role: DecideRole
    conditional: int  # the conditional's index: its handle and its control buffer
    flag: Access | None  # the flag element read (role `flag`)
    control: Buffer  # u32[2]: the decision, then the counter of `every` and `repeat`
    operand: int  # the period of `every`, the count of `repeat`, 1 when a `switch` reads a value
    span: Span
    accesses: tuple[Access, ...] = ()
    group: int | None = None
    operand_live: LiveTerm | None = None  # the operand's term, when updatable constants reach it


@dataclass(eq=False)
class ConditionalNode:
    """A CUDA conditional node: `if` (one or two bodies), `switch`, or `while`. The constructs
    `every N` and `repeat K` lower to an `if` and a `while` driven by a generated counter."""

    name: str
    construct: Construct
    kind: ConditionalKind
    index: int  # the conditional's index: its handle and its control buffer
    flag: Access | None  # the buffer element the condition reads (if, switch, while)
    control: Buffer
    bodies: list[GraphBody]
    span: Span
    group: int | None = None

    @cached_property
    def accesses(self) -> tuple[Access, ...]:
        """The bodies' accesses, the flag read and the decision read: hazard edges run to and
        from the conditional node as a whole."""
        own: tuple[Access, ...] = (Access(self.control, 0, 1, Mode.READ, self.span),)
        if self.flag is not None:
            own += (self.flag,)
        return own + tuple(a for body in self.bodies for item in body.items for a in item.accesses)


@dataclass(frozen=True)
class CollectiveOperand:
    """One NCCL call of a collective node: its source and destination; in place (allreduce,
    broadcast) `dst` is `src`."""

    src: PointerArg
    dst: PointerArg


@dataclass(eq=False)
class CollectiveNode:
    """One NCCL collective over every rank (compiler/resolve/collectives.py): one call per
    operand, several of them issued as one NCCL group (one kernel, one synchronisation of the
    ranks). Its accesses include the communicator's token, which orders every collective of a
    program in program order on every rank."""

    name: str
    kind: CollectiveKind
    op: Reduction | None  # allreduce, reducescatter
    operands: tuple[CollectiveOperand, ...]  # one, or several of allreduce or broadcast
    root: int | None  # broadcast
    span: Span
    accesses: tuple[Access, ...] = ()
    group: int | None = None
    root_span: Span | None = None  # where the root is written


Node = Union[LaunchNode, FillNode, CopyNode, GraphNode, DecideNode, ConditionalNode, CollectiveNode,
             GemmNode]
# Nodes that hold bodies of other nodes: walks visit their contents after them.
CONTAINERS = (GraphNode, ConditionalNode)


@dataclass(eq=False)
class GraphBody:
    name: str  # instance path: step, step/learn[1], ...
    graph: str  # the declared graph's name (or step / init)
    span: Span
    items: list[Node] = field(default_factory=list)
    uses: tuple[Use, ...] = ()  # the graph uses that made this instance, outermost first

    def walk(self):
        """Every node of this body and of its child graphs, in program order."""
        for item in self.items:
            yield item
            for child in child_bodies(item):
                yield from child.walk()


def child_bodies(node) -> list[GraphBody]:
    """The bodies a node holds: a child graph's, a conditional's (in order), or none."""
    if isinstance(node, GraphNode):
        return [node.body]
    if isinstance(node, ConditionalNode):
        return node.bodies
    return []


@dataclass(frozen=True)
class Waiver:
    rule: WaivableRule
    kernel: Kernel
    reason: str
    span: Span


@dataclass(frozen=True)
class Options:
    lanes: int = 8
    copy: CopyMethod = "memcpy"
    share_modules: bool = False
    share_modules_span: Span | None = None
    gemm_workspace: int = 4 << 20  # bytes of each GEMM node's own workspace
    pdl: str = "auto"  # auto: programmatic edges where proven safe (compiler/programmatic_edges.py) | off


@dataclass
class Program:
    path: Path
    sources: list[SourceFile]
    consts: dict[str, int | float | bool]
    buffers: dict[str, Buffer]
    kernels: dict[str, Kernel]
    step: GraphBody | None
    init: GraphBody | None
    options: Options
    waivers: list[Waiver]
    # Statements resolve dropped after reporting an error: the nodes are incomplete, so what
    # no node uses or writes proves nothing (PC401, PC402 stay silent).
    dropped_statements: int = 0
    # Names in the branches of compile-time `if`s that the constants left out: a buffer named
    # there serves other constants (`-D`), so it is not unused (PC402).
    names_in_skipped_branches: frozenset[str] = frozenset()
    # which constants an update may change, and what they reach (compiler/live.py)
    live: LiveTracker = field(default_factory=LiveTracker)
    # The names each `.pipe` file's statements can use (its own declarations and imports), for
    # the edits that fix a finding: a fix may write only a name its file can see.
    names_in_scope: dict[Path, frozenset[str]] = field(default_factory=dict)

    def bodies(self):
        for body in (self.init, self.step):
            if body is not None:
                yield body
