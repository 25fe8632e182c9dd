"""PC204: a constant that the scalar parameter (or a fill's element type) cannot hold."""

from __future__ import annotations

from ..codes import PC204
from ..model import FillNode, ValueArg
from ..consteval import representable
from ...plan.arithmetic import argument_problem
from .context import CheckContext


def scalar_out_of_range(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if param.kind != "scalar" or param.dtype is None or not isinstance(arg, ValueArg):
            continue
        if problem := argument_problem(arg.value, param.dtype):
            ctx.sink.add(PC204, f"{param.describe()} of `{node.kernel.name}`: {problem}", arg.span,
                         f"pass a value that fits `{param.ctype}`", uses=ctx.uses(node))
    for node in ctx.nodes:
        if isinstance(node, FillNode) and (problem := representable(node.value, node.buffer.dtype)):
            ctx.sink.add(PC204, f"fill of `{node.buffer.name}`: {problem}", node.span,
                         f"fill with a value that fits `{node.buffer.dtype.name}`", uses=ctx.uses(node))
