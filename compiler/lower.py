"""Lowering: the checked model and its DAGs to the plan the runtime builds a CUDA graph from.

Each graph body becomes a `GraphSpec` of primitive nodes with edges: the hazard DAG, plus the
edges that fit it into at most `lanes` parallel chains. Measured on an H200 (docs/plan.md), a
graph with many independent branches costs the host hundreds of microseconds per launch, while
a few chains launch in microseconds and keep most of the overlap; lanes bound the exposed
width without giving up the overlap below it.

GEMM statements become gemm nodes, grouped in the plan by the library kernel they reach.
Fills become memset nodes with the widest element size the value allows; copies become memcpy
nodes or generated copy kernels (`option copy`). Device control flow becomes conditional nodes
whose bodies are graphs of their own, each decided by a generated kernel (`codegen.py`).
"""

from __future__ import annotations

import hashlib

from .._version import __version__
from . import codegen
from .dag import Dag, add_lanes
from .live_record import PendingSite, launch_sites, operand_site, with_record
from .programmatic_edges import EdgeDecider, UnitHazards
from ..plan.arithmetic import argument_value
from ..plan.dtypes import fill_pattern
from .model import (
    CONTAINERS, CollectiveNode, CollectiveOperand, ConditionalNode, CopyNode, DecideNode, FillNode, GemmNode,
    GraphBody, GraphNode, LaunchNode, MatrixView, Mode, PointerArg, Program, ValueArg,
)
from ..plan.schema import (
    AccessSpec, AddressSpec, ArgSpec, BufferSpec, ChildGraphNodeSpec, CollectiveNodeSpec, CollectiveOperandSpec,
    ConditionalNodeSpec, GemmGroupSpec, GemmNodeSpec, GemmUseSpec, GraphSpec, HazardEdge, InitSpec, KernelNodeSpec, Location,
    MatrixSpec, MemcpyNodeSpec, MemsetNodeSpec, ModuleSpec, NodeSpec, Plan,
)


def _location(span) -> Location:
    return Location(span.source.display_path(), span.line, span.column)


_MODE_NAMES = {Mode.READ: "r", Mode.WRITE: "w", Mode.READ_WRITE: "rw"}


class _Lowering:
    def __init__(self, program: Program, dags: dict[int, Dag], hazard_lists: UnitHazards, arch: str,
                 include_dirs: tuple[str, ...]) -> None:
        self.program = program
        self.dags = dags
        self.arch = arch  # programmatic edges need sm_90 or newer
        self.include_dirs = include_dirs
        self.graphs: list[GraphSpec | None] = []
        self.modules: dict[str, ModuleSpec] = {}
        self.gemms: list[tuple[GemmNodeSpec, str]] = []  # each lowered gemm node and its scope
        # One AccessSpec, Location and ArgSpec per distinct value, shared by the nodes that have
        # it: an unrolled program repeats most of them thousands of times, a frozen dataclass
        # costs several times more to build than to look up, and the plan's JSON writes each
        # shared one once (compiler/emit.py).
        self.access_specs: dict[tuple, AccessSpec] = {}
        self.locations: dict[tuple[int, int], Location] = {}  # by id(span.source), span.start
        self.arg_specs: dict[tuple, ArgSpec] = {}
        self.edges = EdgeDecider(hazard_lists)
        self.live_sites: list[PendingSite] = []  # kernel node fields updatable constants reach

    def module(self, key: str, name: str, path: str | None, source: str | None) -> int:
        if key not in self.modules:
            self.modules[key] = ModuleSpec(len(self.modules), name, path, source, self.include_dirs)
        return self.modules[key].index

    def glue_module(self) -> int:
        return self.module("<glue>", codegen.GLUE_MODULE_NAME, None, codegen.glue_source())

    def accesses(self, node) -> tuple[AccessSpec, ...]:
        specs = []
        for a in node.accesses:
            key = (a.buffer.name, a.start, a.stop, a.mode)
            spec = self.access_specs.get(key)
            if spec is None:
                assert self.program.buffers.get(a.buffer.name) is a.buffer, \
                    f"node `{node.name}` names buffer `{a.buffer.name}`, which the plan does not declare"
                spec = self.access_specs[key] = AccessSpec(a.buffer.name, a.start, a.stop, _MODE_NAMES[a.mode])
            specs.append(spec)
        return tuple(specs)

    def location(self, span) -> Location:
        key = (id(span.source), span.start)
        location = self.locations.get(key)
        if location is None:
            location = self.locations[key] = _location(span)
        return location

    def lower_body(self, body: GraphBody, scope: str, conditional: bool = False) -> int:
        index = len(self.graphs)
        self.graphs.append(None)  # reserve: children get higher indices
        nodes = tuple(self.lower_node(index, i, item, scope) for i, item in enumerate(body.items))
        dag = self.dags[id(body)]
        edges = add_lanes(len(nodes), dag.edges, self.program.options.lanes)
        hazards = tuple(HazardEdge(a, b, h.kind, h.buffer) for (a, b), h in sorted(dag.hazards.items()))
        kinds = self.edges.kinds(body.items, nodes, edges, self.ordinary_edges(conditional))
        self.graphs[index] = spec = GraphSpec(index, body.name, scope, nodes, tuple(edges), hazards, kinds)
        self.edges.lowered(spec, body.items)
        return index

    def ordinary_edges(self, conditional: bool) -> str | None:
        """Why every edge of a body is ordinary, or None (docs/plan.md, "Programmatic edges")."""
        if self.program.options.pdl == "off":
            return 'option pdl = "off"'
        digits = "".join(c for c in self.arch.removeprefix("sm_") if c.isdigit())
        if digits and int(digits) < 90:
            return f"{self.arch} has no programmatic launch (sm_90 or newer)"
        if conditional:
            return "in a conditional node's body"
        return None

    def lower_node(self, graph: int, index: int, item, scope: str) -> NodeSpec:
        location, accesses = self.location(item.span), self.accesses(item)
        if isinstance(item, LaunchNode):
            self.live_sites += launch_sites(graph, index, item, self.arch)
            source = item.kernel.source
            module = self.module(str(source.path), source.path.name, str(source.path), None)
            args = tuple(self.lower_arg(p, a) for p, a in zip(item.kernel.params, item.args))
            return KernelNodeSpec(index, item.name, location, accesses, module, item.kernel.name,
                                  item.grid, item.block, item.shared_bytes, args)
        if isinstance(item, FillNode):
            return self.lower_fill(index, item, location, accesses)
        if isinstance(item, CopyNode):
            return self.lower_copy(index, item, location, accesses)
        if isinstance(item, DecideNode):
            return self.lower_decide(graph, index, item, location, accesses)
        if isinstance(item, GemmNode):
            spec = lower_gemm(index, item, location, accesses)
            self.gemms.append((spec, scope))
            return spec
        if isinstance(item, CollectiveNode):
            return lower_collective(index, item, location, accesses)
        if isinstance(item, ConditionalNode):
            # The bodies belong to the node, not cloned like a child graph: they share its scope.
            bodies = tuple(self.lower_body(b, scope, conditional=True) for b in item.bodies)
            flag = item.flag
            return ConditionalNodeSpec(index, item.name, location, accesses, item.kind, item.construct,
                                       item.index, bodies, flag.buffer.name if flag else None,
                                       flag.start if flag else None, item.control.name)
        assert isinstance(item, GraphNode)
        # Eager and shared work keeps its one scope; every other child graph gets its own.
        child_scope = scope if scope in ("eager", "shared") else item.body.name
        return ChildGraphNodeSpec(index, item.name, location, accesses,
                                  self.lower_body(item.body, child_scope))

    def lower_arg(self, param, arg) -> ArgSpec:
        if isinstance(arg, PointerArg):
            key: tuple = ("pointer", arg.buffer.name, arg.start * arg.buffer.dtype.size)
        else:
            assert isinstance(arg, ValueArg) and not isinstance(arg.value, str), "checks reject every other binding"
            value = argument_value(arg.value, param.dtype)
            # a float by its bits: 0.0 and -0.0 are equal keys otherwise, with other texts
            key = ("scalar", param.dtype.name, value.hex() if type(value) is float else value)
        spec = self.arg_specs.get(key)
        if spec is None:
            kind, ctype = key[0], "ptr" if key[0] == "pointer" else key[1]
            spec = self.arg_specs[key] = (ArgSpec(kind, ctype, key[1], key[2]) if kind == "pointer"
                                          else ArgSpec(kind, ctype, value=value))
        return spec

    def lower_fill(self, index, item: FillNode, location, accesses) -> NodeSpec:
        dtype = item.buffer.dtype
        size, pattern = fill_pattern(dtype, item.value)
        offset = item.start * dtype.size
        count = (item.stop - item.start) * dtype.size // size
        if size <= 4:
            return MemsetNodeSpec(index, item.name, location, accesses, item.buffer.name, offset,
                                  size, pattern, count)
        args = (ArgSpec("pointer", "ptr", item.buffer.name, offset),
                ArgSpec("scalar", "u64", value=pattern), ArgSpec("scalar", "u64", value=count))
        return KernelNodeSpec(index, item.name, location, accesses, self.glue_module(),
                              "pipec_fill_8", (codegen.grid_for(count), 1, 1),
                              (codegen.THREADS, 1, 1), 0, args)

    def lower_decide(self, graph: int, index: int, item: DecideNode, location, accesses) -> KernelNodeSpec:
        module = self.module("<conditions>", codegen.CONDITIONS_MODULE_NAME, None, codegen.conditions_source())
        args = [ArgSpec("handle", "u64", value=item.conditional), ArgSpec("in_graph", "u32")]
        if item.role == "flag":
            flag = item.flag
            function = f"pipec_condition_{flag.buffer.dtype.name}"
            args.append(ArgSpec("pointer", "ptr", flag.buffer.name, flag.start * flag.buffer.dtype.size))
        else:
            function = "pipec_condition_every" if item.role == "every" else "pipec_condition_repeat"
        args.append(ArgSpec("pointer", "ptr", item.control.name, 0))
        self.live_sites += operand_site(graph, index, item, len(args))
        args.append(ArgSpec("scalar", "u32", value=item.operand))
        if item.role.startswith("repeat"):
            args.append(ArgSpec("scalar", "u32", value=int(item.role == "repeat-start")))
        return KernelNodeSpec(index, item.name, location, accesses, module, function, (1, 1, 1),
                              (1, 1, 1), 0, tuple(args))

    def lower_copy(self, index, item: CopyNode, location, accesses) -> NodeSpec:
        size = item.src.buffer.dtype.size
        src_offset, dst_offset = item.src.start * size, item.dst.start * size
        nbytes = (item.src.stop - item.src.start) * size
        if self.program.options.copy == "memcpy":
            return MemcpyNodeSpec(index, item.name, location, accesses, item.src.buffer.name,
                                  src_offset, item.dst.buffer.name, dst_offset, nbytes)
        width = codegen.copy_width(src_offset, dst_offset, nbytes)
        units = nbytes // width
        args = (ArgSpec("pointer", "ptr", item.src.buffer.name, src_offset),
                ArgSpec("pointer", "ptr", item.dst.buffer.name, dst_offset),
                ArgSpec("scalar", "u64", value=units))
        return KernelNodeSpec(index, item.name, location, accesses, self.glue_module(),
                              f"pipec_copy_{width}", (codegen.grid_for(units), 1, 1),
                              (codegen.THREADS, 1, 1), 0, args)


def _matrix(view: MatrixView, batched: bool) -> MatrixSpec:
    dtype = view.buffer.dtype
    stride = view.rows * view.cols if batched and view.batched else 0
    return MatrixSpec(view.buffer.name, view.start * dtype.size, dtype.name, view.rows, view.cols,
                      view.cols, stride)


def lower_gemm(index: int, item: GemmNode, location, accesses) -> GemmNodeSpec:
    """The node in the plan's terms: byte offsets, leading dimensions and batch strides in
    elements. Bias and bias gradient are 1 x length rows; aux is the m x n matrix the library
    lays out with its own leading dimension (in bits for the ReLU mask)."""
    batched = item.batch > 1
    aux = None
    if item.aux is not None:
        view = item.aux
        aux = MatrixSpec(view.buffer.name, view.start * view.buffer.dtype.size, view.buffer.dtype.name,
                         item.m, item.n, item.aux_ld, item.m * item.aux_ld if batched else 0)
    return GemmNodeSpec(
        index, item.name, location, accesses, item.m, item.n, item.k, item.batch,
        _matrix(item.a, batched), _matrix(item.b, batched), _matrix(item.c, batched),
        item.trans_a, item.trans_b, item.alpha, item.beta, item.compute, item.epilogue,
        _matrix(item.bias, False) if item.bias is not None else None, aux,
        _matrix(item.bias_grad, False) if item.bias_grad is not None else None,
        item.workspace.name, item.workspace.nbytes,
    )


def _alignment(spec: GemmNodeSpec) -> int:
    offsets = [m.byte_offset for m in (spec.a, spec.b, spec.c, spec.bias, spec.aux, spec.bias_grad)
               if m is not None]
    return min(256, *((offset & -offset) or 256 for offset in offsets))


def gemm_groups(uses: list[tuple[GemmNodeSpec, str]]) -> tuple[GemmGroupSpec, ...]:
    """The gemm nodes grouped by descriptor (what decides the library's kernel), in the order
    each descriptor first appears."""
    groups: dict[tuple, list[tuple[GemmNodeSpec, str]]] = {}
    for spec, scope in uses:
        # in a batch, an operand read by every matrix (batch stride 0) is another layout
        shared = tuple(name for name, m in (("a", spec.a), ("b", spec.b)) if spec.batch > 1 and not m.batch_stride)
        key = (spec.m, spec.n, spec.k, spec.batch, (spec.a.dtype, spec.b.dtype, spec.c.dtype),
               spec.trans_a, spec.trans_b, spec.epilogue, spec.compute, _alignment(spec), shared,
               spec.bias.dtype if spec.bias is not None else None,
               (spec.aux.dtype, spec.aux.ld) if spec.aux is not None else None)
        groups.setdefault(key, []).append((spec, scope))
    out = []
    for key, members in groups.items():
        # the text leaves out the bias and aux types and the aux ld: the types, n and the epilogue imply them
        m, n, k, batch, types, trans_a, trans_b, epilogue, compute, alignment, shared, _, _ = key
        text = (f"{m}x{n}x{k}" + (f" batch {batch}" if batch > 1 else "") + f" {'/'.join(types)}"
                f" {'T' if trans_a else 'N'}{'T' if trans_b else 'N'} {epilogue} {compute} align {alignment}"
                + "".join(f" shared {name}" for name in shared))
        scopes = tuple(dict.fromkeys([scope for _, scope in members] + ["eager"]))
        out.append(GemmGroupSpec(text, m, n, k, batch, types, trans_a, trans_b, epilogue, compute,
                                 alignment, tuple(GemmUseSpec(s.name, scope) for s, scope in members),
                                 scopes))
    return tuple(out)


def lower_collective(index: int, item: CollectiveNode, location, accesses) -> CollectiveNodeSpec:
    return CollectiveNodeSpec(index, item.name, location, accesses, item.kind, item.op,
                              tuple(_collective_operand(item.kind, operand) for operand in item.operands),
                              item.root)


def _collective_operand(kind: str, operand: CollectiveOperand) -> CollectiveOperandSpec:
    src, dst = operand.src, operand.dst
    size = src.buffer.dtype.size
    # the per-rank count: the source's, except for reducescatter, which sends world x count
    per_rank = dst if kind == "reducescatter" else src
    return CollectiveOperandSpec(src.buffer.dtype.name, per_rank.stop - per_rank.start,
                                 src.buffer.name, src.start * size, dst.buffer.name, dst.start * size)


def _step_first_access(program: Program) -> dict[str, str | None]:
    first: dict[str, str] = {}
    if program.step is not None:
        for node in program.step.walk():
            if isinstance(node, CONTAINERS):
                continue
            for access in node.accesses:
                first.setdefault(access.buffer.name, "write" if access.mode is Mode.WRITE else "read")
    return {name: first.get(name) for name in program.buffers}


def build_plan(program: Program, dags: list[Dag], hazard_lists: UnitHazards, arch: str, compiler: str,
               include_dirs: tuple[str, ...] = ()) -> Plan:
    lowering = _Lowering(program, {id(d.body): d for d in dags}, hazard_lists, arch, include_dirs)
    init = lowering.lower_body(program.init, "eager") if program.init is not None else None
    step_scope = "shared" if program.options.share_modules else "step"
    step = lowering.lower_body(program.step, step_scope) if program.step is not None else None
    usage = _step_first_access(program)
    buffers = tuple(
        BufferSpec(
            b.name, "u64" if b.is_table else b.dtype.name, b.shape, b.memory,  # a table: the words its addresses are
            InitSpec(b.init.kind, b.init.args, b.init.seed, str(b.init.path) if b.init.path else None,
                     tuple(AddressSpec(e.buffer.name, e.start * e.buffer.dtype.size) for e in b.init.entries)),
            b.labels, b.nbytes, _location(b.span), usage[b.name], b.replicated,
        )
        for b in program.buffers.values()
    )
    main_source = next(s for s in program.sources if s.path == program.path)
    plan = Plan(
        pipe=main_source.display_path(),
        pipe_sha256=hashlib.sha256(main_source.text.encode()).hexdigest(),
        pipec_version=__version__, arch=arch, compiler=compiler, lanes=program.options.lanes,
        buffers=buffers, modules=tuple(lowering.modules.values()),
        graphs=tuple(lowering.graphs), step=step, init=init,
        gemm_groups=gemm_groups(lowering.gemms),
        world_size=int(program.consts["WORLD_SIZE"]), rank=int(program.consts["RANK"]),
    )
    return with_record(plan, program.live, lowering.live_sites)
