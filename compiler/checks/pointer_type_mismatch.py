"""PC203: a buffer's element type differs from the element type of the pointer it binds."""

from __future__ import annotations

from ...wording import with_article
from ..codes import PC203
from ..diagnostics import Label
from ..model import PointerArg
from .context import CheckContext


def pointer_type_mismatch(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if param.kind != "pointer" or param.dtype is None or not isinstance(arg, PointerArg):
            continue
        if param.dtype is arg.buffer.dtype:
            continue
        ctx.sink.add(PC203, f"`{arg.buffer.name}` holds `{arg.buffer.dtype.name}`, but "
                     f"{param.describe()} of `{node.kernel.name}` points to `{param.dtype.name}`",
                     arg.span, f"bind {with_article(f'`{param.dtype.name}`')} buffer, or change the kernel's parameter type",
                     labels=(Label(arg.buffer.span, "declared here"),
                             Label(node.kernel.decl_span, "kernel declared here")), uses=ctx.uses(node))
