"""Lark's parse tree to `dsl.ast`: the transformer the parser runs on every tree it builds."""

from __future__ import annotations

import ast as python_ast
from dataclasses import dataclass

from lark import Token, Transformer

from . import ast
from .errors import MAX_INT_BITS, InputLimitError, PipeSyntaxError
from .source import SourceFile, Span

_NOT_PRECEDENCE = 3
_PRECEDENCE = {
    "OR": 1, "AND": 2, "EQ": 4, "NE": 4, "LE": 4, "GE": 4, "LT": 4, "GT": 4, "BAR": 5,
    "CARET": 6, "AMP": 7, "LSHIFT": 8, "RSHIFT": 8, "PLUS": 9, "MINUS": 9, "STAR": 10,
    "SLASH": 10, "PERCENT": 10, "AT": 10,
}


def _unescape(token: Token) -> str | None:
    """A string literal's value (Python's escapes), or None when an escape is invalid or the
    value holds a NUL, which no path or reason can."""
    try:
        value = python_ast.literal_eval(str(token))
    except (SyntaxError, ValueError):
        return None
    return None if "\0" in value else value


def _int(text: str) -> int | None:
    """An integer literal's value, or None beyond 2**MAX_INT_BITS (decided before a long
    decimal string reaches `int`, which refuses more than 4,300 digits)."""
    digits = text.replace("_", "")
    base = 16 if digits[:2].lower() == "0x" else 10
    significant = (digits[2:] if base == 16 else digits).lstrip("0")
    if len(significant) > MAX_INT_BITS:
        return None
    value = int(significant or "0", base)
    return value if value.bit_length() <= MAX_INT_BITS else None


_KEPT_TOKENS = {"NAME", "INT", "FLOAT", "STRING", "NOT", "MINUS", "PLUS", "TILDE", *_PRECEDENCE}


@dataclass(frozen=True)
class _CallArgs:
    """A graph use's arguments with their parentheses: the use's span ends at its `)`."""

    items: tuple
    span: Span


class _ToAst(Transformer):
    """Builds `dsl.ast` nodes. The parser keeps every token, so each node's span runs from its
    first token to its last; punctuation and keywords are dropped here."""

    source: SourceFile  # set before each parse
    offset: int = 0

    def _tok(self, token: Token) -> Span:
        return Span(self.source, self.offset + token.start_pos, self.offset + token.end_pos)

    def _edge(self, item, first: bool) -> int | None:
        if item is None:
            return None
        if isinstance(item, Token):
            return self.offset + (item.start_pos if first else item.end_pos)
        if isinstance(item, tuple):
            for sub in (item if first else reversed(item)):
                edge = self._edge(sub, first)
                if edge is not None:
                    return edge
            return None
        if isinstance(item, str):
            return None
        return item.span.start if first else item.span.end

    def _span(self, children) -> Span:
        start = next((e for c in children if (e := self._edge(c, True)) is not None), self.offset)
        end = next((e for c in reversed(children) if (e := self._edge(c, False)) is not None), start)
        return Span(self.source, start, end)

    @staticmethod
    def _parts(children) -> list:
        return [c for c in children if not isinstance(c, Token) or c.type in _KEPT_TOKENS]

    def _ident(self, token: Token) -> ast.Ident:
        return ast.Ident(str(token), self._tok(token))

    def _str(self, token: Token) -> ast.StrLit:
        value = _unescape(token)
        if value is None:
            raise PipeSyntaxError("invalid string: a bad escape or a NUL character", self._tok(token),
                                  "escapes are Python's: `\\\\`, `\\\"`, `\\n`, `\\xHH`, `\\uHHHH`")
        return ast.StrLit(value, self._tok(token))

    # --- declarations -----------------------------------------------------------------------

    def start(self, children):
        return ast.Module(tuple(self._parts(children)), Span(self.source, 0, len(self.source.text)))

    def import_all(self, children):
        path, bindings = self._parts(children)
        return ast.Import(self._str(path), None, self._span(children), bindings or ())

    def import_names(self, children):
        path, *names, bindings = self._parts(children)
        return ast.Import(self._str(path), tuple(map(self._ident, names)), self._span(children),
                          bindings or ())

    def import_with(self, children):
        return tuple(self._parts(children))

    def binding(self, children):
        name, value = self._parts(children)
        return ast.Keyword(self._ident(name), value, self._span(children))

    def const_decl(self, children):
        name, value = self._parts(children)
        return ast.ConstDecl(self._ident(name), value, self._span(children))

    def buffer_decl(self, children):
        name, dtype, shape, *modifiers = self._parts(children)
        parts = dict(modifiers)
        return ast.BufferDecl(
            self._ident(name), self._ident(dtype), shape, "mapped" in parts,
            parts.get("labels", ()), parts.get("init"), self._span(children),
            "replicated" in parts,
        )

    def shape(self, children):
        return tuple(self._parts(children))

    def mapped(self, children):
        return ("mapped", children[0])  # the keyword's token, so that the declaration's span covers it

    def replicated(self, children):
        return ("replicated", children[0])

    def labels(self, children):
        return ("labels", tuple(map(self._ident, self._parts(children))))

    def buffer_init(self, children):
        return ("init", self._parts(children)[0])

    def graph_decl(self, children):
        name, params, body = self._parts(children)
        return ast.GraphDecl(self._ident(name), params or (), body, self._span(children))

    def graph_params(self, children):
        return tuple(self._ident(c) for c in self._parts(children) if c is not None)

    def step_decl(self, children):
        return ast.StepDecl(self._parts(children)[0], self._span(children))

    def init_decl(self, children):
        return ast.InitDecl(self._parts(children)[0], self._span(children))

    def option_decl(self, children):
        name, value = self._parts(children)
        return ast.OptionDecl(self._ident(name), value, self._span(children))

    def waive_decl(self, children):
        rule, file, *_, kernel, reason = self._parts(children)  # file: None in the bare form
        return ast.WaiveDecl(self._ident(rule), self._ident(kernel), self._str(reason), self._span(children),
                             self._str(file) if file is not None else None)

    # --- statements -------------------------------------------------------------------------

    def block(self, children):
        return ast.Block(tuple(self._parts(children)), self._span(children))

    def launch(self, children):
        kernel, grid, block, *rest = self._parts(children)
        shared = next((r for r in rest if r is not None and not isinstance(r, ast.Arg)), None)
        args = tuple(r for r in rest if isinstance(r, ast.Arg))
        return ast.Launch(self._ident(kernel), grid, block, shared, args, self._span(children))

    def arg(self, children):
        access, value = self._parts(children)
        return ast.Arg(access[0] if access else None, value, self._span(children))

    # An access qualifier keeps its keyword token, so that the argument's span includes it.
    def access_in(self, children):
        return ("in", children[0])

    def access_out(self, children):
        return ("out", children[0])

    def access_inout(self, children):
        return ("inout", children[0])

    def fill(self, children):
        target, value = self._parts(children)
        return ast.Fill(target, value, self._span(children))

    def copy(self, children):
        src, dst = self._parts(children)
        return ast.Copy(src, dst, self._span(children))

    def gemm(self, children):
        target, value, *options = self._parts(children)
        return ast.Gemm(target, value, tuple(o for o in options if o is not None), self._span(children))

    def gemm_option(self, children):
        name, value = self._parts(children)
        return ast.Keyword(self._ident(name), value, self._span(children))

    def for_stmt(self, children):
        var, start, stop, body = self._parts(children)
        return ast.For(self._ident(var), start, stop, body, self._span(children))

    def if_stmt(self, children):
        cond, then, *rest = self._parts(children)
        orelse = next((r for r in rest if r is not None), None)
        return ast.If(cond, then, orelse, self._span(children))

    def switch_stmt(self, children):
        flag, *cases = self._parts(children)
        return ast.Switch(flag, tuple(cases), self._span(children))

    def case_clause(self, children):
        value, body = self._parts(children)
        return ast.Case(value, body, self._span(children))

    def _device_loop(self, kind: str, children):
        operand, body = self._parts(children)
        return ast.DeviceLoop(kind, operand, body, self._span(children))

    def every_stmt(self, children):
        return self._device_loop("every", children)

    def while_stmt(self, children):
        return self._device_loop("while", children)

    def repeat_stmt(self, children):
        return self._device_loop("repeat", children)

    def parallel(self, children):
        return ast.Parallel(self._parts(children)[0], self._span(children))

    def graph_call(self, children):
        name, args = self._parts(children)
        return ast.GraphCall(self._ident(name), args.items if args else (), self._span(children))

    def allreduce(self, children):
        op, *views = self._parts(children)
        return ast.Collective("allreduce", self._ident(op), tuple(views), None, None, self._span(children))

    def broadcast(self, children):
        *views, root = self._parts(children)
        return ast.Collective("broadcast", None, tuple(views), None, root, self._span(children))

    def allgather(self, children):
        src, dst = self._parts(children)
        return ast.Collective("allgather", None, (src,), dst, None, self._span(children))

    def reducescatter(self, children):
        op, src, dst = self._parts(children)
        return ast.Collective("reducescatter", self._ident(op), (src,), dst, None, self._span(children))

    def call_args(self, children):
        return _CallArgs(tuple(c for c in self._parts(children) if c is not None), self._span(children))

    # --- expressions ------------------------------------------------------------------------

    def expr(self, children):
        items = list(reversed(self._parts(children)))
        value = self._climb(items, 0)
        assert not items, "the grammar admits only operand (operator operand)* sequences"
        return value

    def _climb(self, items: list, min_precedence: int) -> ast.Expr:
        """Precedence climbing over the flat operand/operator sequence (popped from the end)."""
        nots = []
        while isinstance(items[-1], Token) and items[-1].type == "NOT":
            nots.append(items.pop())
        if nots:
            # `not not x`: the operand binds at not's precedence; the nots wrap it inside out.
            left: ast.Expr = self._climb(items, _NOT_PRECEDENCE)
            for token in reversed(nots):
                left = ast.Unary("not", left, self._tok(token).to(left.span))
        else:
            left = items.pop()
        while items and _PRECEDENCE[items[-1].type] >= min_precedence:
            op = items.pop()
            right = self._climb(items, _PRECEDENCE[op.type] + 1)
            left = ast.Binary(str(op), left, right, left.span.to(right.span))
        return left

    def atom(self, children):
        # `( expr )`: the parser keeps the parentheses as tokens, so lark does not inline it.
        (inner,) = self._parts(children)
        return inner

    def unary(self, children):
        op, operand = self._parts(children)
        return ast.Unary(str(op), operand, self._span(children))

    def call(self, children):
        func, *args = self._parts(children)
        args = [a for a in args if a is not None]
        positional = tuple(a for a in args if not isinstance(a, ast.Keyword))
        keywords = tuple(a for a in args if isinstance(a, ast.Keyword))
        return ast.Call(func, positional, keywords, self._span(children))

    def keyword(self, children):
        name, value = self._parts(children)
        return ast.Keyword(self._ident(name), value, self._span(children))

    def subscript(self, children):
        base, sub = self._parts(children)
        span = self._span(children)
        if sub[0] == "slice":
            return ast.Slice(base, sub[1], sub[2], span)
        return ast.Index(base, sub[1], span)

    def index(self, children):
        return ("index", self._parts(children)[0])

    def multi_index(self, children):
        # `x[i, j]`: the indices as one tuple, spanning from the first to the last
        items = tuple(self._parts(children))
        return ("index", ast.TupleLit(items, items[0].span.to(items[-1].span)))

    def slice(self, children):
        colon = next(i for i, c in enumerate(children) if isinstance(c, Token) and c.type == "COLON")
        start = children[colon - 1] if colon > 0 else None
        stop = children[colon + 1] if colon + 1 < len(children) else None
        return ("slice", start, stop)

    def attribute(self, children):
        base, name = self._parts(children)
        return ast.Attribute(base, self._ident(name), self._span(children))

    def tuple_lit(self, children):
        return ast.TupleLit(tuple(self._parts(children)), self._span(children))

    def int_lit(self, children):
        (token,) = children
        value = _int(str(token))
        if value is None:
            raise InputLimitError(f"an integer literal beyond 2**{MAX_INT_BITS}", self._tok(token),
                                  f"integers are limited to {MAX_INT_BITS} bits")
        return ast.IntLit(value, self._tok(token))

    def float_lit(self, children):
        (token,) = children
        return ast.FloatLit(float(str(token).replace("_", "")), self._tok(token))

    def str_lit(self, children):
        return self._str(children[0])

    def true_lit(self, children):
        return ast.BoolLit(True, self._span(children))

    def false_lit(self, children):
        return ast.BoolLit(False, self._span(children))

    def null_lit(self, children):
        return ast.NullLit(self._span(children))

    def step_ref(self, children):
        return ast.StepRef(self._span(children))

    def name(self, children):
        ident = self._ident(children[0])
        return ast.Name(ident, ident.span)
