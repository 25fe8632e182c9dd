"""Edits that fix a finding where one edit is obvious (an editor's quick fix, `--format json`'s
`fixes`), built where the finding is reported: the resolver for a graph use, the checks for a
launch. The did-you-mean edit is compiler/resolve/spelling.py's."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..dsl import PipeSyntaxError, Span
from ..wording import plural
from .diagnostics import Edit, Fix


def argument_count_fix(call: Span, args: Sequence[Span], placeholders: Sequence[str]) -> Fix:
    """For a call with the wrong number of arguments (`placeholders`: one per parameter): bind
    the missing ones after the last argument, or remove those past the last parameter."""
    source = call.source
    missing = placeholders[len(args):]
    if missing:
        listed = ", ".join(missing)
        title = f"Bind {', '.join(f'`{name}`' for name in missing)}"
        if args:
            return Fix(title, (Edit(Span(source, args[-1].end, args[-1].end), f", {listed}"),))
        if call.text.endswith(")"):  # `launch k<<<1, 1>>>()`, `g()`
            return Fix(title, (Edit(Span(source, call.end - 1, call.end - 1), listed),))
        return Fix(title, (Edit(Span(source, call.end, call.end), f"({listed})"),))  # `g`
    kept = len(placeholders)
    start = args[kept - 1].end if kept else args[0].start
    extra = len(args) - kept
    return Fix(f"Remove the extra {plural('argument', extra)}", (Edit(Span(source, start, args[-1].end), ""),))


_QUALIFIER = re.compile(r"(in|out|inout)\s+")


def requalify(arg: Span, qualifier: str | None) -> Fix:
    """For a pointer argument (`arg`: its text with any qualifier): bind it `qualifier`, or
    with none (None)."""
    written = _QUALIFIER.match(arg.text)
    bare = arg.text[written.end():] if written else arg.text
    if qualifier is None:
        return Fix(f"Drop `{written.group(1) if written else ''}`", (Edit(arg, bare),))
    return Fix(f"Bind `{bare}` as `{qualifier}`", (Edit(arg, f"{qualifier} {bare}"),))


def removal(title: str, span: Span) -> Fix:
    """Remove `span`: with its line when nothing else stands on it, else with the blanks
    before it (a trailing comment)."""
    text = span.source.text
    line_start = text.rfind("\n", 0, span.start) + 1
    line_end = text.find("\n", span.end)
    line_end = len(text) if line_end < 0 else line_end
    if not text[line_start:span.start].strip() and not text[span.end:line_end].strip():
        return Fix(title, (Edit(Span(span.source, line_start, min(line_end + 1, len(text))), ""),))
    start = len(text[:span.start].rstrip(" \t"))
    return Fix(title, (Edit(Span(span.source, start, span.end), ""),))


def syntax_fixes(error: PipeSyntaxError) -> tuple[Fix, ...]:
    """The edit a syntax error names, where it is certain (`>>>` for `>>`)."""
    if error.replacement is None:
        return ()
    return (Fix(f"Change to `{error.replacement}`", (Edit(error.span, error.replacement),)),)
