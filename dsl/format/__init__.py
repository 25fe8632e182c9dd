"""`pipec format`: the one layout of `.pipe` files (dsl/format/layout.py says what it is).

The formatter rewrites only the space between tokens: the token sequence of its output is the
input's, so the parse and the plan cannot change, and it checks that before it returns. The
one thing whitespace decides, the line a `# pipec: ignore[...]` comment applies to, is checked
too: every token on that line stays on it.
"""

from __future__ import annotations

import re
from pathlib import Path

from lark.exceptions import UnexpectedInput

from ...errors import Error
from ..parser import parse
from ..source import SourceFile
from .layout import INDENT, WIDTH, OutLine, align_comments, gap_lines, layout_line
from .tokens import Comment, Tok, concrete_tokens, lex_tokens

__all__ = ["WIDTH", "FormatError", "format_source", "format_text"]

_SUPPRESSION = re.compile(r"#\s*pipec:\s*ignore\[")


class FormatError(Error):
    """The formatter could not keep the file's meaning (a bug in pipec: please report it)."""


def format_text(text: str, name: str = "<text>") -> str:
    """The formatted text; raises PipeSyntaxError when it does not parse."""
    return format_source(SourceFile(Path(name), text))


def format_source(source: SourceFile) -> str:
    parse(source)  # the compiler's own errors, limits included, before any layout
    toks, leading = concrete_tokens(source.text)
    lines = _layout(toks, leading)
    formatted = _join(lines)
    _verify(source, toks, formatted)
    return formatted


def _logical_lines(toks: list[Tok]) -> list[list[Tok]]:
    groups: list[list[Tok]] = []
    for tok in toks:
        if tok.starts_line or not groups:
            groups.append([])
        groups[-1].append(tok)
    return groups


def _layout(toks: list[Tok], leading: list[Comment]) -> list[OutLine]:
    groups = _logical_lines(toks)
    depths = [g[0].depth + (1 if g[0].type == "RBRACE" else 0) for g in groups]
    lines = gap_lines(leading, "")[1]
    for index, group in enumerate(groups):
        wrapped = layout_line(group, INDENT * group[0].depth)
        wrapped[0].blank_before = group[0].blank_before
        comment, comment_lines = gap_lines(group[-1].comments,
                                           INDENT * (depths[index + 1] if index + 1 < len(groups) else 0))
        wrapped[-1].comment = comment
        lines += wrapped + comment_lines
    return lines


def _join(lines: list[OutLine]) -> str:
    texts = align_comments(lines)
    out: list[str] = []
    previous: OutLine | None = None
    for line, text in zip(lines, texts):
        opens_block = previous is not None and previous.code.endswith("{")
        if line.blank_before and out and not opens_block and not line.code.startswith("}"):
            out.append("")
        out.append(text.rstrip())
        previous = line
    return "\n".join(out) + "\n" if out else ""


def _verify(source: SourceFile, toks: list[Tok], formatted: str) -> None:
    where = source.display_path()
    try:
        same = lex_tokens(formatted) == [(t.type, t.value) for t in toks]
        after, _ = concrete_tokens(formatted)
    except UnexpectedInput:
        same = False
    if not same:
        raise FormatError(f"{where}: formatting would change the tokens of the file; "
                          "please report this with the file")
    before_targets, after_targets = _suppressed_lines(source.text, toks), _suppressed_lines(formatted, after)
    for before, now in zip(before_targets, after_targets):
        if not before <= now:
            raise FormatError(f"{where}: formatting would move code away from the `# pipec: ignore` "
                              "comment that applies to it; put the comment on a line of its own "
                              "above that code")


def _suppressed_lines(text: str, toks: list[Tok]) -> list[set[int]]:
    """For each `# pipec: ignore[...]` comment, in order, the indices of the tokens on the line
    it applies to (its own, or the next line with code when it stands alone)."""
    by_line: dict[int, set[int]] = {}
    for index, tok in enumerate(toks):
        by_line.setdefault(tok.line, set()).add(index)
    code_lines = sorted(by_line)
    targets = []
    for number, line in enumerate(text.split("\n"), start=1):
        match = _SUPPRESSION.search(line)
        if match is None or line[: match.start()].count('"') % 2:
            continue
        if line[: match.start()].strip():
            targets.append(by_line.get(number, set()))
        else:
            later = [n for n in code_lines if n > number]
            targets.append(by_line[later[0]] if later else set())
    return targets
