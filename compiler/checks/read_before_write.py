"""PC401: an `uninit` buffer read before anything (the init block or an earlier node of the
step) writes the elements read. A launch reads through a pointer only where its kernel's PTX
loads from it before the same thread stores there (ptx/first_reads.py): a kernel that writes
what it then reads is no reader of what the buffer held, whatever the binding says."""

from __future__ import annotations

from collections import defaultdict

from ..codes import PC401
from ..diagnostics import Label
from ..intervals import Intervals
from ..model import CONTAINERS, LaunchNode, Mode, Node, PointerArg, Site
from .context import CheckContext


def _first_reads(node: Node) -> dict[int, Site | None]:
    """By the id of a launch argument's span (its accesses carry it): where the kernel reads that
    pointer before writing, None where it never does. Other nodes read what they access."""
    if not isinstance(node, LaunchNode):
        return {}
    return {id(arg.span): param.read_first for param, arg in zip(node.kernel.params, node.args)
            if param.kind == "pointer" and isinstance(arg, PointerArg) and not arg.buffer.is_table}


def read_before_write(ctx: CheckContext) -> None:
    if not ctx.accesses_known:
        return  # a statement or binding with an error may have written the buffer first
    written: defaultdict[str, Intervals] = defaultdict(Intervals)
    reported: set[str] = set()
    for node in ctx.nodes:
        if isinstance(node, CONTAINERS):
            continue  # its nodes follow in the walk
        # only `uninit` buffers matter: most nodes touch none, and need neither their first
        # reads nor their writes recorded
        uninit = [access for access in node.accesses if access.buffer.init.kind == "uninit"]
        if not uninit:
            continue
        first_reads = _first_reads(node)
        for access in uninit:
            buffer = access.buffer
            if buffer.name in reported:
                continue
            site = first_reads.get(id(access.span))
            if id(access.span) in first_reads and site is None:
                continue  # the kernel writes whatever it reads there first
            if access.mode & Mode.READ and not written.get(buffer.name, Intervals()).covers(access.start, access.stop):
                reported.add(buffer.name)
                ctx.sink.add(PC401, f"`{buffer.name}` is read here before anything writes it",
                             access.span, "write it first (a fill, a kernel, or the init block), "
                             "or give it an initial value instead of `uninit`", label="read",
                             labels=(Label(site.span, "the kernel reads it here"),) + site.trail if site else (),
                             uses=ctx.uses(node))
        for access in uninit:
            if access.mode & Mode.WRITE:
                written[access.buffer.name].add(access.start, access.stop)
