"""Text to syntax tree: a lark LALR parser and a transformer into `dsl.ast` classes."""

from __future__ import annotations

import threading
from dataclasses import fields, is_dataclass
from functools import cache
from pathlib import Path

from lark import Lark, Token
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import ast
from .errors import MAX_NESTING, MAX_PIPE_CHARS, InputLimitError, PipeSyntaxError
from .source import SourceFile, Span
from .syntax_causes import cause, expected_phrase
from .transform import _ToAst

GRAMMAR = Path(__file__).with_name("grammar.lark")

# How expected terminals are named in messages.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "$END": "end of file",
}


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
    return expected_phrase(expected, _describe_terminal)


def _at_cause(source: SourceFile, offset: int, token: str, expected: set[str]) -> PipeSyntaxError | None:
    launch_close = any(_describe_terminal(name) == "`>>>`" for name in expected)
    found = cause(source, offset, token, expected, launch_close, _expected_phrase(expected))
    return PipeSyntaxError(found.message, found.span, found.hint, found.replacement) if found else None


def _syntax_error(source: SourceFile, error: UnexpectedInput, base: int = 0) -> PipeSyntaxError:
    if isinstance(error, UnexpectedToken) and error.token.type == "$END":
        error = UnexpectedEOF(error.expected)
    if isinstance(error, UnexpectedEOF):
        end = len(source.text) if base == 0 else base
        located = _at_cause(source, end, "", set(error.expected)) if base == 0 else None
        if located is not None:
            return located
        span = Span(source, end, end)
        expected = _expected_phrase(set(error.expected))
        return PipeSyntaxError(f"unexpected end of file; {expected}", span)
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
    located = _at_cause(source, start, str(token), set(error.expected)) if base == 0 else None
    if located is not None:
        return located
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
        return ("a statement starts with `launch`, `fill`, `copy`, `gemm`, `for`, `if`, `switch`, `every`, "
                "`while`, `repeat`, `parallel` or a graph name")
    return None
