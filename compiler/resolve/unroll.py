"""The unrolling pass: graphs, `for`, compile-time `if` and `parallel` blocks become concrete
launch, fill, copy, GEMM and child-graph nodes, each with the element ranges it touches."""

from __future__ import annotations

from ...dsl import Span, ast
from ..codes import PC103, PC105, PC201, PC205, PC206, PC315
from ..config import CompileOptions
from ..consteval import ConstError, RuntimeValue, evaluate, literal
from ..diagnostics import DiagnosticSink, Label
from ..model import (
    Access, Buffer, CopyNode, FillNode, GraphBody, GraphNode, Kernel, LaunchNode, Mode, NullArg,
    Options, PointerArg, RuntimeValueArg, ValueArg,
)
from ..ranges import Extents, launch_accesses
from .collectives import Collectives
from .control import ControlFlow
from .gemm import Gemms
from .scope import Abort, LoadedModule, names_read
from .size import Sizing


class Unrolling(ControlFlow, Gemms, Collectives, Sizing):
    """Owns the parallel groups and the node names given out so far. The size pass has
    checked the root blocks against the node and iteration limits before any is unrolled."""

    def __init__(self, options: CompileOptions, sink: DiagnosticSink, toolchain) -> None:
        super().__init__(options, sink, toolchain)
        self.dropped_statements = 0
        self.next_group = 0
        self.names_taken: dict[str, dict[str, int]] = {}
        self.control_buffers = {}
        self.workspaces = {}
        self.names_in_skipped_branches: set[str] = set()
        self.gemm_workspace = Options().gemm_workspace  # the program's option, once resolved
        self.extents = Extents()

    def _instantiate_root(self, name: str, block: ast.Block, module: LoadedModule) -> GraphBody:
        body = GraphBody(name, name, block.span)
        if self.size_so_far.too_large or self.too_deep:  # reported by the size pass; build nothing
            self.dropped_statements += 1
            return body
        self._block(module, {}, block, body, None, [])
        return body

    def _block(self, module: LoadedModule, env: dict, block: ast.Block | ast.For, body: GraphBody,
               group: int | None, stack: list) -> None:
        statements = (block,) if isinstance(block, ast.For) else block.stmts
        for stmt in statements:
            try:
                self._statement(module, env, stmt, body, group, stack)
            except Abort:
                self.dropped_statements += 1
                continue

    def _statement(self, module, env, stmt, body: GraphBody, group, stack) -> None:
        match stmt:
            case ast.Launch():
                body.items.append(self._launch(module, env, stmt, body, group))
            case ast.Fill():
                body.items.append(self._fill(module, env, stmt, body, group))
            case ast.Copy():
                body.items.append(self._copy(module, env, stmt, body, group))
            case ast.Gemm():
                body.items.append(self.gemm(module, env, stmt, body, group))
            case ast.Collective():
                body.items.append(self.collective(module, env, stmt, body, group))
            case ast.GraphCall():
                for arg in stmt.args:
                    self.check_rank_decision(module, env, arg, "a graph argument depends on the rank",
                                             arg.span, [stmt])
                node = self._graph_call(module, env, stmt, body, group, stack)
                if node is not None:
                    body.items.append(node)
            case ast.For():
                start = self._int(module, env, stmt.start, "a loop bound", "branch")
                stop = self._int(module, env, stmt.stop, "a loop bound", "branch")
                for bound in (stmt.start, stmt.stop):
                    self.check_rank_decision(module, env, bound, "a loop's bounds depend on the rank",
                                             bound.span, [stmt.body])
                for value in range(start, stop):
                    self._block(module, {**env, stmt.var.text: value}, stmt.body, body, group, stack)
            case ast.If() if (flag := self.device_flag(module, env, stmt.cond)) is not None:
                self.device_if(module, env, stmt, flag, body, group, stack)
            case ast.Switch():
                self.device_switch(module, env, stmt, body, group, stack)
            case ast.DeviceLoop():
                self.device_loop(module, env, stmt, body, group, stack)
            case ast.If():
                cond = self._eval(module, env, stmt.cond, context="branch")
                if not isinstance(cond, bool):
                    self.sink.add(PC105, f"a condition must be a boolean, found `{literal(cond)}`",
                                  stmt.cond.span, "compare explicitly, for example `N > 0`")
                    raise Abort
                chosen = stmt.then if cond else stmt.orelse
                skipped = stmt.orelse if cond else stmt.then
                if skipped is not None:  # other constants take it: its buffers are not unused
                    self.names_in_skipped_branches.update(names_read(skipped))
                self.check_rank_decision(module, env, stmt.cond, "a condition depends on the rank",
                                         stmt.cond.span, [stmt.then, stmt.orelse])
                if isinstance(chosen, ast.If):
                    self._statement(module, env, chosen, body, group, stack)
                elif chosen is not None:
                    self._block(module, env, chosen, body, group, stack)
            case ast.Parallel():
                if group is None:
                    self.next_group += 1
                    group = self.next_group
                self._block(module, env, stmt.body, body, group, stack)

    def _node_name(self, body: GraphBody, base: str) -> str:
        taken = self.names_taken.setdefault(body.name, {})
        count = taken[base] = taken.get(base, 0) + 1
        return f"{body.name}/{base}" + (f"#{count}" if count > 1 else "")

    def _dims(self, module, env, expr: ast.Expr, what: str) -> tuple[int, int, int]:
        items = expr.items if isinstance(expr, ast.TupleLit) else (expr,)
        if len(items) > 3:
            self.sink.add(PC105, f"a {what} has at most three dimensions", expr.span,
                          "write `(x, y, z)`")
            raise Abort
        dims = [self._int(module, env, item, f"a {what} dimension") for item in items]
        return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]

    def _launch(self, module, env, stmt: ast.Launch, body: GraphBody, group) -> LaunchNode:
        kernel: Kernel = self._symbol(module, stmt.kernel, "kernel").value
        grid = self._dims(module, env, stmt.grid, "grid")
        block = self._dims(module, env, stmt.block, "block")
        shared = 0
        if stmt.shared_bytes is not None:
            shared = self._int(module, env, stmt.shared_bytes, "shared memory")
        args = tuple(self._arg(module, env, a) for a in stmt.args)
        config_end = stmt.shared_bytes or stmt.block
        node = LaunchNode(
            self._node_name(body, kernel.name), kernel, grid, block, shared, args, stmt.span,
            stmt.grid.span.to(config_end.span), group=group,
        )
        node.accesses = launch_accesses(node, self.extents)
        return node

    def _arg(self, module, env, arg: ast.Arg):
        value = arg.value
        pointer = self._pointer(module, env, value, arg.access, arg.span)
        if pointer is not None:
            return pointer
        if arg.access is not None:
            self.sink.add(PC205, f"`{arg.access}` qualifies a buffer, but `{value.span.text}` is a value",
                          arg.span, f"remove `{arg.access}`")
            raise Abort
        if isinstance(value, ast.NullLit):
            return NullArg(value.span)
        try:
            return ValueArg(evaluate(value, self._lookup(module, env)), value.span)
        except RuntimeValue as rv:
            return RuntimeValueArg(rv.description, self._buffer_named(module, rv.buffer_name), value.span)
        except ConstError as error:
            self.sink.add(error.rule, error.message, error.span, error.hint)
            raise Abort from None

    def _buffer_named(self, module: LoadedModule, name: str | None) -> Buffer | None:
        symbol = module.scope.get(name) if name else None
        return symbol.value if symbol is not None and symbol.kind == "buffer" else None

    def _pointer(self, module, env, expr: ast.Expr, qualifier, span: Span) -> PointerArg | None:
        """A buffer or a slice of one, as a pointer argument; None for anything else."""
        base = expr.base if isinstance(expr, ast.Slice) else expr
        if not isinstance(base, ast.Name) or base.ident.text in env:
            return None
        symbol = module.scope.get(base.ident.text)
        if symbol is not None and symbol.kind == "invalid":
            raise Abort
        if symbol is None or symbol.kind != "buffer":
            return None
        buffer: Buffer = symbol.value
        start, stop = 0, buffer.count
        if isinstance(expr, ast.Slice):
            if expr.start is not None:
                start = self._int(module, env, expr.start, "a slice bound", "value")
            if expr.stop is not None:
                stop = self._int(module, env, expr.stop, "a slice bound", "value")
            if not 0 <= start <= stop <= buffer.count or start == stop:
                self.sink.add(PC206, f"slice [{start}:{stop}] of `{buffer.name}` lies outside its "
                              f"{buffer.count} elements" if start != stop or start > buffer.count
                              else f"slice [{start}:{stop}] of `{buffer.name}` is empty",
                              expr.span, f"element indices run from 0 to {buffer.count}; slices are half-open")
                raise Abort
        return PointerArg(buffer, start, stop, isinstance(expr, ast.Slice), qualifier, span)

    def _target(self, module, env, expr: ast.Expr, what: str) -> PointerArg:
        pointer = self._pointer(module, env, expr, None, expr.span)
        if pointer is None:
            self.sink.add(PC103, f"the {what} must be a buffer or a slice of one, found "
                          f"`{expr.span.text}`", expr.span, "name a declared buffer, e.g. `x` or `x[0:4]`")
            raise Abort
        return pointer

    def _fill(self, module, env, stmt: ast.Fill, body: GraphBody, group) -> FillNode:
        target = self._target(module, env, stmt.target, "fill target")
        value = self._eval(module, env, stmt.value, context="value")
        if isinstance(value, str):
            self.sink.add(PC105, "a fill value must be a number", stmt.value.span, "fill with a number")
            raise Abort
        node = FillNode(self._node_name(body, f"fill:{target.buffer.name}"), target.buffer,
                        target.start, target.stop, value, stmt.span, group=group)
        node.accesses = (Access(target.buffer, target.start, target.stop, Mode.WRITE, stmt.target.span),)
        return node

    def _copy(self, module, env, stmt: ast.Copy, body: GraphBody, group) -> CopyNode:
        src = self._target(module, env, stmt.src, "copy source")
        dst = self._target(module, env, stmt.dst, "copy destination")
        node = CopyNode(self._node_name(body, f"copy:{src.buffer.name}->{dst.buffer.name}"), src, dst,
                        stmt.span, group=group)
        node.accesses = (
            Access(src.buffer, src.start, src.stop, Mode.READ, stmt.src.span),
            Access(dst.buffer, dst.start, dst.stop, Mode.WRITE, stmt.dst.span),
        )
        return node

    def _graph_call(self, module, env, stmt: ast.GraphCall, body: GraphBody, group, stack) -> GraphNode | None:
        symbol = self._symbol(module, stmt.name, "graph")
        decl: ast.GraphDecl = symbol.value
        if any(name == decl.name.text for name, _ in stack):
            chain = [span for name, span in stack] + [stmt.span]
            start = next(i for i, (name, _) in enumerate(stack) if name == decl.name.text)
            self.sink.add(PC315, f"graph `{decl.name.text}` uses itself", stmt.span,
                          "a graph cannot contain itself; unroll with a compile-time `for` instead",
                          labels=tuple(Label(s, "used here") for s in chain[start:-1]))
            raise Abort
        if len(stmt.args) != len(decl.params):
            self.sink.add(PC201, f"graph `{decl.name.text}` takes {len(decl.params)} argument"
                          f"{'s' * (len(decl.params) != 1)}, found {len(stmt.args)}", stmt.span,
                          "pass one constant per graph parameter",
                          labels=(Label(decl.name.span, "declared here"),))
            raise Abort
        values = [self._eval(module, env, a, context="value") for a in stmt.args]
        suffix = f"[{', '.join(map(str, values))}]" if values else ""
        name = self._node_name(body, decl.name.text + suffix)
        child = GraphBody(name, decl.name.text, decl.span)
        inner_env = {p.text: v for p, v in zip(decl.params, values)}
        self._block(symbol.module, inner_env, decl.body, child, None, stack + [(decl.name.text, stmt.span)])
        return GraphNode(name, child, stmt.span, group=group)
