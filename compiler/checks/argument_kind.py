"""PC202: a pointer parameter bound to a value, a scalar parameter bound to a buffer, or a
parameter of a type that cannot be bound at all."""

from __future__ import annotations

from ..codes import PC202
from ..diagnostics import Label
from ..model import PointerArg, RuntimeValueArg, ValueArg
from .context import CheckContext


def argument_kind(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if param.kind == "unsupported":
            ctx.sink.add(PC202, f"parameter {param.index + 1} `{param.name}` of `{node.kernel.name}` "
                         "has a type pipec cannot bind", arg.span,
                         "take pointers to plain element types or scalars of plain types",
                         labels=_declared(node))
        elif param.kind == "pointer" and isinstance(arg, ValueArg):
            ctx.sink.add(PC202, f"{param.describe()} of `{node.kernel.name}` is a pointer, but "
                         f"`{arg.span.text}` is a value", arg.span,
                         "bind a buffer or a slice of one", labels=_declared(node))
        elif param.kind == "scalar" and isinstance(arg, PointerArg):
            ctx.sink.add(PC202, f"{param.describe()} of `{node.kernel.name}` is a scalar, but "
                         f"`{arg.buffer.name}` is a buffer", arg.span,
                         "pass a constant, or change the parameter to a pointer", labels=_declared(node))
        elif param.kind == "pointer" and isinstance(arg, RuntimeValueArg) and arg.buffer is not None:
            ctx.sink.add(PC202, f"{param.describe()} of `{node.kernel.name}` is a pointer, but "
                         f"{arg.description} is a value", arg.span,
                         f"bind a pointer to it with a slice, e.g. `{arg.buffer.name}[i:]`",
                         labels=_declared(node))


def _declared(node) -> tuple[Label, ...]:
    """Made only for a finding: most of millions of bindings have none."""
    return (Label(node.kernel.decl_span, "declared here"),)
