"""PC203: a buffer's element type differs from the element type of the pointer it binds; a
table of addresses bound to a pointer that does not point to pointers, or the reverse; a
table naming a buffer of another type than the pointers the kernel reads from it."""

from __future__ import annotations

from ...wording import with_article
from ..codes import PC203
from ..diagnostics import Label
from ..model import LaunchNode, Param, PointerArg
from .context import CheckContext


def pointer_type_mismatch(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if param.kind != "pointer" or not isinstance(arg, PointerArg):
            continue
        if param.table != arg.buffer.is_table:
            kernel = _kernel(param, node)
            what = (f"`{arg.buffer.name}` is no table of addresses, but {kernel} points to pointers" if param.table
                    else f"`{arg.buffer.name}` is a table of addresses, but {kernel} points to `{_named(param.dtype)}`")
            ctx.sink.add(PC203, what, arg.span, "bind a table (`buffer t: ptr[N] = addresses(a, b, ...)`) to a "
                         "pointer to pointers (`const float* const* t`), and a buffer to a pointer", labels=_declared(arg, node),
                         uses=ctx.uses(node))
        elif param.table:
            for entry in arg.buffer.init.entries[arg.start:arg.stop]:
                if param.dtype is not None and entry.buffer.dtype is not param.dtype:
                    ctx.sink.add(PC203, f"the table `{arg.buffer.name}` points to `{entry.buffer.name}`, which "
                                 f"holds `{entry.buffer.dtype.name}`, but {_kernel(param, node)} points to pointers to "
                                 f"`{param.dtype.name}`", arg.span,
                                 f"name `{param.dtype.name}` buffers in the table, or change the kernel's parameter type",
                                 labels=(Label(entry.span, "named here"), _declared(arg, node)[1]), uses=ctx.uses(node))
        elif param.dtype is not None and param.dtype is not arg.buffer.dtype:
            ctx.sink.add(PC203, f"`{arg.buffer.name}` holds `{arg.buffer.dtype.name}`, but "
                         f"{_kernel(param, node)} points to `{param.dtype.name}`",
                         arg.span, f"bind {with_article(f'`{param.dtype.name}`')} buffer, or change the kernel's "
                         "parameter type", labels=_declared(arg, node), uses=ctx.uses(node))


# The wording and labels are made only for a finding: the check visits every pointer binding
# (a million on a 100,000-node step) and finds almost none.
def _kernel(param: Param, node: LaunchNode) -> str:
    return f"{param.describe()} of `{node.kernel.name}`"


def _declared(arg: PointerArg, node: LaunchNode) -> tuple[Label, Label]:
    return Label(arg.buffer.span, "declared here"), Label(node.kernel.decl_span, "kernel declared here")


def _named(dtype) -> str:
    return dtype.name if dtype is not None else "void"
