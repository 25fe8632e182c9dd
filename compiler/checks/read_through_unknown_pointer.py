"""PC324: a kernel that loads through a pointer it read from memory, where no table of
addresses bound to the launch accounts for it (indirect.py): the buffer it reads is one the
dependency DAG does not know, so no edge orders the load after that buffer's writers. What the
launch touches is then not what its accesses say, so the data rules leave the program alone."""

from __future__ import annotations

from ..codes import PC324
from ..diagnostics import Label
from ..indirect import unfollowed_load
from .context import CheckContext


def read_through_unknown_pointer(ctx: CheckContext) -> None:
    for node in ctx.launches():
        if (load := unfollowed_load(node)) is None:
            continue
        ctx.misbind(node)
        ctx.sink.add(PC324, f"kernel `{node.kernel.name}` loads through a pointer it read from memory, so "
                     "pipec cannot tell which buffer it reads", node.span,
                     "keep the pointers in a table of addresses (`buffer t: ptr[N] = addresses(a, b, ...)`) "
                     "bound to a pointer-to-pointer parameter, so the load waits for those buffers' writers",
                     labels=(Label(load.span, "the load pipec cannot follow"),) + load.trail, uses=ctx.uses(node))
