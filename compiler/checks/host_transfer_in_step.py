"""PC304: a copy to or from mapped host memory inside the step."""

from __future__ import annotations

from ..codes import PC304
from ..model import CopyNode
from .context import CheckContext


def host_transfer_in_step(ctx: CheckContext) -> None:
    if ctx.program.step is None:
        return
    for node in ctx.program.step.walk():
        if not isinstance(node, CopyNode):
            continue
        for end, direction in ((node.src, "from"), (node.dst, "to")):
            if end.buffer.mapped:
                ctx.sink.add(PC304, f"copy {direction} mapped host buffer `{end.buffer.name}` inside "
                             "the step", end.span,
                             "keep copies between device buffers; let a kernel write results into the "
                             "mapped buffer, which the host reads between replays", uses=ctx.uses(node))
                break
