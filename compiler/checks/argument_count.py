"""PC201: a launch binds more or fewer arguments than the kernel has parameters."""

from __future__ import annotations

from ..codes import PC201
from ..diagnostics import Label
from .context import CheckContext


def argument_count(ctx: CheckContext) -> None:
    for node in ctx.launches():
        params, args = node.kernel.params, node.args
        if len(params) == len(args):
            continue
        ctx.misbind(node)
        signature = ", ".join(f"{p.ctype} {p.name}" for p in params)
        missing = [p.name for p in params[len(args):]]
        message = (f"`{node.kernel.name}` takes {len(params)} argument{'s' * (len(params) != 1)}, "
                   f"found {len(args)}")
        hint = (f"bind {', '.join(f'`{m}`' for m in missing)} too" if missing
                else "remove the extra arguments")
        span = args[len(params)].span.to(args[-1].span) if len(args) > len(params) else node.span
        ctx.sink.add(PC201, message, span, f"{hint}; the kernel is `{node.kernel.name}({signature})`",
                     labels=(Label(node.kernel.decl_span, "declared here"),), uses=ctx.uses(node))
