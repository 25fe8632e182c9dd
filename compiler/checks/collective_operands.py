"""PC604: a grouped allreduce or broadcast that names some elements twice. A group's calls run
in one NCCL kernel, concurrently, so two views sharing an element would race (reduced twice,
or read while the other call writes it). One report per node, for the first such pair. The
collective rules the model cannot represent (a reduction or types NCCL lacks, sizes against
the world size, a decision that may differ between ranks) are reported as the resolver builds
the node (compiler/resolve/collectives.py)."""

from __future__ import annotations

from ..codes import PC604
from ..diagnostics import Label
from ..model import CollectiveNode
from .context import CheckContext


def collective_operands(ctx: CheckContext) -> None:
    for node in ctx.nodes:
        if isinstance(node, CollectiveNode):
            _check_distinct(ctx, node)


def _check_distinct(ctx: CheckContext, node: CollectiveNode) -> None:
    for later, operand in enumerate(node.operands):
        for other in node.operands[:later]:
            a, b = other.src, operand.src
            if a.buffer is b.buffer and a.start < b.stop and b.start < a.stop:
                ctx.sink.add(PC604, f"`{node.kind}` names elements [{max(a.start, b.start)}:"
                             f"{min(a.stop, b.stop)}] of `{a.buffer.name}` twice", b.span,
                             "a group's calls run concurrently in one NCCL kernel: name each "
                             "element once (one slice covering both views)",
                             labels=(Label(a.span, "first named here"),))
                return
