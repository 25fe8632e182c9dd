"""PC309: a pointer parameter bound to `null`."""

from __future__ import annotations

from ..codes import PC309
from ..model import NullArg
from .context import CheckContext


def null_pointer_argument(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if isinstance(arg, NullArg):
            ctx.misbind(node)
            ctx.sink.add(PC309, f"{param.describe()} of `{node.kernel.name}` is bound to `null`",
                         arg.span, "bind a buffer; a kernel that dereferences null kills the context "
                         "and every later call in it", label="null pointer", uses=ctx.uses(node))
