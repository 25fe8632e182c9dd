"""PC303: a copy between buffers of different element types or sizes, or between overlapping
ranges of one buffer."""

from __future__ import annotations

from ...wording import counted
from ..codes import PC303
from ..diagnostics import Label
from ..model import CopyNode
from .context import CheckContext


def copy_mismatch(ctx: CheckContext) -> None:
    for node in ctx.nodes:
        if isinstance(node, CopyNode):
            _check(ctx, node)


def _check(ctx: CheckContext, node: CopyNode) -> None:
    src, dst = node.src, node.dst
    if src.buffer.dtype is not dst.buffer.dtype:
        ctx.sink.add(PC303, f"copy from `{src.buffer.dtype.name}` to `{dst.buffer.dtype.name}`",
                     node.span, "a copy moves bytes without converting; copy between buffers of one "
                     "element type, or convert in a kernel", uses=ctx.uses(node))
        return
    src_count, dst_count = src.stop - src.start, dst.stop - dst.start
    if src_count != dst_count:
        ctx.sink.add(PC303, f"copy of {counted(src_count, 'element')} into {dst_count}", node.span,
                     "slice both ends to the same number of elements",
                     labels=(Label(src.span, counted(src_count, "element")),
                             Label(dst.span, counted(dst_count, "element"))), uses=ctx.uses(node))
    elif src.buffer is dst.buffer and src.start < dst.stop and dst.start < src.stop:
        ctx.sink.add(PC303, f"copy between overlapping ranges of `{src.buffer.name}`", node.span,
                     "a copy's result is undefined when its ends overlap; copy through a second buffer",
                     uses=ctx.uses(node))
