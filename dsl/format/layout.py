"""The canonical layout of a `.pipe` file (docs/cli.md, "pipec format").

One statement or declaration a line, four spaces a block level, one space between tokens
except where a rule below says none, at most one blank line between statements (none after a
`{` or before a `}`), trailing comments of consecutive lines aligned two spaces after the
longest line's code. A line longer than WIDTH, or one whose list its author broke, is wrapped
at the commas of its list: a bracketed list (a launch's arguments, an import's `with (...)`)
opens on the first line and its items follow on lines four spaces deeper, packed up to WIDTH;
line breaks between the items are kept, so that arguments stay grouped as their author
grouped them. A list without brackets (`from ... import a, b`, `allreduce avg a, b`, a
`gemm`'s options) continues its first line.
"""

from __future__ import annotations

from dataclasses import dataclass

from .tokens import Comment, Tok

WIDTH = 100
INDENT = "    "
_OPENERS = {"LPAR", "LSQB"}
_CLOSERS = {"RPAR", "RSQB"}
_LAUNCH_OPEN, _LAUNCH_CLOSE = "<<<", ">>>"
# tokens a `(` or `[` follows without a space: it calls, subscripts or parameterises them
_CALLEES = {"NAME", "RPAR", "RSQB", "LABELS"}


@dataclass
class OutLine:
    indent: str
    code: str                 # "" for a line that holds a comment only
    comment: str | None = None
    blank_before: bool = False
    continues_comment: bool = False  # a comment-only line under the trailing comment above


def _opens(tok: Tok) -> bool:
    return tok.type in _OPENERS or tok.value == _LAUNCH_OPEN


def _closes(tok: Tok) -> bool:
    return tok.type in _CLOSERS or tok.value == _LAUNCH_CLOSE


def space_between(a: Tok, b: Tok) -> str:
    """The space the canonical layout puts between two adjacent tokens of a line."""
    if _opens(a) or a.type == "DOT" or (a.parent == "unary" and a.type in ("MINUS", "PLUS", "TILDE")):
        return ""
    if _closes(b) or b.type in ("COMMA", "DOT") or (a.type, b.type) == ("LBRACE", "RBRACE"):
        return ""
    if b.type in _OPENERS and a.type in _CALLEES:
        return ""
    if b.value == _LAUNCH_OPEN or (a.value == _LAUNCH_CLOSE and b.type == "LPAR"):
        return ""
    if "keyword" in (a.parent, b.parent) and "EQUAL" in (a.type, b.type):
        return ""  # `seed=1`, as keyword arguments are written in Python
    if b.type == "COLON" and b.parent != "slice":
        return ""  # `buffer x: f32[4]`, `waive PC305 for "k.cu": k: "why"`
    return " "


def _levels(toks: list[Tok]) -> list[int]:
    """Each token's bracket level within its line; a bracket is at the level outside it."""
    levels, level = [], 0
    for tok in toks:
        if _closes(tok):
            level -= 1
        levels.append(level)
        if _opens(tok):
            level += 1
    return levels


def break_points(toks: list[Tok]) -> tuple[list[int], int | None]:
    """The gaps (gap g lies after token g) where the line may break, and the gap after the
    opening bracket of its list when the list has brackets."""
    levels = _levels(toks)
    commas = [i for i, t in enumerate(toks) if t.type == "COMMA" and levels[i] == 0]
    if commas:
        return commas, None
    for opener in range(len(toks) - 1, -1, -1):
        if levels[opener] != 0 or toks[opener].type not in _OPENERS:
            continue
        closer = next(i for i in range(opener + 1, len(toks)) if levels[i] == 0)
        inner = [i for i in range(opener + 1, closer) if toks[i].type == "COMMA" and levels[i] == 1]
        if inner:
            return [opener, *inner], opener
    return [], None


def _comment_lines(comments: list[Comment], indent: str, anchor: Comment | None) -> list[OutLine]:
    """Comment-only lines; those under `anchor` (a trailing comment) at its column continue it."""
    lines = []
    continuing = anchor is not None
    for comment in comments:
        continuing = continuing and not comment.blank_before and comment.column == anchor.column
        lines.append(OutLine(indent, "", comment.text, comment.blank_before, continues_comment=continuing))
    return lines


def gap_lines(comments: list[Comment], indent: str) -> tuple[str | None, list[OutLine]]:
    """A gap's trailing comment (it ends the line before it) and its comment-only lines."""
    if comments and comments[0].trailing:
        return comments[0].text, _comment_lines(comments[1:], indent, comments[0])
    return None, _comment_lines(comments, indent, None)


def layout_line(toks: list[Tok], indent: str) -> list[OutLine]:
    """One logical line (a statement, a declaration, a block's header or `}`), wrapped as the
    module says. The comments after its last token are the caller's."""
    seps = [""] + [space_between(a, b) for a, b in zip(toks, toks[1:])]
    points, opener = break_points(toks)
    forced = {g for g in range(len(toks) - 1) if toks[g].comments}
    user = {g for g in points if toks[g + 1].line > toks[g].end_line}
    flat = "".join(sep + tok.value for sep, tok in zip(seps, toks))
    if not forced and not user and len(indent) + len(flat) <= WIDTH:
        return [OutLine(indent, flat)]
    mandatory = forced | user | ({opener} if opener is not None else set())
    cuts = sorted(set(points) | forced)
    starts = [0] + [g + 1 for g in cuts]
    segments = ["".join((seps[i] if i > start else "") + toks[i].value for i in range(start, end))
                for start, end in zip(starts, starts[1:] + [len(toks)])]
    inner = indent + INDENT
    lines = [OutLine(indent, segments[0])]
    for gap, segment, start in zip(cuts, segments[1:], starts[1:]):
        current = lines[-1]
        comment, comment_lines = gap_lines(toks[gap].comments, inner)
        if comment is not None:
            current.comment = comment
        lines += comment_lines
        joined = current.code + seps[start] + segment
        if gap in mandatory or comment_lines or len(current.indent) + len(joined) > WIDTH:
            lines.append(OutLine(inner, segment))
        else:
            current.code = joined
    return lines


def align_comments(lines: list[OutLine]) -> list[str]:
    """The text of each line, trailing comments of consecutive lines in one column."""
    columns: dict[int, int] = {}
    run: list[int] = []

    def close_run() -> None:
        column = max((len(lines[i].indent) + len(lines[i].code) for i in run if lines[i].code), default=0) + 2
        columns.update((i, column) for i in run)
        run.clear()

    for index, line in enumerate(lines):
        in_run = (line.code and line.comment is not None) or (line.continues_comment and run)
        if not in_run or line.blank_before:
            close_run()
        if in_run:
            run.append(index)
    close_run()
    texts = []
    for index, line in enumerate(lines):
        if line.continues_comment and index in columns:
            texts.append(" " * columns[index] + line.comment)
        elif line.comment is not None and line.code:
            code = line.indent + line.code
            texts.append(code + " " * (columns[index] - len(code)) + line.comment)
        else:
            texts.append(line.indent + (line.code or line.comment or ""))
    return texts
