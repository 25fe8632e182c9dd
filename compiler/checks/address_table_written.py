"""PC325: a node that writes a table of addresses: a fill, a copy, a library node's output, an
`out` or `inout` binding, or a kernel whose PTX stores through the table's parameter (or
through a pointer it cannot follow, which may land there). The table would no longer hold the
addresses of the buffers it names, which is all the dependency DAG knows of what a kernel
reads and writes through it; a launch that may write one touches what its accesses do not say,
so the data rules leave the program alone."""

from __future__ import annotations

from ..codes import PC325
from ..diagnostics import Label
from ..fixes import requalify
from ..indirect import unfollowed_store
from ..model import CONTAINERS, LaunchNode, Mode, PointerArg
from .context import CheckContext

_HINT = "a table holds the addresses the runtime put there; declare another table for other buffers"


def address_table_written(ctx: CheckContext) -> None:
    for node in ctx.launches():
        tables = [(param, arg) for param, arg in zip(node.kernel.params, node.args)
                  if isinstance(arg, PointerArg) and arg.buffer.is_table and param.kind == "pointer"]
        store = unfollowed_store(node) if tables else None
        for param, arg in tables:
            declared = (Label(arg.buffer.span, "declared here"),)
            if arg.qualifier in ("out", "inout"):
                ctx.misbind(node)
                ctx.sink.add(PC325, f"`{arg.buffer.name}` is a table of addresses, bound `{arg.qualifier}`",
                             arg.span, f"bind it `in`; {_HINT}", labels=declared,
                             fixes=(requalify(arg.span, "in"),), uses=ctx.uses(node))
            elif param.written == "yes" or store is not None:
                ctx.misbind(node)
                site = (param.written_span, param.written_trail) if param.written == "yes" else (store.span, store.trail)
                ctx.sink.add(PC325, f"kernel `{node.kernel.name}` may write the table of addresses "
                             f"`{arg.buffer.name}` through {param.describe()}", arg.span, _HINT,
                             labels=declared + ((Label(site[0], "the store"),) if site[0] else ()) + site[1],
                             uses=ctx.uses(node))
    for node in ctx.nodes:
        if isinstance(node, (LaunchNode, *CONTAINERS)):
            continue
        for access in node.accesses:
            if access.buffer.is_table and access.mode & Mode.WRITE:
                ctx.sink.add(PC325, f"this node writes the table of addresses `{access.buffer.name}`",
                             access.span, _HINT, labels=(Label(access.buffer.span, "declared here"),),
                             uses=ctx.uses(node))
