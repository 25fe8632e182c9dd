"""PC205: an `out` or `inout` qualifier on a `const` pointer parameter."""

from __future__ import annotations

from ..codes import PC205
from ..diagnostics import Label
from ..fixes import requalify
from ..model import PointerArg
from .context import CheckContext


def access_conflict(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if isinstance(arg, PointerArg) and param.const and arg.qualifier in ("out", "inout"):
            ctx.misbind(node)
            ctx.sink.add(PC205, f"`{arg.qualifier}` says the kernel writes `{arg.buffer.name}`, but "
                         f"{param.describe()} of `{node.kernel.name}` is const", arg.span,
                         "drop the qualifier (the kernel only reads it) or make the parameter non-const",
                         labels=(Label(node.kernel.decl_span, "declared here"),), fixes=(requalify(arg.span, None),),
                         uses=ctx.uses(node))
