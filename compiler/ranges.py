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


def launch_accesses(node: LaunchNode) -> tuple[Access, ...]:
    """The element ranges a launch reads and writes, from its well-formed pointer bindings.

    A pointer covers its slice; an extent the kernel declares narrows that to the elements
    the kernel actually touches, which sharpens the dependency DAG."""
    scalars = scalar_bindings(node)
    accesses = []
    for param, arg in zip(node.kernel.params, node.args):
        if param.kind != "pointer" or not isinstance(arg, PointerArg):
            continue
        stop = arg.stop
        if param.extent is not None:
            extent = extent_value(param, node, scalars)
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
    """Replace `gridDim.x`-style attributes by their values at this launch."""
    match expr:
        case ast.Attribute(base=ast.Name(ident=ident), name=name, span=span) if ident.text in dims:
            axis = "xyz".find(name.text)
            if axis >= 0:
                return ast.IntLit(dims[ident.text][axis], span)
            return expr
        case ast.Binary(op=op, left=left, right=right, span=span):
            return ast.Binary(op, _dims_to_names(left, dims), _dims_to_names(right, dims), span)
        case ast.Unary(op=op, operand=operand, span=span):
            return ast.Unary(op, _dims_to_names(operand, dims), span)
        case ast.Call(func=func, args=args, keywords=keywords, span=span):
            return ast.Call(func, tuple(_dims_to_names(a, dims) for a in args), keywords, span)
        case _:
            return expr
