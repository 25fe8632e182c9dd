"""PC202: a pointer parameter bound to a value, a scalar parameter bound to a buffer, or a
parameter of a type that cannot be bound at all."""

from __future__ import annotations

from ..codes import PC202
from ..diagnostics import Label
from ..model import Arg, LaunchNode, Param, PointerArg, RuntimeValueArg, ValueArg
from .context import CheckContext


def argument_kind(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        problem = _problem(node, param, arg)
        if problem is None:
            continue
        message, hint = problem
        ctx.misbind(node)
        ctx.sink.add(PC202, message, arg.span, hint, labels=(Label(node.kernel.decl_span, "declared here"),),
                     uses=ctx.uses(node))


def _problem(node: LaunchNode, param: Param, arg: Arg) -> tuple[str, str] | None:
    """The message and hint for an argument of the wrong kind; None for one of the right kind."""
    kernel = node.kernel.name
    if param.kind == "unsupported":
        return (f"parameter {param.index + 1} `{param.name}` of `{kernel}` has a type pipec cannot bind",
                "take pointers to plain element types or scalars of plain types")
    if param.kind == "pointer" and isinstance(arg, ValueArg):
        return (f"{param.describe()} of `{kernel}` is a pointer, but `{arg.span.text}` is a value",
                "bind a buffer or a slice of one")
    if param.kind == "scalar" and isinstance(arg, PointerArg):
        return (f"{param.describe()} of `{kernel}` is a scalar, but `{arg.buffer.name}` is a buffer",
                "pass a constant, or change the parameter to a pointer")
    if param.kind == "pointer" and isinstance(arg, RuntimeValueArg) and arg.buffer is not None:
        return (f"{param.describe()} of `{kernel}` is a pointer, but {arg.description} is a value",
                f"bind a pointer to it with a slice, e.g. `{arg.buffer.name}[i:]`")
    return None
