"""PC318: a pointer bound `in`, or declared `const`, that the kernel's PTX writes through (a store,
an atomic, a bulk copy, in the kernel or anything it calls; a `const` cast away is the same
store) or that the analysis cannot prove it leaves alone (it stores through a pointer loaded
from memory). The access would be recorded as a read, and the edge to the next reader lost."""

from __future__ import annotations

from ..codes import PC318
from ..diagnostics import Label
from ..fixes import requalify
from ..model import Mode, PointerArg
from ..ranges import pointer_mode
from .context import CheckContext


def write_through_read_only(ctx: CheckContext) -> None:
    for node, param, arg in ctx.bindings():
        if param.kind != "pointer" or not isinstance(arg, PointerArg) or param.written == "no":
            continue
        if pointer_mode(param, arg.qualifier) is not Mode.READ:
            continue
        ctx.misbind(node)
        why = "bound `in`" if arg.qualifier == "in" else f"declared `{param.ctype}`"
        name = node.kernel.name
        if param.written == "yes":
            message = f"kernel `{name}` writes through {param.describe()}, {why}"
            where = "the kernel writes through it here"
        else:
            message = (f"kernel `{name}` stores through a pointer it loaded from memory, so pipec cannot "
                       f"prove it leaves {param.describe()}, {why}, unwritten")
            where = "the store pipec cannot follow"
        labels = ((Label(param.written_span, where),) if param.written_span else ()) + param.written_trail
        ctx.sink.add(PC318, message, arg.span,
                     "bind it `inout` (or `out`) so the next reader waits for this launch; a "
                     "`const` the kernel casts away is no promise", labels=labels,
                     fixes=(requalify(arg.span, "inout"),), uses=ctx.uses(node))
