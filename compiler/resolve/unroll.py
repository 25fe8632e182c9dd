"""The unrolling pass: graphs, `for`, compile-time `if` and `parallel` blocks become concrete
launch, fill, copy, GEMM, collective and child-graph nodes, each with the element ranges it
touches. The `Unroller` holds what the pass gives out (node names, parallel groups, the buffers
pipec makes) and dispatches each statement to its handler by syntax-tree type; the handlers
are functions in statements.py, control.py, gemm.py and collectives.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ...dsl import Span, ast
from ..codes import PC103
from ..consteval import names_read
from ..live import LiveTerm
from ..model import Arg, Buffer, GraphBody, PointerArg
from ..ranges import Extents
from .context import Context, Env
from .buffers import buffer_pointer
from .scope import Abort, LoadedModule


@dataclass(frozen=True)
class Frame:
    """Where a statement is resolved: the module its names resolve in, the loop variables and
    graph parameters in scope, the graph body it joins, its `parallel` group, and the graph
    uses around it (name and span, to find a graph that uses itself)."""

    module: LoadedModule
    env: Env
    body: GraphBody
    group: int | None = None
    stack: tuple[tuple[str, Span], ...] = ()

    def inside(self, **changes) -> Frame:
        return replace(self, **changes)


# each handler takes the statement type it is keyed by, which a mapping's type cannot say
Handler = Callable[["Unroller", Frame, Any], None]


class Unroller:
    """The unrolling pass's own state. The handler table comes in from outside
    (statements.STATEMENTS) because the handlers import this module for `Unroller` and `Frame`."""

    def __init__(self, ctx: Context, handlers: Mapping[type, Handler], launcher: dict[str, int],
                 gemm_workspace: int) -> None:
        self.ctx = ctx
        self.handlers = handlers
        self.launcher = launcher  # RANK, WORLD_SIZE and LOCAL_RANK of this compilation
        self.gemm_workspace = gemm_workspace  # bytes of each GEMM node's workspace
        self.dropped_statements = 0
        self.next_group = 0
        self.names_taken: dict[str, dict[str, int]] = {}
        # the buffers pipec makes, under names no declaration can take: each conditional's
        # control buffer and the NCCL token (control.py, collectives.py), each GEMM's workspace
        self.control_buffers: dict[str, Buffer] = {}
        self.workspaces: dict[str, Buffer] = {}
        self.names_in_skipped_branches: set[str] = set()
        self.skipped_branches: set[int] = set()  # by id: the branches whose names are in it
        self.extents = Extents()
        # launch arguments that read no loop variable or graph parameter, resolved once per
        # module (statements._arg): by id(ast.Arg), the names each reads; by (id(ast.Arg),
        # id(module)), the argument and its record form
        self.arg_names: dict[int, frozenset[str]] = {}
        self.kept_args: dict[tuple[int, int], tuple[Arg, LiveTerm | None]] = {}
        # the same for a launch's grid, block and shared memory (statements._shape), by
        # id(ast.Launch), and by it, id(module) and the values of the names read
        self.shape_names: dict[int, tuple[str, ...]] = {}
        self.kept_shapes: dict[tuple, tuple] = {}
        self.expr_names: dict[int, tuple[ast.Expr, tuple[str, ...]]] = {}  # by id: see names_read
        self.divergence: list[tuple[str, Span]] = []  # the enclosing decisions that may differ

    def root(self, name: str, block: ast.Block, module: LoadedModule, *, fits: bool) -> GraphBody:
        """The `step` or `init` block as a graph body; an empty one when the size pass found
        the program over a limit (and reported it)."""
        body = GraphBody(name, name, block.span)
        if fits:
            self.block(Frame(module, {}, body), block)
        else:
            self.dropped_statements += 1
        return body

    def block(self, f: Frame, block: ast.Block | ast.For) -> None:
        """Unroll a block's statements into `f.body`; a statement with a reported problem is
        dropped and counted (checks that need the whole program then stay silent)."""
        statements = (block,) if isinstance(block, ast.For) else block.stmts
        for stmt in statements:
            try:
                self.statement(f, stmt)
            except Abort:
                self.dropped_statements += 1

    def statement(self, f: Frame, stmt: ast.Stmt) -> None:
        handler = self.handlers.get(type(stmt))
        if handler is not None:
            handler(self, f, stmt)

    def names_read(self, expr: ast.Expr) -> tuple[str, ...]:
        """The names `expr` reads, found once per expression of the program: the unrolling
        meets the same ones at every iteration and use (a condition, a bound, an argument)."""
        entry = self.expr_names.get(id(expr))
        if entry is None:  # the expression is held with them, so its id stays its own
            entry = self.expr_names[id(expr)] = (expr, names_read(expr))
        return entry[1]

    def node_name(self, body: GraphBody, base: str) -> str:
        taken = self.names_taken.setdefault(body.name, {})
        count = taken[base] = taken.get(base, 0) + 1
        return f"{body.name}/{base}" + (f"#{count}" if count > 1 else "")

    def new_group(self) -> int:
        self.next_group += 1
        return self.next_group

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

    # --- operands ---------------------------------------------------------------------------

    def pointer(self, module: LoadedModule, env: Env, expr: ast.Expr, qualifier,
                span: Span) -> PointerArg | None:
        """A buffer or a slice of one, as a pointer argument; None for anything else."""
        return buffer_pointer(self.ctx, module, env, expr, qualifier, span)

    def target(self, module: LoadedModule, env: Env, expr: ast.Expr, what: str) -> PointerArg:
        """A buffer or a slice of one that a statement reads or writes as a whole."""
        pointer = self.pointer(module, env, expr, None, expr.span)
        if pointer is None:
            self.ctx.sink.add(PC103, f"the {what} must be a buffer or a slice of one, found "
                              f"`{expr.span.text}`", expr.span, "name a declared buffer, e.g. `x` or `x[0:4]`")
            raise Abort
        return pointer
