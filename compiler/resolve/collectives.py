"""Collective statements in the unrolling pass: `allreduce`, `broadcast`, `allgather` and
`reducescatter` become collective nodes.

NCCL needs every rank to issue the same collectives in the same order. The order inside one
rank comes from the communicator's token, `pipec.nccl: u8[1]`, which every collective reads and
writes: the hazard DAG then chains the collectives in program order (two independent ones
could otherwise run in either order, differently on each rank, and deadlock). An allreduce or
broadcast of several views is one node, one NCCL group: its calls run as one kernel, so no
element may appear twice in it (PC604). That, and sizes and roots against the world size
(PC602), are checked on the node (checks/collective_operands.py). The same sequence on every
rank is checked here where it can be (PC603: no collective under a decision that may differ
between ranks, ranks.py) and at start-up for the rest (the ranks compare the plan's
collective sequence, runtime/distributed.py).
"""

from __future__ import annotations

from typing import get_args

from ...dsl import ast
from ..codes import PC601, PC603
from ..consteval import ConstError, RuntimeValue, evaluate
from ..diagnostics import Label
from ..model import Access, Buffer, CollectiveNode, CollectiveOperand, Init, Mode, Reduction
from ...plan.dtypes import DTYPES
from .ranks import BUILTIN_SPAN, reads_rank, report_divergence
from .scope import Abort, LoadedModule
from .unroll import Frame, Unroller

NCCL_TOKEN = "pipec.nccl"
REDUCTIONS: dict[str, Reduction] = {word: word for word in get_args(Reduction)}


def resolve_collective(u: Unroller, f: Frame, stmt: ast.Collective) -> None:
    module, env = f.module, f.env
    if stmt.dst is None:  # allreduce, broadcast: in place, one call per view
        views = [u.target(module, env, view, f"{stmt.kind} buffer") for view in stmt.views]
        operands = tuple(CollectiveOperand(view, view) for view in views)
        accesses = tuple(Access(view.buffer, view.start, view.stop, Mode.READ_WRITE, expr.span)
                         for view, expr in zip(views, stmt.views))
    else:
        src = u.target(module, env, stmt.views[0], f"{stmt.kind} source")
        dst = u.target(module, env, stmt.dst, f"{stmt.kind} destination")
        operands = (CollectiveOperand(src, dst),)
        accesses = (Access(src.buffer, src.start, src.stop, Mode.READ, stmt.views[0].span),
                    Access(dst.buffer, dst.start, dst.stop, Mode.WRITE, stmt.dst.span))
    op = _reduction(u, stmt)
    for operand, view in zip(operands, stmt.views):
        _check_collective_types(u, stmt, view, operand, op)
    root = root_span = None
    if stmt.root is not None:
        root = u.ctx.integer(module, env, stmt.root, "a broadcast's root rank", "value")
        root_span = stmt.root.span
    _check_rank_operands(u, module, env, stmt)
    if u.divergence:
        report_divergence(u.ctx.sink, stmt, *u.divergence[-1])
        raise Abort
    target = "+".join(operand.dst.buffer.name for operand in operands)
    node = CollectiveNode(u.node_name(f.body, f"{stmt.kind}:{target}"), stmt.kind, op, operands,
                          root, stmt.span, group=f.group, root_span=root_span)
    node.accesses = (*accesses, Access(nccl_token(u), 0, 1, Mode.READ_WRITE, stmt.span))
    f.body.items.append(node)



def _check_rank_operands(u: Unroller, module: LoadedModule, env: dict, stmt: ast.Collective) -> None:
    """PC603 for a root or an element count that reads the rank: NCCL needs one root and one
    count on every rank (an offset may differ: `x[RANK * N : (RANK + 1) * N]`). Counts are
    compared at a few ranks with RANK and LOCAL_RANK read directly; one read through
    another constant is left to the start-up comparison of the ranks' sequences."""
    problem = None
    if stmt.root is not None and reads_rank(module, env, stmt.root):
        problem = (f"`{stmt.kind}`'s root `{stmt.root.span.text}` reads the rank, so each rank "
                   "names another root", stmt.root.span)
    for side in (*stmt.views, stmt.dst):
        counts = _counts_by_rank(u, module, env, side) if isinstance(side, ast.Slice) else {}
        if problem is None and len(set(counts.values())) > 1:
            listed = ", ".join(f"{count} on rank {rank}" for rank, count in counts.items())
            problem = (f"`{stmt.kind}`'s element count reads the rank: `{side.span.text}` holds "
                       f"{listed}", side.span)
    if problem is not None:
        u.ctx.sink.add(PC603, problem[0], problem[1], "every rank must issue the same collective: "
                       "one root and one element count on all of them (only an offset may read the rank)",
                       labels=(Label(stmt.span, "the collective"),))
        raise Abort



def _counts_by_rank(u: Unroller, module: LoadedModule, env: dict, view: ast.Slice) -> dict[int, int]:
    """The slice's length, `stop - start` (a missing bound counts as 0: it is a dimension,
    the same on every rank), at ranks 0, 1 and the last, when a bound reads the rank."""
    bounds = [b for b in (view.start, view.stop) if b is not None]
    if not any(reads_rank(module, env, bound) for bound in bounds):
        return {}
    counts = {}
    for rank in sorted({0, 1, u.launcher["WORLD_SIZE"] - 1}):  # 1 too: a program serves any world
        lookup = u.ctx.lookup(module, {**env, "RANK": rank, "LOCAL_RANK": rank}, use="a collective's slice bound")
        try:
            start, stop = (evaluate(b, lookup) if b is not None else 0 for b in (view.start, view.stop))
        except (ConstError, RuntimeValue):
            continue  # reported where this rank's own value fails
        if isinstance(start, int) and isinstance(stop, int):
            counts[rank] = stop - start
    return counts



def _reduction(u: Unroller, stmt: ast.Collective) -> Reduction | None:
    if stmt.op is None:
        return None
    op = REDUCTIONS.get(stmt.op.text)
    if op is None:
        u.ctx.sink.add(PC601, f"`{stmt.op.text}` is no reduction NCCL provides", stmt.op.span,
                       "reductions: " + ", ".join(REDUCTIONS))
        raise Abort
    return op



def _check_collective_types(u: Unroller, stmt: ast.Collective, view: ast.Expr, operand: CollectiveOperand,
                            op: str | None) -> None:
    src, dst = operand.src, operand.dst
    if src.buffer.dtype is not dst.buffer.dtype:
        u.ctx.sink.add(PC601, f"`{stmt.kind}` moves {src.buffer.dtype.name} into "
                       f"{dst.buffer.dtype.name}: NCCL converts nothing", stmt.span,
                       "give the source and the destination the same element type")
        raise Abort
    if op == "avg" and src.buffer.dtype.kind != "f":
        u.ctx.sink.add(PC601, f"`avg` of {src.buffer.dtype.name} `{view.span.text}` would truncate "
                       "each element's mean", view.span, "average floating-point data, or `sum` and "
                       "divide where the remainder is handled", labels=(Label(stmt.op.span, "the reduction"),))
        raise Abort



def nccl_token(u: Unroller) -> Buffer:
    token = u.control_buffers.get(NCCL_TOKEN)
    if token is None:
        token = Buffer(NCCL_TOKEN, DTYPES["u8"], (1,), False, (), Init("zeros"), BUILTIN_SPAN)
        u.control_buffers[NCCL_TOKEN] = token
    return token
