"""PC302: a value that changes between steps (a buffer element, the step index) bound to a
scalar parameter, which the graph would freeze at build time."""

from __future__ import annotations

from ..codes import PC302
from ..model import RuntimeValueArg
from .context import CheckContext


def baked_per_step_value(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if not isinstance(arg, RuntimeValueArg) or (param.kind == "pointer" and arg.buffer is not None):
            continue
        target = f"`{arg.buffer.name}`" if arg.buffer is not None else "a one-element buffer the step updates"
        ctx.sink.add(PC302, f"{param.describe()} of `{node.kernel.name}` is bound by value to "
                     f"{arg.description}, which changes between steps; the graph would keep the value "
                     "it had when it was built", arg.span,
                     f"make the parameter a pointer and bind {target}; the kernel reads the current value",
                     label="baked at build time", uses=ctx.uses(node))
