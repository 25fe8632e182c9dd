"""PC404: a pointer bound `out` (by the launch, or by the kernel's `/// pipec: out`) that the
kernel's PTX reads before it writes what it reads (ptx/first_reads.py): `out` tells pipec the
launch never reads what the buffer held, so nothing initialises it for the launch, the step's
first such launch makes `piperun --verify` poison it, and the read sees garbage."""

from __future__ import annotations

from ..codes import PC404
from ..diagnostics import Label
from ..fixes import requalify
from ..model import Mode, PointerArg
from ..ranges import pointer_mode
from .context import CheckContext


def out_read_before_write(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if param.kind != "pointer" or not isinstance(arg, PointerArg) or arg.buffer.is_table:
            continue
        if param.read_first is None or pointer_mode(param, arg.qualifier) is not Mode.WRITE:
            continue
        why = "bound `out`" if arg.qualifier == "out" else "annotated `/// pipec: out`"
        ctx.sink.add(PC404, f"kernel `{node.kernel.name}` reads {param.describe()} before it writes it, "
                     f"yet it is {why}", arg.span,
                     "bind it `inout` and initialise what the kernel reads (or make the kernel write "
                     "before it reads); if it reads only what this launch wrote, suppress this with the reason",
                     labels=(Label(param.read_first.span, "read before this thread writes it"),)
                     + param.read_first.trail, fixes=(requalify(arg.span, "inout"),), uses=ctx.uses(node))
