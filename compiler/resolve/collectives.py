"""Collectives in the resolver: the launcher constants `RANK`, `WORLD_SIZE` and `LOCAL_RANK`,
and `allreduce`, `broadcast`, `allgather` and `reducescatter` statements as collective nodes.

NCCL needs every rank to issue the same collectives in the same order. The order inside one
rank comes from the communicator's token, `pipec.nccl: u8[1]`, which every collective reads and
writes: the hazard DAG then chains the collectives in program order (two independent ones
could otherwise run in either order, differently on each rank, and deadlock). An allreduce or
broadcast of several views is one node, one NCCL group: its calls run as one kernel, so no
element may appear twice in it (PC604). The same
sequence on every rank is checked here where it can be (PC603: no collective under a decision
that may differ between ranks) and at start-up for the rest (the ranks compare the plan's
collective sequence, runtime/distributed.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ...dsl import SourceFile, Span, ast
from ..codes import PC105, PC601, PC602, PC603, PC604
from ..consteval import ConstError, RuntimeValue, evaluate
from ..diagnostics import Label
from ..model import Access, Buffer, CollectiveNode, CollectiveOperand, GraphBody, Init, Mode, PointerArg
from ...plan.dtypes import DTYPES
from .scope import Abort, LoadedModule, Scope, names_read

# The launcher constants and their one-process values; `-D NAME=VALUE` sets them, and
# piperun passes the launcher's (runtime/process_launchers.py).
LAUNCHER_CONSTANTS = {"RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0}
# Constants whose value differs between the ranks of one run (WORLD_SIZE does not).
PER_RANK = ("RANK", "LOCAL_RANK")
_BUILTIN = SourceFile(Path("<pipec launcher constants>"), " ".join(LAUNCHER_CONSTANTS))

NCCL_TOKEN = "pipec.nccl"
REDUCTIONS = ("sum", "avg", "max", "min")


def builtin_span(name: str) -> Span:
    start = _BUILTIN.text.index(name)
    return Span(_BUILTIN, start, start + len(name))


class Collectives(Scope):
    """Mixed into the resolver: the declaration pass asks for the launcher constants, the
    unrolling pass for collective nodes and the decisions that may differ between ranks."""

    control_buffers: dict[str, Buffer]
    if TYPE_CHECKING:  # the unrolling pass's, which this is mixed into
        _node_name: Callable[[GraphBody, str], str]
        _target: Callable[..., PointerArg]

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.launcher = dict(LAUNCHER_CONSTANTS)  # the values of this compilation
        self.per_rank_symbols: set[int] = set()  # ids of the constants' symbols that differ per rank
        self.divergence: list[tuple[str, Span]] = []  # the enclosing decisions that may differ

    def launcher_constants(self, defines: dict[str, tuple[ast.Expr, Span]], used: set[str]) -> dict[str, int]:
        """RANK, WORLD_SIZE and LOCAL_RANK: their defaults, or the `-D` values given."""
        values = dict(LAUNCHER_CONSTANTS)
        for name in values:
            if name not in defines:
                continue
            expr, span = defines[name]
            used.add(name)
            try:
                value = evaluate(expr, _no_names)
            except (ConstError, RuntimeValue):
                value = None
            if isinstance(value, bool) or not isinstance(value, int) or value < (name == "WORLD_SIZE"):
                least = 1 if name == "WORLD_SIZE" else 0
                self.sink.add(PC105, f"`-D {name}` must be an integer of at least {least}", span,
                              "piperun sets it from the launcher's environment; `pipec -D` only to check")
                continue
            values[name] = value
        if values["RANK"] >= values["WORLD_SIZE"]:
            span = defines.get("RANK", defines.get("WORLD_SIZE", (None, builtin_span("RANK"))))[1]
            self.sink.add(PC105, f"RANK {values['RANK']} lies outside a world of "
                          f"{values['WORLD_SIZE']} process(es)", span, "ranks run from 0 to WORLD_SIZE - 1")
            values["RANK"] = 0
        return values

    # --- decisions that may differ between ranks ----------------------------------------------

    def reads_rank(self, module: LoadedModule, env: dict, expr: ast.Expr) -> bool:
        """Whether `expr` reads RANK, LOCAL_RANK or a constant computed from them."""
        return any(name not in env and id(module.scope.get(name)) in self.per_rank_symbols
                   for name in names_read(expr))

    def check_rank_decision(self, module: LoadedModule, env: dict, decision: ast.Expr | None,
                            reason: str, span: Span, bodies) -> None:
        """PC603 when `decision` (a compile-time condition, loop bound or graph argument) depends
        on the rank and any of `bodies` (statements, blocks) can reach a collective: checked on
        the syntax, since the branch this rank does not take is never resolved."""
        if decision is None or not self.reads_rank(module, env, decision):
            return
        found = _first_collective(module, list(bodies), set())
        if found is not None:
            self._report_divergence(found, reason, span)
            raise Abort

    def _report_divergence(self, stmt: ast.Collective, reason: str, span: Span) -> None:
        self.sink.add(PC603, f"`{stmt.kind}` runs only where {reason}, which may differ between "
                      "ranks: the other ranks would wait for it forever", stmt.span,
                      "every rank must issue the same collectives in the same order: move it out "
                      "of the branch (or decide on a `replicated` flag)",
                      labels=(Label(span, "decided here"),))

    @contextmanager
    def diverging(self, reason: str | None, span: Span) -> Iterator[None]:
        """Resolve a device branch's bodies under a flag that may differ between ranks (`reason`
        None: one that cannot); a collective inside them is PC603."""
        if reason is None:
            yield
            return
        self.divergence.append((reason, span))
        try:
            yield
        finally:
            self.divergence.pop()

    def _check_rank_operands(self, module: LoadedModule, env: dict, stmt: ast.Collective) -> None:
        """PC603 for a root or an element count that reads the rank: NCCL needs one root and one
        count on every rank (an offset may differ: `x[RANK * N : (RANK + 1) * N]`). Counts are
        compared at a few ranks with RANK and LOCAL_RANK read directly; one read through
        another constant is left to the start-up comparison of the ranks' sequences."""
        problem = None
        if stmt.root is not None and self.reads_rank(module, env, stmt.root):
            problem = (f"`{stmt.kind}`'s root `{stmt.root.span.text}` reads the rank, so each rank "
                       "names another root", stmt.root.span)
        for side in (*stmt.views, stmt.dst):
            counts = self._counts_by_rank(module, env, side) if isinstance(side, ast.Slice) else {}
            if problem is None and len(set(counts.values())) > 1:
                listed = ", ".join(f"{count} on rank {rank}" for rank, count in counts.items())
                problem = (f"`{stmt.kind}`'s element count reads the rank: `{side.span.text}` holds "
                           f"{listed}", side.span)
        if problem is not None:
            self.sink.add(PC603, problem[0], problem[1], "every rank must issue the same collective: "
                          "one root and one element count on all of them (only an offset may read the rank)",
                          labels=(Label(stmt.span, "the collective"),))
            raise Abort

    def _counts_by_rank(self, module: LoadedModule, env: dict, view: ast.Slice) -> dict[int, int]:
        """The slice's length, `stop - start` (a missing bound counts as 0: it is a dimension,
        the same on every rank), at ranks 0, 1 and the last, when a bound reads the rank."""
        bounds = [b for b in (view.start, view.stop) if b is not None]
        if not any(self.reads_rank(module, env, bound) for bound in bounds):
            return {}
        counts = {}
        for rank in sorted({0, 1, self.launcher["WORLD_SIZE"] - 1}):  # 1 too: a program serves any world
            lookup = self._lookup(module, {**env, "RANK": rank, "LOCAL_RANK": rank})
            try:
                start, stop = (evaluate(b, lookup) if b is not None else 0 for b in (view.start, view.stop))
            except (ConstError, RuntimeValue):
                continue  # reported where this rank's own value fails
            if isinstance(start, int) and isinstance(stop, int):
                counts[rank] = stop - start
        return counts

    # --- collective statements ------------------------------------------------------------------

    def collective(self, module: LoadedModule, env: dict, stmt: ast.Collective, body: GraphBody,
                   group) -> CollectiveNode:
        if stmt.dst is None:  # allreduce, broadcast: in place, one call per view
            views = [self._target(module, env, view, f"{stmt.kind} buffer") for view in stmt.views]
            operands = tuple(CollectiveOperand(view, view) for view in views)
            accesses = tuple(Access(view.buffer, view.start, view.stop, Mode.READ_WRITE, expr.span)
                             for view, expr in zip(views, stmt.views))
        else:
            src = self._target(module, env, stmt.views[0], f"{stmt.kind} source")
            dst = self._target(module, env, stmt.dst, f"{stmt.kind} destination")
            operands = (CollectiveOperand(src, dst),)
            accesses = (Access(src.buffer, src.start, src.stop, Mode.READ, stmt.views[0].span),
                        Access(dst.buffer, dst.start, dst.stop, Mode.WRITE, stmt.dst.span))
        op = self._reduction(stmt)
        for operand, view in zip(operands, stmt.views):
            self._check_collective_types(stmt, view, operand, op)
        root = self._root(module, env, stmt) if stmt.root is not None else None
        if stmt.dst is None:
            self._check_distinct(stmt, operands)
        else:
            self._check_counts(stmt, src, dst)
        self._check_rank_operands(module, env, stmt)
        if self.divergence:
            self._report_divergence(stmt, *self.divergence[-1])
            raise Abort
        target = "+".join(operand.dst.buffer.name for operand in operands)
        node = CollectiveNode(self._node_name(body, f"{stmt.kind}:{target}"), stmt.kind, op, operands,
                              root, stmt.span, group=group)
        node.accesses = (*accesses, Access(self._token(), 0, 1, Mode.READ_WRITE, stmt.span))
        return node

    def _reduction(self, stmt: ast.Collective) -> str | None:
        if stmt.op is None:
            return None
        if stmt.op.text not in REDUCTIONS:
            self.sink.add(PC601, f"`{stmt.op.text}` is no reduction NCCL provides", stmt.op.span,
                          "reductions: " + ", ".join(REDUCTIONS))
            raise Abort
        return stmt.op.text

    def _check_collective_types(self, stmt: ast.Collective, view: ast.Expr, operand: CollectiveOperand,
                                op: str | None) -> None:
        src, dst = operand.src, operand.dst
        if src.buffer.dtype is not dst.buffer.dtype:
            self.sink.add(PC601, f"`{stmt.kind}` moves {src.buffer.dtype.name} into "
                          f"{dst.buffer.dtype.name}: NCCL converts nothing", stmt.span,
                          "give the source and the destination the same element type")
            raise Abort
        if op == "avg" and src.buffer.dtype.kind != "f":
            self.sink.add(PC601, f"`avg` of {src.buffer.dtype.name} `{view.span.text}` would truncate "
                          "each element's mean", view.span, "average floating-point data, or `sum` and "
                          "divide where the remainder is handled", labels=(Label(stmt.op.span, "the reduction"),))
            raise Abort

    def _root(self, module, env, stmt: ast.Collective) -> int:
        root = self._int(module, env, stmt.root, "a broadcast's root rank", "value")
        world = self.launcher["WORLD_SIZE"]
        if not 0 <= root < world:
            self.sink.add(PC602, f"root rank {root} lies outside a world of {world} process(es)",
                          stmt.root.span, "ranks run from 0 to WORLD_SIZE - 1; check with `-D WORLD_SIZE=...`")
            raise Abort
        return root

    def _check_counts(self, stmt: ast.Collective, src: PointerArg, dst: PointerArg) -> None:
        if stmt.dst is None:
            return
        world = self.launcher["WORLD_SIZE"]
        n_src, n_dst = src.stop - src.start, dst.stop - dst.start
        # allgather: each rank's src lands in its slot of dst; reducescatter: the reverse
        small, large = (src, dst) if stmt.kind == "allgather" else (dst, src)
        n_small, n_large = (n_src, n_dst) if stmt.kind == "allgather" else (n_dst, n_src)
        if n_large != world * n_small:
            self.sink.add(PC602, f"`{stmt.kind}` over {world} rank(s) needs the "
                          f"{'destination' if stmt.kind == 'allgather' else 'source'} to hold "
                          f"{world} x {n_small} = {world * n_small} elements, found {n_large}",
                          stmt.span, "the gathered side holds one slot of the other side's size per rank")
            raise Abort
        if small.buffer is large.buffer and small.start < large.stop and large.start < small.stop:
            slot = large.start + self.launcher["RANK"] * n_small
            if small.start != slot or not n_small:
                self.sink.add(PC602, f"`{stmt.kind}`'s source and destination overlap outside this "
                              f"rank's slot [{slot}:{slot + n_small}]", stmt.span,
                              "in place, the smaller side must be this rank's slot of the larger: "
                              "`x[RANK * N : (RANK + 1) * N]`")
                raise Abort

    def _check_distinct(self, stmt: ast.Collective, operands: tuple[CollectiveOperand, ...]) -> None:
        """PC604: a group's calls run in one NCCL kernel, concurrently, so two views sharing an
        element would race (reduced twice, or read while the other call writes it)."""
        for later, (operand, view) in enumerate(zip(operands, stmt.views)):
            for earlier, other in enumerate(operands[:later]):
                a, b = other.src, operand.src
                if a.buffer is b.buffer and a.start < b.stop and b.start < a.stop:
                    self.sink.add(PC604, f"`{stmt.kind}` names elements [{max(a.start, b.start)}:"
                                  f"{min(a.stop, b.stop)}] of `{a.buffer.name}` twice", view.span,
                                  "a group's calls run concurrently in one NCCL kernel: name each "
                                  "element once (one slice covering both views)",
                                  labels=(Label(stmt.views[earlier].span, "first named here"),))
                    raise Abort

    def _token(self) -> Buffer:
        token = self.control_buffers.get(NCCL_TOKEN)
        if token is None:
            token = Buffer(NCCL_TOKEN, DTYPES["u8"], (1,), False, (), Init("zeros"), _BUILTIN_SPAN)
            self.control_buffers[NCCL_TOKEN] = token
        return token


_BUILTIN_SPAN = Span(_BUILTIN, 0, 0)


def _first_collective(module: LoadedModule, pending: list, seen: set[int]) -> ast.Collective | None:
    """The first collective statement the statements can reach, through the graphs they use."""
    while pending:
        item = pending.pop(0)
        match item:
            case ast.Collective():
                return item
            case ast.Block():
                pending[:0] = item.stmts
            case ast.If():
                pending[:0] = [b for b in (item.then, item.orelse) if b is not None]
            case ast.For() | ast.DeviceLoop():
                pending.insert(0, item.body)
            case ast.Parallel():
                pending.insert(0, item.body)
            case ast.Switch():
                pending[:0] = [c.body for c in item.cases]
            case ast.GraphCall():
                symbol = module.scope.get(item.name.text)
                if symbol is not None and symbol.kind == "graph" and id(symbol.value) not in seen:
                    decl: ast.GraphDecl = symbol.value  # type: ignore[assignment]
                    seen.add(id(decl))
                    found = _first_collective(symbol.module or module, [decl.body], seen)
                    if found is not None:
                        return found
    return None


def _no_names(ident: ast.Ident):
    raise ConstError(f"`{ident.text}`: a launcher constant's value names nothing", ident.span, "")
