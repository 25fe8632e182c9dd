"""PC318: a pointer bound `in`, or declared `const`, that the kernel's PTX writes through (a store,
an atomic, a bulk copy, in the kernel or anything it calls; a `const` cast away is the same
store) or that the analysis cannot prove it leaves alone (it stores through a pointer loaded
from memory that no bound table of addresses accounts for, indirect.py). The access would be
recorded as a read, and the edge to the next reader lost. A table of addresses is PC325's."""

from __future__ import annotations

from ..codes import PC318
from ..diagnostics import Label
from ..fixes import requalify
from ..indirect import unfollowed_store
from ..model import Mode, PointerArg, Site
from ..ranges import pointer_mode
from .context import CheckContext


def write_through_read_only(ctx: CheckContext) -> None:
    stores: dict[int, Site | None] = {}  # by launch, asked once: a kernel may have many parameters
    for node, param, arg in ctx.bindings():
        if param.kind != "pointer" or not isinstance(arg, PointerArg) or arg.buffer.is_table:
            continue
        if pointer_mode(param, arg.qualifier) is not Mode.READ:
            continue
        why = "bound `in`" if arg.qualifier == "in" else f"declared `{param.ctype}`"
        name = node.kernel.name
        if param.written == "yes":
            message = f"kernel `{name}` writes through {param.describe()}, {why}"
            labels = ((Label(param.written_span, "the kernel writes through it here"),) if param.written_span
                      else ()) + param.written_trail
        else:
            if id(node) not in stores:
                stores[id(node)] = unfollowed_store(node)
            store = stores[id(node)]
            if store is None:
                continue
            message = (f"kernel `{name}` stores through a pointer it loaded from memory, so pipec cannot "
                       f"prove it leaves {param.describe()}, {why}, unwritten")
            labels = (Label(store.span, "the store pipec cannot follow"),) + store.trail
        ctx.misbind(node)
        ctx.sink.add(PC318, message, arg.span,
                     "bind it `inout` (or `out`) so the next reader waits for this launch; a "
                     "`const` the kernel casts away is no promise", labels=labels,
                     fixes=(requalify(arg.span, "inout"),), uses=ctx.uses(node))
