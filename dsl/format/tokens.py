"""The concrete syntax a formatter needs: every token of a `.pipe` file in order, with the rule
that holds it, where logical lines begin, the block depth, and the comments and blank lines
between tokens (the syntax tree of dsl/ast.py keeps none of these)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from lark import Lark, Token, Tree

from ..parser import GRAMMAR

_COMMENT = re.compile(r"#[^\n]*")
# rules whose children are statements or declarations: each child begins a logical line
_LINE_HOLDERS = frozenset({"start", "block", "switch_stmt"})


@dataclass(frozen=True)
class Comment:
    text: str
    column: int     # 1-based, in the original text
    trailing: bool  # after code on its line (else alone on its line)
    blank_before: bool  # a blank line separates it from what precedes it


@dataclass
class Tok:
    value: str
    type: str
    parent: str          # the grammar rule (or alias) the token belongs to
    line: int
    end_line: int
    starts_line: bool = False  # begins a logical line: a statement, a declaration, a `}`
    depth: int = 0             # block nesting of the logical line it begins
    blank_before: bool = False
    # comments in the gap after this token, before the next one
    comments: list[Comment] = field(default_factory=list)


@cache
def _cst_parser() -> Lark:
    # the grammar of the compiler, with every token kept and no transformer: a concrete tree
    return Lark.open(str(GRAMMAR), parser="lalr", keep_all_tokens=True, maybe_placeholders=False)


def lex_tokens(text: str) -> list[tuple[str, str]]:
    """(type, value) of every token the parser would see, comments left out: what a layout
    must keep unchanged."""
    return [(tok.type, tok.value) for tok in _flatten(_cst_parser().parse(text))[0]]


def _flatten(tree: Tree) -> tuple[list[Token], list[str], list[bool]]:
    """The tokens in order, each token's rule, and whether it is the first of a child of a rule
    that holds statements. Iterative: expressions nest up to MAX_NESTING levels."""
    tokens: list[Token] = []
    parents: list[str] = []
    starts: list[bool] = []
    stack: list[tuple[object, str, bool]] = [(tree, "", False)]
    while stack:
        node, parent, first = stack.pop()
        if isinstance(node, Token):
            tokens.append(node)
            parents.append(parent)
            starts.append(first)
            continue
        assert isinstance(node, Tree)
        rule = str(node.data)
        holder = rule in _LINE_HOLDERS
        children = node.children
        for index in range(len(children) - 1, -1, -1):
            child = children[index]
            begins = (holder and isinstance(child, Tree) and (rule != "switch_stmt" or child.data == "case_clause")
                      or (index == 0 and first))
            stack.append((child, rule, begins))
    return tokens, parents, starts


def _gap_comments(text: str, start: int, end: int, after_token: bool) -> tuple[list[Comment], bool]:
    """The comments in text[start:end] (whitespace and comments only; `after_token`: a token
    ends at `start`), and whether a blank line follows the last of them (or the previous
    token, without comments)."""
    comments = []
    cursor = start
    for match in _COMMENT.finditer(text, start, end):
        newlines = text.count("\n", cursor, match.start())
        column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
        trailing = newlines == 0 and cursor == start and after_token
        comments.append(Comment(match.group().rstrip(), column, trailing, newlines > 1))
        cursor = match.end()
    return comments, text.count("\n", cursor, end) > 1


def concrete_tokens(text: str) -> tuple[list[Tok], list[Comment]]:
    """The file's tokens with the comments after each, and the comments before the first
    token. Raises lark's errors on text that does not parse; callers parse with dsl.parser
    first, which reports them as pipec errors."""
    raw, parents, starts = _flatten(_cst_parser().parse(text))
    leading, blank = _gap_comments(text, 0, raw[0].start_pos if raw else len(text), False)
    toks: list[Tok] = []
    depth = 0
    for index, token in enumerate(raw):
        tok = Tok(token.value, token.type, parents[index], token.line, token.end_line,
                  depth=depth, blank_before=blank and bool(toks or leading))
        previous = toks[-1] if toks else None
        if token.type == "RBRACE":
            depth -= 1
            tok.depth = depth
            # `{}` stays on one line unless a comment stands between the braces
            tok.starts_line = not (previous and previous.type == "LBRACE" and not previous.comments)
        else:
            tok.starts_line = starts[index] or bool(previous and previous.type == "LBRACE")
        if token.type == "LBRACE":
            depth += 1
        end = raw[index + 1].start_pos if index + 1 < len(raw) else len(text)
        tok.comments, blank = _gap_comments(text, token.end_pos, end, True)
        toks.append(tok)
    return toks, leading
