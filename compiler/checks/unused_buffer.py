"""PC402: a buffer that no node of the init block or the step reads or writes, that no launch
binds (directly, or in a table of addresses it binds), and that no compile-time branch left out
by the constants names (it serves other `-D` values)."""

from __future__ import annotations

from ..codes import PC402
from .context import CheckContext


def unused_buffer(ctx: CheckContext) -> None:
    program = ctx.program
    if program.step is None and program.init is None:
        return  # a file of shared declarations
    if not ctx.accesses_known:
        return  # a statement or binding with an error may have used the buffer
    used = {a.buffer.name for node in ctx.nodes for a in node.accesses}
    bound = [arg.buffer for _, _, arg in ctx.bindings() if getattr(arg, "buffer", None) is not None]
    used |= {buffer.name for buffer in bound} | {e.buffer.name for buffer in bound for e in buffer.init.entries}
    used |= program.names_in_skipped_branches
    for name, buffer in program.buffers.items():
        if name not in used and buffer.span.source.path == program.path:
            ctx.sink.add(PC402, f"buffer `{name}` is never used", buffer.span,
                         "remove it, or bind it where it is meant to be used")
