"""Operand views of library nodes in the unrolling pass: what `x`, `x[i, j]`, `x[a:b]` and
`view(x, ROWS, COLS)` name as a matrix (or a strided batch of them) inside a buffer, checked
against the buffer's shape (docs/language.md, "GEMM nodes"). compiler/resolve/gemm.py builds
GEMM nodes from them."""

from __future__ import annotations

from typing import NoReturn

from ...dsl import Span, ast
from ...wording import counted
from ..codes import PC103, PC501, PC502, Rule
from ..diagnostics import Fix
from ..model import Buffer, MatrixView
from .scope import Abort, BufferSymbol, InvalidSymbol, follows_from_failure, undefined
from .spelling import did_you_mean
from .unroll import Unroller


def product(dims) -> int:
    count = 1
    for dim in dims:
        count *= dim
    return count


def gemm_error(u: Unroller, rule: Rule, message: str, span: Span, hint: str,
               fixes: tuple[Fix, ...] = ()) -> NoReturn:
    u.ctx.sink.add(rule, message, span, hint, fixes=fixes)
    raise Abort


def _view(u: Unroller, module, env, expr: ast.Expr) -> tuple[Buffer, int, tuple[int, ...]] | None:
    """(buffer, first element, dimensions) of a view expression; None for an expression
    that names no buffer."""
    if isinstance(expr, ast.Name):
        name = expr.ident.text
        symbol = None if name in env else module.scope.get(name)
        if isinstance(symbol, InvalidSymbol):
            raise Abort  # its declaration's error is reported
        if symbol is None and name not in env:
            if follows_from_failure(module, name):
                raise Abort
            similar = did_you_mean(name, list(module.scope), "declarations", expr.span)
            u.ctx.sink.add(PC103, f"undefined name `{name}`", expr.span, similar.hint, fixes=similar.fixes,
                           cause=undefined(module, name))
            raise Abort
        if not isinstance(symbol, BufferSymbol):
            return None
        return symbol.buffer, 0, symbol.buffer.shape
    if isinstance(expr, ast.Slice):
        pointer = u.pointer(module, env, expr, None, expr.span)
        if pointer is None:
            return None
        return pointer.buffer, pointer.start, (pointer.stop - pointer.start,)
    if isinstance(expr, ast.Index):
        return _indexed(u, module, env, expr)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.ident.text == "view":
        return _reshaped(u, module, env, expr)
    return None


def _indexed(u: Unroller, module, env, expr: ast.Index) -> tuple[Buffer, int, tuple[int, ...]] | None:
    """`x[i]`, `x[i, j]`: the matrix (or batch) the leading indices select."""
    base = _view(u, module, env, expr.base)
    if base is None:
        return None
    buffer, start, dims = base
    items = expr.index.items if isinstance(expr.index, ast.TupleLit) else (expr.index,)
    if len(items) >= len(dims):
        gemm_error(u, PC502, f"`{expr.span.text}` indexes {len(items)} of the "
                   f"{counted(len(dims), 'dimension')} of `{buffer.name}`, leaving no matrix",
                   expr.span, "index leading dimensions only: the trailing two "
                   "(three for a batch) remain")
    for item, dim in zip(items, dims):
        index = u.ctx.integer(module, env, item, "an index")
        if not 0 <= index < dim:
            gemm_error(u, PC502, f"index {index} lies outside a dimension of {dim}",
                       item.span, f"indices run from 0 to {dim - 1}")
        dims = dims[1:]
        start += index * product(dims)
    return buffer, start, dims


def _reshaped(u: Unroller, module, env, call: ast.Call):
    if len(call.args) not in (3, 4) or call.keywords:
        gemm_error(u, PC501, "`view` takes a buffer and two or three dimensions",
                   call.span, "write `view(x, ROWS, COLS)` or `view(x, BATCH, ROWS, COLS)`")
    inner = _view(u, module, env, call.args[0])
    if inner is None:
        gemm_error(u, PC501, f"`view` reinterprets a buffer, found `{call.args[0].span.text}`",
                   call.args[0].span, "name a buffer or a slice of one, e.g. `x[0:1024]`")
    buffer, start, dims = inner
    shape = tuple(u.ctx.integer(module, env, d, "a view's dimension") for d in call.args[1:])
    if min(shape) <= 0 or product(shape) != product(dims):
        gemm_error(u, PC502, f"`{call.span.text}` holds {counted(product(shape), 'element')}, "
                   f"`{call.args[0].span.text}` {product(dims)}", call.span,
                   "a view reinterprets the elements it names: the counts must agree")
    return buffer, start, shape


def _required_view(u: Unroller, module, env, expr: ast.Expr,
                   what: str) -> tuple[Buffer, int, tuple[int, ...]]:
    view = _view(u, module, env, expr)
    if view is None:
        gemm_error(u, PC501, f"the {what} must be a buffer, an index of one or a `view`, "
                   f"found `{expr.span.text}`", expr.span,
                   "name a buffer `x`, a matrix of it `x[i]`, or `view(x[a:b], ROWS, COLS)`")
    return view


def elements(u: Unroller, module, env, expr: ast.Expr, what: str) -> MatrixView:
    """An output the library lays out itself (aux, the bias gradient): elements in a row."""
    buffer, start, dims = _required_view(u, module, env, expr, what)
    return MatrixView(buffer, start, 1, 1, product(dims), False, expr.span)


def matrix(u: Unroller, module, env, expr: ast.Expr, what: str, least: int = 2) -> MatrixView:
    buffer, start, dims = _required_view(u, module, env, expr, what)
    if not least <= len(dims) <= 3:
        shapes = "a vector" if least == 1 and len(dims) > 1 else "a matrix (2-D) or a batch of them (3-D)"
        gemm_error(u, PC502, f"the {what} `{expr.span.text}` has {counted(len(dims), 'dimension')} "
                   f"{list(dims)}; it must be {shapes}", expr.span,
                   "index leading dimensions (`x[i]`) or reinterpret with `view(x, ...)`")
    if len(dims) == 1:
        dims = (1, dims[0])
    batch = dims[0] if len(dims) == 3 else 1
    return MatrixView(buffer, start, batch, dims[-2], dims[-1], len(dims) == 3, expr.span)


def operand(u: Unroller, module, env, expr: ast.Expr, what: str) -> tuple[MatrixView, bool]:
    transposed = isinstance(expr, ast.Attribute) and expr.name.text == "T"
    inner = expr.base if isinstance(expr, ast.Attribute) and transposed else expr
    return matrix(u, module, env, inner, what), transposed
