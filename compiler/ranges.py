"""Access-range arithmetic: which elements of which buffers a launch reads and writes, from
its pointer bindings, the parameters' constness and `out` annotations, and their extents."""

from __future__ import annotations

from ..dsl import ast
from .consteval import ConstError, RuntimeValue, Value, evaluate
from .model import Access, LaunchNode, Mode, Param, PointerArg, ValueArg


def pointer_mode(param: Param, qualifier: str | None) -> Mode:
    if qualifier == "in" or param.const:
        return Mode.READ
    if qualifier == "out" or (qualifier is None and param.write_only):
        return Mode.WRITE
    return Mode.READ_WRITE


def launch_accesses(node: LaunchNode, extents: dict[tuple, dict[int, int | None]]) -> tuple[Access, ...]:
    """The element ranges a launch reads and writes, from its well-formed pointer bindings.

    A pointer covers its slice; an extent the kernel declares narrows that to the elements
    the kernel actually touches, which sharpens the dependency DAG. `extents` keeps extent
    values by `extent_inputs` and parameter: an unrolled loop launches a kernel the same way
    many times, and evaluating an extent costs far more than looking it up."""
    scalars = scalar_bindings(node)
    known = extents.setdefault(extent_inputs(node, scalars), {})
    accesses = []
    for param, arg in zip(node.kernel.params, node.args):
        if param.kind != "pointer" or not isinstance(arg, PointerArg):
            continue
        stop = arg.stop
        if param.extent is not None:
            if id(param) not in known:
                known[id(param)] = extent_value(param, node, scalars)
            extent = known[id(param)]
            if extent is not None and 0 < extent < arg.stop - arg.start:
                stop = arg.start + extent
        accesses.append(Access(arg.buffer, arg.start, stop, pointer_mode(param, arg.qualifier), arg.span))
    return tuple(accesses)


def scalar_bindings(node: LaunchNode) -> dict[str, Value]:
    values: dict[str, Value] = {}
    for param, arg in zip(node.kernel.params, node.args):
        if param.kind == "scalar" and isinstance(arg, ValueArg):
            values[param.name] = arg.value
    return values


def extent_inputs(node: LaunchNode, scalars: dict[str, Value]) -> tuple:
    """What a launch's extents are computed from besides their parameters: its configuration
    and scalar arguments, these with their types (1, 1.0 and true are equal as keys)."""
    return node.grid, node.block, tuple((name, type(v), v) for name, v in scalars.items())


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
