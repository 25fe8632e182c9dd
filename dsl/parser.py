"""Text to syntax tree: a lark LALR parser and a transformer into `dsl.ast` classes."""

from __future__ import annotations

import ast as python_ast
import threading
from dataclasses import fields, is_dataclass
from functools import cache
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from ..errors import Error
from . import ast
from .source import SourceFile, Span

GRAMMAR = Path(__file__).with_name("grammar.lark")

# How expected terminals are named in messages.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "$END": "end of file",
}


_NOT_PRECEDENCE = 3
_PRECEDENCE = {
    "OR": 1, "AND": 2, "EQ": 4, "NE": 4, "LE": 4, "GE": 4, "LT": 4, "GT": 4, "BAR": 5,
    "CARET": 6, "AMP": 7, "LSHIFT": 8, "RSHIFT": 8, "PLUS": 9, "MINUS": 9, "STAR": 10,
    "SLASH": 10, "PERCENT": 10,
}


class PipeSyntaxError(Error):
    """The text is not a `.pipe` program; `code` is the rule that reports it."""

    code = "PC101"

    def __init__(self, message: str, span: Span, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint


class InputLimitError(PipeSyntaxError):
    """The text may be a program, but larger or deeper than the compiler reads."""

    code = "PC112"


@cache
def _parser() -> tuple[Lark, _ToAst]:
    # Every token stays in the tree so that spans come from tokens, and the transformer runs
    # inside the parser instead of over a finished tree: lark's position propagation and tree
    # walk each cost more than the parse itself on pipelines of thousands of nodes. The
    # analysed grammar is cached on disk by lark (keyed by the grammar's text).
    transformer = _ToAst()
    lark = Lark.open(str(GRAMMAR), parser="lalr", keep_all_tokens=True, maybe_placeholders=True,
                     start=["start", "expr"], transformer=transformer, cache=True)
    return lark, transformer


_lock = threading.Lock()

# The longest text parsed at once. Parsing costs about 15 microseconds and a kilobyte per token
# (lark), so a file of this size, some 20 times the DQN pipeline, is checked within seconds
# even when it is one long expression.
MAX_PIPE_CHARS = 256 << 10


def _run(start: str, source: SourceFile, offset: int, text: str):
    if len(text) > MAX_PIPE_CHARS:
        end = offset + MAX_PIPE_CHARS
        what, hint = (("the file", "split it into files that import each other") if start == "start"
                      else ("the expression", "shorten it"))
        raise InputLimitError(f"{what} is longer than {MAX_PIPE_CHARS:,} characters, the most "
                              "pipec parses at once", Span(source, end, end), hint)
    lark, transformer = _parser()
    with _lock:
        transformer.source, transformer.offset = source, offset
        try:
            tree = lark.parse(text, start=start)
        except UnexpectedInput as error:
            raise _syntax_error(source, error, offset) from None
    _check_nesting(tree)
    return tree


def parse(source: SourceFile) -> ast.Module:
    """Parse a whole `.pipe` file; raises `PipeSyntaxError` at the first syntax error, or at
    the problem that kept the file from being read whole (see `SourceFile.read`)."""
    problem = source.problem
    if problem is not None:
        span = Span(source, problem.offset, problem.offset)
        raise (InputLimitError if problem.limit else PipeSyntaxError)(problem.message, span, problem.hint)
    return _run("start", source, 0, source.text)


def parse_expression(source: SourceFile, start: int, end: int) -> ast.Expr:
    """Parse the expression at `source.text[start:end]` (a `pipec:` annotation in a kernel
    source); spans point into `source`."""
    return _run("expr", source, start, source.text[start:end])


# The largest integer magnitude, as a power of two: far beyond any size or count, and within
# the range of a float (2**1024), so that mixed arithmetic and range checks never overflow.
MAX_INT_BITS = 1000
# How deep blocks and expressions may nest. Later stages walk the tree recursively, about two
# Python frames per level, so this keeps them well inside Python's default recursion limit.
MAX_NESTING = 200
# For each syntax-tree class, the fields that may hold nested nodes (identifiers, spans and
# plain values never nest).
_CHILD_FIELDS = {
    cls: tuple(f.name for f in fields(cls) if f.name != "span")
    for cls in vars(ast).values()
    if isinstance(cls, type) and is_dataclass(cls) and cls.__module__ == ast.__name__ and cls is not ast.Ident
}


def _check_nesting(tree) -> None:
    """Raise InputLimitError where blocks and expressions nest deeper than MAX_NESTING. A
    block's statements and a binary operator's left operand stay at their parent's level: a
    long chain `a + b + c + ...` or a long block is no nesting (evaluation walks chains
    iteratively)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InputLimitError(f"blocks and expressions nest more than {MAX_NESTING} levels deep",
                                  Span(node.span.source, node.span.start, node.span.start),
                                  "give inner expressions names with `const`, or move inner "
                                  "blocks into a `graph`")
        if type(node) is ast.Binary:
            stack += [(node.left, depth), (node.right, depth + 1)]
            continue
        inner = depth if type(node) is ast.Block else depth + 1
        for name in _CHILD_FIELDS[type(node)]:
            value = getattr(node, name)
            if type(value) is tuple:
                stack.extend((item, inner) for item in value if type(item) in _CHILD_FIELDS)
            elif type(value) in _CHILD_FIELDS:
                stack.append((value, inner))


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        return f"`{_parser()[0].get_terminal(name).pattern.value}`"
    except KeyError:
        return name.lower()


def _expected_phrase(expected: set[str]) -> str:
    words = sorted({_describe_terminal(name) for name in expected})
    if len(words) > 6:
        words = [w for w in words if not w.startswith("`")][:4] + ["..."]
    if not words:
        return ""
    if len(words) == 1:
        return f"expected {words[0]}"
    return "expected one of " + ", ".join(words)


def _syntax_error(source: SourceFile, error: UnexpectedInput, base: int = 0) -> PipeSyntaxError:
    if isinstance(error, UnexpectedToken) and error.token.type == "$END":
        error = UnexpectedEOF(error.expected)
    if isinstance(error, UnexpectedEOF):
        end = len(source.text) if base == 0 else base
        span = Span(source, end, end)
        expected = _expected_phrase(set(error.expected))
        return PipeSyntaxError(f"unexpected end of file; {expected}", span, _hint_for_eof(source))
    if isinstance(error, UnexpectedCharacters):
        offset = base + error.pos_in_stream
        char = source.text[offset] if offset < len(source.text) else ""
        span = Span(source, offset, offset + 1)
        hint = None
        if char == "'":
            hint = "strings use double quotes"
        elif char == ";":
            hint = "statements need no `;`"
        shown = f"`{char}`" if char.isprintable() else f"U+{ord(char):04X}" if char else "end of text"
        return PipeSyntaxError(f"unexpected character {shown}", span, hint)
    assert isinstance(error, UnexpectedToken)
    token = error.token
    start = base + (token.start_pos if token.start_pos is not None else 0)
    span = Span(source, start, start + len(str(token)))
    expected = _expected_phrase(set(error.expected))
    message = f"unexpected `{token}`"
    if expected:
        message += f"; {expected}"
    return PipeSyntaxError(message, span, _hint_for_token(token, set(error.expected)))


def _hint_for_token(token: Token, expected: set[str]) -> str | None:
    text = str(token)
    if text == "(" and any("<<<" in _describe_terminal(e) for e in expected):
        return "a launch needs its configuration: `launch kernel<<<grid, block>>>(args...)`"
    if text == "=" and "NAME" not in expected and "EQUAL" not in expected:
        return "comparisons use `==`"
    if text in ("elif", "return", "def"):
        return f"`{text}` is not part of the language; see docs/language.md"
    if token.type == "NAME" and "RBRACE" in expected:
        return ("a statement starts with `launch`, `fill`, `copy`, `for`, `if`, `switch`, `every`, "
                "`while`, `repeat`, `parallel` or a graph name")
    return None


def _hint_for_eof(source: SourceFile) -> str | None:
    if source.text.count("{") > source.text.count("}"):
        return "a `{` is never closed"
    return None


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
        (path,) = self._parts(children)
        return ast.Import(self._str(path), None, self._span(children))

    def import_names(self, children):
        path, *names = self._parts(children)
        return ast.Import(self._str(path), tuple(map(self._ident, names)), self._span(children))

    def const_decl(self, children):
        name, value = self._parts(children)
        return ast.ConstDecl(self._ident(name), value, self._span(children))

    def buffer_decl(self, children):
        name, dtype, shape, *modifiers = self._parts(children)
        parts = dict(modifiers)
        return ast.BufferDecl(
            self._ident(name), self._ident(dtype), shape, "mapped" in parts,
            parts.get("labels", ()), parts.get("init"), self._span(children),
        )

    def shape(self, children):
        return tuple(self._parts(children))

    def mapped(self, children):
        return ("mapped", children[0])  # the keyword's token, so that the declaration's span covers it

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
        return ast.GraphCall(self._ident(name), args or (), self._span(children))

    def call_args(self, children):
        return tuple(c for c in self._parts(children) if c is not None)

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
