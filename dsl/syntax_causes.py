"""Syntax errors told at their cause rather than where the parser noticed them: a launch
configuration closed with `>>` instead of `>>>`, a `{` or a `(` that is never closed (found
where the next statement or declaration begins, or at the end of the file), and expected-token
lists as words ("an expression", "a statement") instead of a dozen terminals."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .source import SourceFile, Span

# What stands between tokens and may hold brackets that are not brackets: strings, comments.
_SCAN = re.compile(r'"(?:[^"\\\n]|\\.)*"|#[^\n]*|<<<|>>>|>>|[{}()]')
EXPRESSION_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "MINUS", "PLUS", "TILDE", "NOT", "TRUE",
                    "FALSE", "NULL", "STEP"}
STATEMENT_START = {"LAUNCH", "FILL", "COPY", "GEMM", "FOR", "IF", "PARALLEL", "SWITCH", "EVERY", "WHILE",
                   "REPEAT", "ALLREDUCE", "BROADCAST", "ALLGATHER", "REDUCESCATTER"}
DECLARATION_START = {"IMPORT", "FROM", "CONST", "BUFFER", "GRAPH", "STEP", "INIT", "OPTION", "WAIVE"}
OPERATORS = {"OR", "AND", "EQ", "NE", "LE", "GE", "LT", "GT", "BAR", "CARET", "AMP", "LSHIFT", "RSHIFT",
             "PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "AT"}
# words that begin a statement or a declaration: after an unclosed bracket, where it shows
_BEGINNERS = {"launch", "fill", "copy", "gemm", "for", "if", "parallel", "switch", "every", "while",
              "repeat", "allreduce", "broadcast", "allgather", "reducescatter", "import", "from", "const",
              "buffer", "graph", "step", "init", "option", "waive", "}"}


@dataclass(frozen=True)
class Cause:
    message: str
    span: Span
    hint: str
    replacement: str | None = None  # the text the span should hold, where that is certain


def expected_phrase(expected: set[str], describe: Callable[[str], str]) -> str:
    """`expected X, Y or Z`, every expected terminal said, groups of them as one word."""
    words: list[str] = []
    rest = set(expected)
    # in a block the lexer reads the statement words as names: a name or `}` is a statement
    in_block = {"NAME", "RBRACE"} <= rest and not rest & (EXPRESSION_START - {"NAME"})
    for group, word in ((DECLARATION_START, "a declaration"), (STATEMENT_START, "a statement"),
                        (EXPRESSION_START, "an expression"), (OPERATORS, "an operator")):
        if len(rest & group) >= 5 or (in_block and word == "a statement"):
            words.append(word)
            rest -= group | ({"NAME"} if word == "a statement" else set())
    described = sorted({describe(name) for name in rest}, key=lambda w: (w.startswith("`"), w == "end of file", w))
    words += described
    if not words:
        return ""
    if len(words) == 1:
        return f"expected {words[0]}"
    return f"expected {', '.join(words[:-1])} or {words[-1]}"


def _indent(text: str, offset: int) -> int:
    start = text.rfind("\n", 0, offset) + 1
    return len(text[start:offset]) - len(text[start:offset].lstrip(" \t"))


def _header(text: str, brace: int) -> str:
    """The words before a `{` on its line: `graph update(u)`, `if x > 0`, `step`."""
    start = text.rfind("\n", 0, brace) + 1
    words = text[start:brace].strip().lstrip("}").strip()
    return words.removeprefix("else ").strip() or "block"


def unclosed_brace(source: SourceFile, stop: int) -> Cause | None:
    """The `{` before `stop` that is never closed. A `}` closes the open brace whose line is
    indented as the `}` is; the deeper open braces it passes over are the unclosed ones (the
    layout of `pipec format` makes that exact); else the innermost brace still open."""
    text = source.text
    stack: list[int] = []
    skipped: list[int] = []
    for match in _SCAN.finditer(text, 0, stop):
        token = match.group()
        if token == "{":
            stack.append(match.start())
        elif token == "}" and stack:
            first_on_line = not text[text.rfind("\n", 0, match.start()) + 1 : match.start()].strip()
            while first_on_line and len(stack) > 1 and _indent(text, stack[-1]) > _indent(text, match.start()):
                skipped.append(stack.pop())
            stack.pop()
    brace = skipped[0] if skipped else stack[-1] if stack else None
    if brace is None:
        return None
    header = _header(text, brace)
    line = source.line_col(stop)[0]
    return Cause(f"the `{{` of `{header}` is never closed", Span(source, brace, brace + 1),
                 f"close the block with `}}` before line {line}" if stop < len(text)
                 else "close the block with `}` before the end of the file")


def unclosed_paren(source: SourceFile, stop: int) -> Cause | None:
    """The `(` before `stop`, on an earlier line, that is never closed."""
    text = source.text
    stack: list[int] = []
    for match in _SCAN.finditer(text, 0, stop):
        if match.group() == "(":
            stack.append(match.start())
        elif match.group() == ")" and stack:
            stack.pop()
    if not stack or "\n" not in text[stack[-1] : stop]:
        return None
    paren = stack[-1]
    launch = re.search(r"\blaunch\s+(\w+)\s*<<<.*>>>\s*$", text[text.rfind("\n", 0, paren) + 1 : paren])
    what = f"the arguments of `launch {launch.group(1)}`" if launch else "this `(`"
    return Cause(f"{what} {'are' if launch else 'is'} never closed: a `)` is missing",
                 Span(source, paren, paren + 1), "close the list with `)` after its last item")


def short_launch_close(source: SourceFile, stop: int) -> Cause | None:
    """A `>>` after the last `<<<` before `stop`, where `>>>` was meant."""
    text = source.text
    opened = None
    for match in _SCAN.finditer(text, 0, stop):
        token = match.group()
        if token == "<<<":
            opened = match.start()
        elif token == ">>>":
            opened = None
        elif token == ">>" and opened is not None:
            return Cause("`>>` closes the launch configuration, which takes `>>>`",
                         Span(source, match.start(), match.end()),
                         "write `launch kernel<<<grid, block>>>(args...)`; `>>` is a right shift", ">>>")
    return None


# what ends a line whose expression goes on: a binary operator or `=`
_DANGLING = re.compile(r"(==|!=|<=|>=|<<|>>|->|\band|\bor|\bnot|[-+*/%@&|^<>=~,])\s*$")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _code_before(text: str, offset: int) -> tuple[int, str] | None:
    """The offset where the last line with code before `offset` starts, and that code (without
    its comment)."""
    end = text.rfind("\n", 0, offset)
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        code = re.sub(r'"(?:[^"\\\n]|\\.)*"|#.*', lambda m: m.group() if m.group()[0] == '"' else "",
                      text[start:end]).rstrip()
        if code.strip():
            return start, code
        end = start - 1
    return None


def unfinished_line(source: SourceFile, offset: int, token: str, expected: set[str],
                    phrase: str) -> Cause | None:
    """A line whose statement or expression is unfinished, found on the next line: the next
    line's first word is unexpected where more of the statement was due (`buffer x: f32` then a
    declaration: expected `[`), or it was read as an operand (`const B = 256 +` then `buffer x`,
    read as `256 + buffer`)."""
    text = source.text
    line_start = text.rfind("\n", 0, offset) + 1
    first = _WORD.match(text, line_start + _indent(text, offset if offset > line_start else line_start))
    previous = _code_before(text, line_start)
    if first is None or first.group() not in _BEGINNERS or previous is None:
        return None
    start, code = previous
    line = source.line_col(start)[0]
    dangling = _DANGLING.search(code)
    if dangling and first.end() <= offset:  # the first word was read as the operand
        at = start + dangling.start(1)
        operator = dangling.group(1)
        return Cause(f"`{operator}` at the end of line {line} has no operand after it",
                     Span(source, at, at + len(operator)),
                     f"finish the expression on line {line}: a line break does not end it, so the "
                     f"`{first.group()}` of the next line was read as its operand")
    due = expected & (STATEMENT_START | DECLARATION_START | {"RBRACE", "$END"})
    if first.start() == offset and not due and phrase:
        last = re.search(r"\S+$", code)
        at = start + last.start()
        opening = _WORD.match(code.strip())
        what = "declaration" if opening and opening.group().upper() in DECLARATION_START else "statement"
        return Cause(f"line {line} ends before its {what} does: {phrase} after `{last.group()}`",
                     Span(source, at, start + len(code)), f"complete the {what} on its line")
    return None


def _more_opened(text: str) -> bool:
    tokens = [m.group() for m in _SCAN.finditer(text)]
    return tokens.count("{") > tokens.count("}")


def cause(source: SourceFile, offset: int, token: str, expected: set[str], launch_close: bool,
          phrase: str = "") -> Cause | None:
    """The cause of a syntax error the parser found at `offset` (`token` there, "" at the end
    of the file; `launch_close`: `>>>` was one of the expected tokens; `phrase`: the expected
    tokens in words), when it lies elsewhere."""
    if launch_close:
        found = short_launch_close(source, offset)
        if found:
            return found
    beginner = token in _BEGINNERS or not token
    if beginner and "RPAR" in expected:
        found = unclosed_paren(source, offset)
        if found:
            return found
    if beginner and ("RBRACE" in expected or not token) and _more_opened(source.text):
        return unclosed_brace(source, offset)
    if token:
        return unfinished_line(source, offset, token, expected, phrase)
    return None
