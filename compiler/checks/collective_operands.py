"""PC602 a collective's root or sizes that do not fit the world size, and PC604 a grouped
allreduce or broadcast that names some elements twice (a group's calls run in one NCCL
kernel, concurrently, so two views sharing an element would race: reduced twice, or read
while the other call writes it). Checked on the model's CollectiveNode against the launcher's
WORLD_SIZE and RANK (`-D` or their one-process values), one report per node: the root, then
the sizes or the group. The collective rules the model cannot represent (a reduction or
types NCCL lacks, a decision that may differ between ranks) are reported as the resolver
builds the node (compiler/resolve/collectives.py)."""

from __future__ import annotations

from ...wording import counted
from ..codes import PC602, PC604
from ..diagnostics import Label
from ..model import CollectiveNode
from .context import CheckContext

IN_PLACE = ("allreduce", "broadcast")  # one view per call, its own source and destination


def collective_operands(ctx: CheckContext) -> None:
    world, rank = int(ctx.program.consts["WORLD_SIZE"]), int(ctx.program.consts["RANK"])  # launcher constants: ints
    for node in ctx.nodes:
        if not isinstance(node, CollectiveNode) or _root_outside(ctx, node, world):
            continue
        if node.kind in IN_PLACE:
            _check_distinct(ctx, node)
        else:
            _check_counts(ctx, node, world, rank)


def _root_outside(ctx: CheckContext, node: CollectiveNode, world: int) -> bool:
    if node.root is None or 0 <= node.root < world:
        return False
    ctx.sink.add(PC602, f"root rank {node.root} lies outside a world of {counted(world, 'process')}",
                 node.root_span, "ranks run from 0 to WORLD_SIZE - 1; check with `-D WORLD_SIZE=...`",
                 uses=ctx.uses(node))
    return True


def _check_counts(ctx: CheckContext, node: CollectiveNode, world: int, rank: int) -> None:
    """allgather: each rank's source lands in its slot of the destination; reducescatter: the
    reverse. In place, the smaller side must be this rank's slot of the larger."""
    [operand] = node.operands
    src, dst = operand.src, operand.dst
    n_src, n_dst = src.stop - src.start, dst.stop - dst.start
    small, large = (src, dst) if node.kind == "allgather" else (dst, src)
    n_small, n_large = (n_src, n_dst) if node.kind == "allgather" else (n_dst, n_src)
    if n_large != world * n_small:
        ctx.sink.add(PC602, f"`{node.kind}` over {counted(world, 'rank')} needs the "
                     f"{'destination' if node.kind == 'allgather' else 'source'} to hold "
                     f"{world} x {n_small} = {world * n_small} elements, found {n_large}",
                     node.span, "the gathered side holds one slot of the other side's size per rank",
                     uses=ctx.uses(node))
        return
    if small.buffer is large.buffer and small.start < large.stop and large.start < small.stop:
        slot = large.start + rank * n_small
        if small.start != slot or not n_small:
            ctx.sink.add(PC602, f"`{node.kind}`'s source and destination overlap outside this "
                         f"rank's slot [{slot}:{slot + n_small}]", node.span,
                         "in place, the smaller side must be this rank's slot of the larger: "
                         "`x[RANK * N : (RANK + 1) * N]`", uses=ctx.uses(node))


def _check_distinct(ctx: CheckContext, node: CollectiveNode) -> None:
    for later, operand in enumerate(node.operands):
        for other in node.operands[:later]:
            a, b = other.src, operand.src
            if a.buffer is b.buffer and a.start < b.stop and b.start < a.stop:
                ctx.sink.add(PC604, f"`{node.kind}` names elements [{max(a.start, b.start)}:"
                             f"{min(a.stop, b.stop)}] of `{a.buffer.name}` twice", b.span,
                             "a group's calls run concurrently in one NCCL kernel: name each "
                             "element once (one slice covering both views)",
                             labels=(Label(a.span, "first named here"),), uses=ctx.uses(node))
                return
