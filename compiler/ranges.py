"""Access-range arithmetic: which elements of which buffers a launch reads and writes, from
its pointer bindings, the parameters' constness and `out` annotations, their extents, and the
buffers a bound table of addresses names (indirect.py)."""

from __future__ import annotations

from ..dsl import ast
from .consteval import ConstError, RuntimeValue, Value, evaluate, names_read
from .indirect import entry_accesses
from .model import Access, Kernel, LaunchNode, Mode, Param, PointerArg, ValueArg


def pointer_mode(param: Param, qualifier: str | None) -> Mode:
    if qualifier == "in" or param.const:
        return Mode.READ
    if qualifier == "out" or (qualifier is None and param.write_only):
        return Mode.WRITE
    return Mode.READ_WRITE


def launch_accesses(node: LaunchNode, extents: Extents) -> tuple[Access, ...]:
    """The element ranges a launch reads and writes, from its well-formed pointer bindings.

    A pointer covers its slice; an extent the kernel declares narrows that to the elements
    the kernel actually touches, which sharpens the dependency DAG. A table of addresses is
    read, and so are (or written) the buffers its elements in that range name."""
    at_launch = extents.of_launch(node)
    accesses = []
    for param, arg, extent in zip(node.kernel.params, node.args, at_launch):
        if param.kind != "pointer" or not isinstance(arg, PointerArg):
            continue
        stop = arg.stop
        if extent is not None:
            if 0 < extent < arg.stop - arg.start:
                stop = arg.start + extent
        if arg.buffer.is_table:  # a kernel that writes one is PC325's
            accesses.append(Access(arg.buffer, arg.start, stop, Mode.READ, arg.span))
            accesses += entry_accesses(node, param, arg, stop)
            continue
        accesses.append(Access(arg.buffer, arg.start, stop, pointer_mode(param, arg.qualifier), arg.span))
    return tuple(accesses)


def scalar_bindings(node: LaunchNode) -> dict[str, Value]:
    values: dict[str, Value] = {}
    for param, arg in zip(node.kernel.params, node.args):
        if param.kind == "scalar" and isinstance(arg, ValueArg):
            values[param.name] = arg.value
    return values


_UNBOUND = object()  # a name the extent reads that is no scalar bound to a value
Inputs = tuple[tuple[int, ...], bool, bool]  # positions of the scalars read, gridDim read, blockDim read


class Extents:
    """Extent values already computed, per launch configuration and the scalars any extent of
    the kernel names, with their types (1, 1.0 and true are equal keys otherwise). An unrolled
    loop launches a kernel many times with arguments that change, such as the loop variable,
    while its extents read a few that do not; evaluating an extent costs far more than looking
    it up, and one lookup a launch less than one per parameter."""

    def __init__(self) -> None:
        self.values: dict[tuple, tuple[int | None, ...]] = {}
        # by id: the kernel or parameter, held so that its id stays its own while the values
        # keyed by it live, and where the scalars its extents read are bound (the names they read)
        self.kernels: dict[int, tuple[Kernel, tuple[int | None, ...]]] = {}
        self.names: dict[int, tuple[Param, tuple[str, ...]]] = {}
        self.read_inputs: dict[int, Inputs] = {}  # by id(param)
        # by id(kernel): (position, `inputs`) of each pointer parameter with an extent, and what
        # any of them reads (`inputs` of them all)
        self.extent_params: dict[int, tuple[Kernel, tuple[tuple[int, Inputs], ...], Inputs]] = {}

    def names_read(self, param: Param) -> tuple[str, ...]:
        """The names `param`'s extent reads, found once."""
        assert param.extent is not None
        entry = self.names.get(id(param))
        if entry is None:
            entry = self.names[id(param)] = (param, names_read(param.extent.expr))
        return entry[1]

    def inputs(self, param: Param, kernel: Kernel) -> Inputs:
        """Which of the kernel's parameters `param`'s extent reads (their positions), and
        whether it reads gridDim and blockDim, found once."""
        found = self.read_inputs.get(id(param))
        if found is None:
            names = self.names_read(param)  # holds `param`, so its id stays its own
            positions = tuple(i for i, p in enumerate(kernel.params) if p.name in names)
            found = self.read_inputs[id(param)] = (positions, "gridDim" in names, "blockDim" in names)
        return found

    def pointers_with_extent(self, kernel: Kernel) -> tuple[tuple[tuple[int, Inputs], ...], Inputs]:
        """The position of each pointer parameter of `kernel` that declares an extent, with its
        `inputs`, and what any of them reads, found once per kernel."""
        entry = self.extent_params.get(id(kernel))
        if entry is None:
            params = tuple((i, self.inputs(param, kernel)) for i, param in enumerate(kernel.params)
                           if param.kind == "pointer" and param.extent is not None)
            union = (tuple(sorted({i for _, (positions, _, _) in params for i in positions})),
                     any(grid for _, (_, grid, _) in params), any(block for _, (_, _, block) in params))
            entry = self.extent_params[id(kernel)] = (kernel, params, union)
        return entry[1], entry[2]

    def of_launch(self, node: LaunchNode) -> tuple[int | None, ...]:
        """extent_value of each of the kernel's parameters at this launch (None for one without
        an extent), computed once per configuration and inputs."""
        kernel = node.kernel
        entry = self.kernels.get(id(kernel))
        if entry is None:
            names = dict.fromkeys(name for param in kernel.params if param.extent is not None
                                  for name in self.names_read(param))
            # where each name is a scalar parameter (the last of the name, as scalar_bindings)
            scalar_at = {param.name: i for i, param in enumerate(kernel.params) if param.kind == "scalar"}
            entry = self.kernels[id(kernel)] = (kernel, tuple(scalar_at.get(name) for name in names))
        # scalar_bindings(node)'s values of those names, without the dict of every scalar: the
        # inputs are looked up at every launch, the extents computed at few
        inputs = tuple([_bound_value(node, i) for i in entry[1]])
        key = (id(kernel), node.grid, node.block, inputs, tuple(map(type, inputs)))
        if key not in self.values:
            scalars = scalar_bindings(node)
            self.values[key] = tuple(extent_value(param, node, scalars) if param.extent is not None else None
                                     for param in kernel.params)
        return self.values[key]


def _bound_value(node: LaunchNode, position: int | None) -> Value | object:
    """The value the launch binds at `position`, _UNBOUND where it binds none."""
    arg = node.args[position] if position is not None and position < len(node.args) else None
    return arg.value if isinstance(arg, ValueArg) else _UNBOUND


def extent_value(param: Param, node: LaunchNode, scalars: dict[str, Value]) -> int | None:
    """The number of elements `param`'s extent expression asks for at this launch, or None
    when it cannot be computed (a parameter it uses is not a constant)."""
    dims = {"gridDim": node.grid, "blockDim": node.block}

    def lookup(ident: ast.Ident) -> Value:
        if ident.text in scalars:
            return scalars[ident.text]
        raise ConstError(f"`{ident.text}` is not a scalar parameter", ident.span, "")

    try:
        value = evaluate(_dims_to_names(param.extent.expr, dims), lookup)
    except (ConstError, RuntimeValue):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dims_to_names(expr: ast.Expr, dims: dict) -> ast.Expr:
    """Replace `gridDim.x`-style attributes by their values at this launch. Iterative, with the
    rebuilt operands on a stack: an extent may be a long chain such as `n + n + ... + n`."""
    rebuilt: list[ast.Expr] = []
    pending: list = [expr]  # expressions to visit, and (node, operand count) to rebuild
    while pending:
        item = pending.pop()
        if isinstance(item, tuple):
            node, count = item
            parts = rebuilt[len(rebuilt) - count :]
            del rebuilt[len(rebuilt) - count :]
            match node:
                case ast.Binary(op=op, span=span):
                    rebuilt.append(ast.Binary(op, parts[0], parts[1], span))
                case ast.Unary(op=op, span=span):
                    rebuilt.append(ast.Unary(op, parts[0], span))
                case ast.Call(func=func, keywords=keywords, span=span):
                    rebuilt.append(ast.Call(func, tuple(parts), keywords, span))
            continue
        match item:
            case ast.Attribute(base=ast.Name(ident=ident), name=name, span=span) if ident.text in dims:
                axis = "xyz".find(name.text)
                rebuilt.append(ast.IntLit(dims[ident.text][axis], span) if axis >= 0 else item)
            case ast.Binary(left=left, right=right):
                pending += [(item, 2), right, left]
            case ast.Unary(operand=operand):
                pending += [(item, 1), operand]
            case ast.Call(args=args):
                pending += [(item, len(args)), *reversed(args)]
            case _:
                rebuilt.append(item)
    return rebuilt.pop()
