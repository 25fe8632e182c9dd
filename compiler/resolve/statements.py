"""The statement handlers of the unrolling pass, by syntax-tree type: launches, fills, copies,
graph uses, compile-time `for` and `parallel` here; device and compile-time branches in
control.py, GEMMs in gemm.py, collectives in collectives.py. A handler appends the nodes of
one statement to its frame's body, or reports and raises `Abort` to drop it."""

from __future__ import annotations

from collections.abc import Mapping

from ...dsl import ast
from ...wording import counted
from ..codes import PC105, PC201, PC205, PC315
from ..consteval import ConstError, RuntimeValue, literal, names_read
from ..diagnostics import Label, Use
from ..fixes import argument_count_fix, requalify
from ..live import LaunchLive, LiveTerm
from ..model import (
    Access, Arg, CopyNode, FillNode, GraphBody, GraphNode, LaunchNode, Mode, NullArg, PointerArg, RuntimeValueArg,
    ValueArg,
)
from ..ranges import Inputs, launch_accesses
from . import collectives, control, gemm
from .context import Env
from .ranks import check_rank_decision
from .scope import Abort, BufferSymbol, ConstSymbol, GraphSymbol, KernelSymbol, LoadedModule, buffer_named
from .unroll import Frame, Handler, Unroller


def launch(u: Unroller, f: Frame, stmt: ast.Launch) -> None:
    kernel = u.ctx.symbol(f.module, stmt.kernel, KernelSymbol).kernel
    (grid, grid_live), (block, block_live), (shared, shared_live) = _shape(u, f, stmt)
    bound = [_arg(u, f.module, f.env, a) for a in stmt.args]
    args = tuple(arg for arg, _ in bound)
    config_end = stmt.shared_bytes or stmt.block
    node = LaunchNode(
        u.node_name(f.body, kernel.name), kernel, grid, block, shared, args, stmt.span,
        stmt.grid.span.to(config_end.span), group=f.group,
    )
    node.accesses = launch_accesses(node, u.extents)
    terms = (*grid_live, *block_live, shared_live, *(term for _, term in bound))
    if any(term is not None for term in terms):
        node.live = LaunchLive(tuple(term for _, term in bound), grid_live, block_live, shared_live)
        _extents_read(u, node, stmt)
    f.body.items.append(node)


LaunchShape = tuple[tuple[tuple[int, int, int], tuple[LiveTerm | None, ...]],
                    tuple[tuple[int, int, int], tuple[LiveTerm | None, ...]], tuple[int, LiveTerm | None]]


def _shape(u: Unroller, f: Frame, stmt: ast.Launch) -> LaunchShape:
    """The launch's grid, block and dynamic shared memory, each with its record form, kept per
    module and the values of the loop variables and graph parameters they read: most read
    none, and resolve alike wherever the launch is unrolled (as most arguments do, `_arg`);
    others repeat with each use of their graph (a tree's levels, `s`, rebuilt per update)."""
    names = u.shape_names.get(id(stmt))
    if names is None:
        exprs = (stmt.grid, stmt.block) + ((stmt.shared_bytes,) if stmt.shared_bytes is not None else ())
        names = u.shape_names[id(stmt)] = tuple(dict.fromkeys(name for expr in exprs for name in names_read(expr)))
    # the type too: 1, 1.0 and true are equal keys
    key = (id(stmt), id(f.module), tuple((type(f.env[n]), f.env[n]) if n in f.env else None for n in names))
    shape = u.kept_shapes.get(key)
    if shape is None:
        grid, block = _dims(u, f, stmt.grid, "grid"), _dims(u, f, stmt.block, "block")
        shared: tuple[int, LiveTerm | None] = (0, None)
        if stmt.shared_bytes is not None:
            shared = u.ctx.live_integer(f.module, f.env, stmt.shared_bytes, "shared memory")
        shape = u.kept_shapes[key] = grid, block, shared
    return shape


def _extents_read(u: Unroller, node: LaunchNode, stmt: ast.Launch) -> None:
    """The scalar arguments and launch shapes an extent reads (`/// pipec: extent`) set which
    elements the launch touches, its accesses: they are structural."""
    live = node.live
    assert live is not None

    def read(inputs: Inputs) -> list[LiveTerm]:
        """The terms of what `inputs` names that are not structural yet."""
        positions, grid, block = inputs
        terms = [live.args[i] for i in positions if i < len(live.args)]
        terms += [*live.grid] if grid else []
        terms += [*live.block] if block else []
        return [term for term in terms if term is not None and not u.ctx.live.fixed(term.roots)]

    with_extent, any_extent = u.extents.pointers_with_extent(node.kernel)
    if not read(any_extent):  # the commonest case: an unrolled launch repeats the marks
        return
    for position, inputs in with_extent:
        if position >= len(node.args) or not isinstance(node.args[position], PointerArg):
            continue
        param = node.kernel.params[position]
        # the words only for a value not yet structural
        terms = read(inputs)
        if terms:
            use = f"a value that the extent of `{param.name}` in `{node.kernel.name}` reads, which sets the " \
                  "elements the launch touches,"
            for term in terms:
                u.ctx.live.mark(term.roots, use, stmt.span)


def _dims(u: Unroller, f: Frame, expr: ast.Expr, what: str) -> tuple[tuple[int, int, int], tuple[LiveTerm | None, ...]]:
    items = expr.items if isinstance(expr, ast.TupleLit) else (expr,)
    if len(items) > 3:
        u.ctx.sink.add(PC105, f"a {what} has at most three dimensions", expr.span, "write `(x, y, z)`")
        raise Abort
    dims = [u.ctx.live_integer(f.module, f.env, item, f"a {what} dimension") for item in items]
    values = [d for d, _ in dims] + [1] * (3 - len(dims))
    return (values[0], values[1], values[2]), tuple(term for _, term in dims) + (None,) * (3 - len(dims))


def _arg(u: Unroller, module: LoadedModule, env: Env, arg: ast.Arg) -> tuple[Arg, LiveTerm | None]:
    """An argument and its record form. One that reads no loop variable or graph parameter (a
    buffer, a constant) resolves alike wherever its launch is unrolled: it is resolved once per
    module and kept, which most arguments of a loop's or a graph's launches are. A failure is
    not kept: it is reported at each place."""
    names = u.arg_names.get(id(arg))
    if names is None:
        names = u.arg_names[id(arg)] = frozenset(names_read(arg.value))
    if not names.isdisjoint(env):
        return _resolve_arg(u, module, env, arg)
    key = (id(arg), id(module))
    kept = u.kept_args.get(key)
    if kept is None:
        kept = u.kept_args[key] = _resolve_arg(u, module, env, arg)
    return kept


def _resolve_arg(u: Unroller, module: LoadedModule, env: Env, arg: ast.Arg) -> tuple[Arg, LiveTerm | None]:
    value = arg.value
    pointer = u.pointer(module, env, value, arg.access, arg.span)
    if pointer is not None:
        return pointer, None
    if arg.access is not None:
        base = value.base if isinstance(value, ast.Slice) else value
        if isinstance(base, ast.Name) and base.ident.text not in env and base.ident.text not in module.scope:
            u.ctx.symbol(module, base.ident, BufferSymbol)  # an undefined name is that, not a value
        u.ctx.sink.add(PC205, f"`{arg.access}` qualifies a buffer, but `{value.span.text}` is a value",
                       arg.span, f"remove `{arg.access}`",
                       fixes=(requalify(arg.span, None),))
        raise Abort
    if isinstance(value, ast.NullLit):
        return NullArg(value.span), None
    try:
        computed, term = u.ctx.live_value(module, env, value)
        return ValueArg(computed, value.span), term
    except RuntimeValue as rv:
        return RuntimeValueArg(rv.description, buffer_named(module, rv.buffer_name), value.span), None
    except ConstError as error:
        u.ctx.report(error)
        raise Abort from None


def fill(u: Unroller, f: Frame, stmt: ast.Fill) -> None:
    target = u.target(f.module, f.env, stmt.target, "fill target")
    value = u.ctx.eval(f.module, f.env, stmt.value, context="value", use="a fill's value")
    if isinstance(value, str):
        u.ctx.sink.add(PC105, "a fill value must be a number", stmt.value.span, "fill with a number")
        raise Abort
    node = FillNode(u.node_name(f.body, f"fill:{target.buffer.name}"), target.buffer,
                    target.start, target.stop, value, stmt.span, group=f.group)
    node.accesses = (Access(target.buffer, target.start, target.stop, Mode.WRITE, stmt.target.span),)
    f.body.items.append(node)


def copy(u: Unroller, f: Frame, stmt: ast.Copy) -> None:
    src = u.target(f.module, f.env, stmt.src, "copy source")
    dst = u.target(f.module, f.env, stmt.dst, "copy destination")
    node = CopyNode(u.node_name(f.body, f"copy:{src.buffer.name}->{dst.buffer.name}"), src, dst,
                    stmt.span, group=f.group)
    node.accesses = (
        Access(src.buffer, src.start, src.stop, Mode.READ, stmt.src.span),
        Access(dst.buffer, dst.start, dst.stop, Mode.WRITE, stmt.dst.span),
    )
    f.body.items.append(node)


def graph_use(u: Unroller, f: Frame, stmt: ast.GraphCall) -> None:
    """A graph's body unrolled with the arguments' values, as a child graph node."""
    for arg in stmt.args:
        check_rank_decision(u.ctx.sink, f.module, f.env, arg, "a graph argument depends on the rank",
                            arg.span, [stmt], u.names_read(arg))
    symbol = u.ctx.symbol(f.module, stmt.name, GraphSymbol)
    decl = symbol.decl
    _check_graph_use(u, f, stmt, decl)
    values = [u.ctx.eval(f.module, f.env, a, context="value", use=f"an argument of graph `{decl.name.text}`, "
                         "part of its instance's name,") for a in stmt.args]
    suffix = f"[{', '.join(map(str, values))}]" if values else ""
    name = u.node_name(f.body, decl.name.text + suffix)
    use = Use(stmt.span, f"graph `{decl.name.text}` used here",
              ", ".join(f"{p.text} = {literal(v)}" for p, v in zip(decl.params, values)))
    child = GraphBody(name, decl.name.text, decl.span, uses=f.body.uses + (use,))
    inner_env = {p.text: v for p, v in zip(decl.params, values)}
    inner = Frame(symbol.module, inner_env, child, None, f.stack + ((decl.name.text, stmt.span),))
    with u.ctx.sink.within((use,)):  # a finding in the body names this use
        u.block(inner, decl.body)
    f.body.items.append(GraphNode(name, child, stmt.span, group=f.group))


def _check_graph_use(u: Unroller, f: Frame, stmt: ast.GraphCall, decl: ast.GraphDecl) -> None:
    """PC315 for a graph that uses itself, PC201 for a use with the wrong argument count."""
    if any(name == decl.name.text for name, _ in f.stack):  # the uses that lead here label it
        u.ctx.sink.add(PC315, f"graph `{decl.name.text}` uses itself", stmt.span,
                       "a graph cannot contain itself; unroll with a compile-time `for` instead")
        raise Abort
    if len(stmt.args) != len(decl.params):
        # a placeholder per parameter: the constant of its name (in any case) where there is one
        consts = f.module.names_of(ConstSymbol)
        placeholders = [next((c for c in consts if c.lower() == p.text.lower()), p.text) for p in decl.params]
        u.ctx.sink.add(PC201, f"graph `{decl.name.text}` takes {counted(len(decl.params), 'argument')}, "
                       f"found {len(stmt.args)}", stmt.span, "pass one constant per graph parameter",
                       labels=(Label(decl.name.span, "declared here"),),
                       fixes=(argument_count_fix(stmt.span, [a.span for a in stmt.args], placeholders),))
        raise Abort


def unrolled_for(u: Unroller, f: Frame, stmt: ast.For) -> None:
    start = u.ctx.integer(f.module, f.env, stmt.start, "a loop bound", "branch")
    stop = u.ctx.integer(f.module, f.env, stmt.stop, "a loop bound", "branch")
    for bound in (stmt.start, stmt.stop):
        check_rank_decision(u.ctx.sink, f.module, f.env, bound, "a loop's bounds depend on the rank",
                            bound.span, [stmt.body], u.names_read(bound))
    for value in range(start, stop):
        u.block(f.inside(env={**f.env, stmt.var.text: value}), stmt.body)


def parallel(u: Unroller, f: Frame, stmt: ast.Parallel) -> None:
    """A `parallel` block's members share one group (a nested block joins the outer one)."""
    u.block(f if f.group is not None else f.inside(group=u.new_group()), stmt.body)


STATEMENTS: Mapping[type, Handler] = {
    ast.Launch: launch,
    ast.Fill: fill,
    ast.Copy: copy,
    ast.Gemm: gemm.resolve_gemm,
    ast.Collective: collectives.resolve_collective,
    ast.GraphCall: graph_use,
    ast.For: unrolled_for,
    ast.If: control.resolve_if,
    ast.Switch: control.device_switch,
    ast.DeviceLoop: control.device_loop,
    ast.Parallel: parallel,
}
