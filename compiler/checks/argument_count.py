"""PC201: a launch binds more or fewer arguments than the kernel has parameters."""

from __future__ import annotations

from ...wording import counted
from ..codes import PC201
from ..diagnostics import Label
from ..fixes import argument_count_fix
from ..model import LaunchNode, Param, PointerArg, Program
from .context import CheckContext


def argument_count(ctx: CheckContext) -> None:
    for node in ctx.launches():
        params, args = node.kernel.params, node.args
        if len(params) == len(args):
            continue
        ctx.misbind(node)
        signature = ", ".join(f"{p.ctype} {p.name}" for p in params)
        missing = [p.name for p in params[len(args):]]
        message = f"`{node.kernel.name}` takes {counted(len(params), 'argument')}, found {len(args)}"
        hint = (f"bind {', '.join(f'`{m}`' for m in missing)} too" if missing
                else "remove the extra arguments")
        span = args[len(params)].span.to(args[-1].span) if len(args) > len(params) else node.span
        fix = argument_count_fix(node.span, [a.span for a in args], _placeholders(ctx.program, node))
        ctx.sink.add(PC201, message, span, f"{hint}; the kernel is `{node.kernel.name}({signature})`",
                     labels=(Label(node.kernel.decl_span, "declared here"),), fixes=(fix,),
                     uses=ctx.uses(node))


def _placeholders(program: Program, node: LaunchNode) -> list[str]:
    """What to bind to each parameter: the one buffer of its element type the launch's file
    can see and the launch does not bind yet, the one constant named as the parameter (in
    any case: `N` for `n`), else the parameter's own name, for the user to replace."""
    visible = program.names_in_scope.get(node.span.source.path, frozenset())
    bound = {arg.buffer.name for arg in node.args if isinstance(arg, PointerArg)}
    return [_placeholder(program, visible, bound, param) for param in node.kernel.params]


def _placeholder(program: Program, visible: frozenset[str], bound: set[str], param: Param) -> str:
    if param.kind == "pointer" and param.dtype is not None:
        fits = [name for name, buffer in program.buffers.items()
                if name in visible and name not in bound and buffer.dtype is param.dtype]
    elif param.kind == "scalar":
        fits = [name for name in program.consts if name in visible and name.lower() == param.name.lower()]
    else:
        fits = []
    return fits[0] if len(fits) == 1 else param.name
