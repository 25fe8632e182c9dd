"""The size pass: how many nodes, and how many loop iterations, unrolling a `step` or `init`
block would take, found before anything is unrolled so that an oversized program fails fast,
in bounded time and memory (PC111).

A graph body is counted once per set of arguments and multiplied by its uses; a loop whose
body does not depend on the loop variable is counted once and multiplied by its trip count.
Only a body that does depend on it (a condition, a bound or a graph argument reading the
variable) is counted iteration by iteration; before that, a lower bound (every part that
depends on the variable counted as nothing) times the trip count may already be over a
limit, and the enumeration stops as soon as the program is. Statements the unrolling would
reject count as nothing: it reports them itself.

The pass also measures how deep statements nest once graph uses are expanded: every graph use
and every block adds a level, and past the parser's MAX_NESTING the unrolling and the stages
after it, which recurse per level, would exhaust Python's stack (PC112).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...dsl import ast
from ...dsl.errors import MAX_NESTING
from ...errors import Error
from ..codes import PC111, PC112
from ..consteval import ConstError, RuntimeValue, evaluate
from .context import Context
from .scope import Abort, BufferSymbol, GraphSymbol, LoadedModule

MAX_NODES = 1_000_000  # nodes of the step and init together, child graphs' nodes included
MAX_ITERATIONS = 1_000_000  # loop iterations the unrolling may walk, nested loops multiplied


# A value, but not `frozen`: the pass makes one per statement sized (a million on a long
# step), and a frozen dataclass's constructor costs three times as much.
@dataclass(slots=True)
class Size:
    nodes: int = 0
    iterations: int = 0

    def __add__(self, other: Size) -> Size:
        return Size(self.nodes + other.nodes, self.iterations + other.iterations)

    def times(self, count: int) -> Size:
        return Size(self.nodes * count, self.iterations * count)

    @property
    def too_large(self) -> bool:
        return self.nodes > MAX_NODES or self.iterations > MAX_ITERATIONS


class _DependsOnLoop(Error):
    """The statement's size depends on a loop variable whose value is not fixed yet."""


class _TooLarge(Error):
    """The program is over a limit; `size` is its size so far (a lower bound)."""

    def __init__(self, size: Size) -> None:
        super().__init__()
        self.size = size


class _TooDeep(Error):
    """Expanding `stmt` nests statements more than MAX_NESTING levels deep."""

    def __init__(self, stmt) -> None:
        super().__init__()
        self.stmt = stmt


class Sizer:
    """Owns the size counted so far, the per-argument sizes of graph bodies with the nesting
    depth inside each, and the nesting depth of the statement being sized."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.size_so_far = Size()
        self.graph_sizes: dict[tuple, tuple[Size, int]] = {}
        self.nesting = 0  # blocks and graph uses around the statement being sized
        self.deepest = 0  # the most seen so far, for the depth inside a graph body

    def measure(self, module: LoadedModule, roots: list[ast.Block]) -> bool:
        """Size the root blocks together, reporting the statement that crosses a limit; whether
        the program fits, so that the unrolling builds something."""
        self.ctx.keep_values()  # the scopes are complete: values of expressions can be kept
        for stmt in (stmt for block in roots for stmt in block.stmts):
            try:
                self.size_so_far += self._size(module, {}, frozenset(), stmt, (), self.size_so_far)
            except _TooLarge as over:
                self.size_so_far = over.size
            except _TooDeep as deep:
                self.ctx.sink.add(PC112, f"graph uses and blocks nest more than {MAX_NESTING} levels "
                                  "deep here", deep.stmt.span, "use fewer levels of graphs within "
                                  "graphs: let one graph use several others in turn")
                return False
            if self.size_so_far.too_large:
                self._report_too_large(stmt, self.size_so_far)
                return False
        return True

    def _report_too_large(self, stmt, size: Size) -> None:
        if size.nodes > MAX_NODES:
            what = f"{size.nodes} nodes; a program holds at most {MAX_NODES} (step and init together)"
        else:
            what = (f"{size.iterations} loop iterations; unrolling walks at most {MAX_ITERATIONS} "
                    "(nested loops multiply)")
        self.ctx.sink.add(PC111, f"unrolling would reach at least {what}", stmt.span,
                          "let one kernel launch do the repeated work (a larger grid, a loop inside "
                          "the kernel) instead of unrolling it into nodes")

    def _size(self, module: LoadedModule, env: dict, unknown: frozenset, stmt, stack: tuple,
              before: Size, lower: bool = False) -> Size:
        """The size of one statement; `unknown` names loop variables not fixed yet, `before`
        is the size counted ahead of it (so an enumeration can stop at a limit). With `lower`,
        a lower bound in which whatever reads an unknown variable counts as nothing;
        without, reading one raises _DependsOnLoop."""
        if isinstance(stmt, (ast.Launch, ast.Fill, ast.Copy, ast.Gemm, ast.Collective)):
            return Size(1)
        self.nesting += 1
        try:
            if self.nesting > MAX_NESTING:
                raise _TooDeep(stmt)
            self.deepest = max(self.deepest, self.nesting)
            return self._size_of_block_statement(module, env, unknown, stmt, stack, before, lower)
        finally:
            self.nesting -= 1

    def _size_of_block_statement(self, module, env, unknown, stmt, stack, before: Size, lower: bool) -> Size:
        match stmt:
            case ast.Parallel(body=body):
                return self._size_of(module, env, unknown, _statements(body), stack, before, lower)
            case ast.If() if self._names_buffer_element(module, env, stmt.cond):
                # a device branch: both bodies are built, plus the deciding kernel and the node
                branches = [stmt.then, stmt.orelse]
                return Size(2) + sum((self._size(module, env, unknown, b, stack, before, lower)
                                      if isinstance(b, ast.If)
                                      else self._size_of(module, env, unknown, _statements(b), stack, before, lower)
                                      for b in branches), Size())
            case ast.Switch():
                return Size(2) + sum((self._size_of(module, env, unknown, case.body.stmts, stack, before, lower)
                                      for case in stmt.cases), Size())
            case ast.DeviceLoop():  # a body built once, run on the device; loops re-decide at its end
                extra = Size(1) if stmt.kind in ("while", "repeat") else Size()
                return Size(2) + extra + self._size_of(module, env, unknown, stmt.body.stmts, stack, before, lower)
            case ast.If():
                cond = self._value(module, env, unknown, stmt.cond, lower, "a compile-time `if`")
                chosen = stmt.then if cond is True else stmt.orelse if cond is False else None
                if isinstance(chosen, ast.If):
                    return self._size(module, env, unknown, chosen, stack, before, lower)
                return self._size_of(module, env, unknown, _statements(chosen), stack, before, lower)
            case ast.For():
                return self._size_of_loop(module, env, unknown, stmt, stack, before, lower)
            case ast.GraphCall():
                return self._size_of_graph_use(module, env, unknown, stmt, stack, before, lower)
        return Size()

    def _size_of(self, module, env, unknown, stmts, stack, before: Size, lower: bool = False) -> Size:
        total = Size()
        for stmt in stmts:
            total += self._size(module, env, unknown, stmt, stack, before + total, lower)
            if (before + total).too_large:
                raise _TooLarge(before + total)
        return total

    def _size_of_loop(self, module, env, unknown, stmt: ast.For, stack, before: Size,
                      lower: bool) -> Size:
        start = self._value(module, env, unknown, stmt.start, lower, "a loop bound")
        stop = self._value(module, env, unknown, stmt.stop, lower, "a loop bound")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop)):
            return Size()
        trips = max(stop - start, 0)
        var = stmt.var.text
        try:
            once = self._size_of(module, env, unknown | {var}, stmt.body.stmts, stack, before, lower)
            return (once + Size(0, 1)).times(trips)
        except _DependsOnLoop:
            pass
        at_least = (self._size_of(module, env, unknown | {var}, stmt.body.stmts, stack, before,
                                  lower=True) + Size(0, 1)).times(trips)
        if (before + at_least).too_large:
            raise _TooLarge(before + at_least)
        total = Size()
        inner = {**env}
        for value in range(start, stop):
            inner[var] = value
            total += self._size_of(module, inner, unknown - {var}, stmt.body.stmts, stack,
                                   before + total) + Size(0, 1)
            if (before + total).too_large:
                raise _TooLarge(before + total)
        return total

    def _size_of_graph_use(self, module, env, unknown, stmt: ast.GraphCall, stack, before: Size,
                           lower: bool) -> Size:
        symbol = module.scope.get(stmt.name.text)
        if not isinstance(symbol, GraphSymbol):
            return Size()
        decl = symbol.decl
        if decl.name.text in stack or len(stmt.args) != len(decl.params):
            return Size()
        use = f"an argument of graph `{decl.name.text}`, part of its instance's name,"
        values = tuple(self._value(module, env, unknown, a, lower, use) for a in stmt.args)
        if None in values:
            return Size()
        key = (id(decl), tuple((type(v), v) for v in values))
        if key not in self.graph_sizes:
            inner = {p.text: v for p, v in zip(decl.params, values)}
            outside, self.deepest = self.deepest, self.nesting
            size = self._size_of(symbol.module, inner, frozenset(), decl.body.stmts,
                                 stack + (decl.name.text,), before)
            self.graph_sizes[key] = size, self.deepest - self.nesting
            self.deepest = max(outside, self.deepest)
        size, depth = self.graph_sizes[key]
        if self.nesting + depth > MAX_NESTING:  # sized before at a shallower use
            raise _TooDeep(stmt)
        self.deepest = max(self.deepest, self.nesting + depth)
        return size + Size(1)

    def _value(self, module, env, unknown, expr: ast.Expr, lower: bool, use: str):
        """The expression's value, None when the unrolling would reject it; when it reads a
        variable in `unknown`, None for a lower bound, else _DependsOnLoop. The constants it
        reads are used structurally, as `use` (compiler/live.py)."""
        lookup = self.ctx.lookup(module, env, use=use)

        def known(ident: ast.Ident):
            if ident.text in unknown:
                raise _DependsOnLoop
            return lookup(ident)
        try:
            return evaluate(expr, known)
        except (ConstError, RuntimeValue, Abort):
            return None
        except _DependsOnLoop:
            if lower:
                return None
            raise


    @staticmethod
    def _names_buffer_element(module, env, expr: ast.Expr) -> bool:
        """`flag[i]` on a buffer: a device condition (the unrolling checks it in full)."""
        if not (isinstance(expr, ast.Index) and isinstance(expr.base, ast.Name)):
            return False
        name = expr.base.ident.text
        symbol = None if name in env else module.scope.get(name)
        return isinstance(symbol, BufferSymbol)


def _statements(block) -> tuple:
    if block is None:
        return ()
    return (block,) if isinstance(block, ast.For) else block.stmts
