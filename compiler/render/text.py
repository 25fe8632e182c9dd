"""Compiler-style text: `file:line:col: error[CODE]: message`, the source line with a caret
under the span, labels elsewhere, and the hint; `concise`: one line each. Both end with a
summary line when told how many files were checked."""

from __future__ import annotations

from ...dsl.source import Span
from ...wording import counted
from ..codes import Severity
from ..diagnostics import Diagnostic
from .safe import excerpt, visible

_COLORS = {"error": "\033[1;31m", "warning": "\033[1;33m", "gutter": "\033[1;34m",
           "help": "\033[1;36m", "bold": "\033[1m", "reset": "\033[0m"}


class Paint:
    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, style: str, text: str) -> str:
        return f"{_COLORS[style]}{text}{_COLORS['reset']}" if self.color else text


def _snippet(span: Span, mark: str, label: str, gutter_width: int, paint: Paint, style: str) -> list[str]:
    line = span.line
    raw = span.source.line_text(line)
    end_line, end_col = span.end_line_col()
    shown = excerpt(raw, span.column - 1, end_col - 1 if end_line == line else len(raw))
    pad = " " * gutter_width
    underline = " " * shown.start + paint(style, mark * shown.width + (f" {visible(label)}" if label else ""))
    return [
        f"{pad} {paint('gutter', '|')}",
        f"{paint('gutter', str(line).rjust(gutter_width))} {paint('gutter', '|')} {shown.text}",
        f"{pad} {paint('gutter', '|')} {underline}",
    ]


def render_one(d: Diagnostic, paint: Paint) -> str:
    severity = d.severity.value
    head = (f"{paint('bold', visible(d.span.location()) + ':')} {paint(severity, f'{severity}[{d.code}]:')} "
            f"{paint('bold', visible(d.message))}")
    spans = [d.span] + [label.span for label in d.labels]
    gutter = max(len(str(s.line)) for s in spans)
    lines = [head]
    lines += _snippet(d.span, "^", d.label, gutter, paint, severity)
    for label in d.labels:
        lines.append(f"{' ' * gutter}{paint('gutter', ':::')} {visible(label.span.location())}")
        lines += _snippet(label.span, "-", label.message, gutter, paint, "gutter")
    lines.append(f"{' ' * gutter} {paint('gutter', '|')}")
    lines.append(f"{' ' * gutter} {paint('gutter', '=')} {paint('help', 'help:')} {visible(d.hint)}")
    for note in d.notes:
        lines.append(f"{' ' * gutter} {paint('gutter', '=')} note: {visible(note)}")
    return "\n".join(lines)


def summary(diagnostics: list[Diagnostic], checked: int | None = None) -> str:
    """`found 2 errors`; with the number of files checked, `checked 3 files, 2 findings (2 errors)`
    or `checked 3 files, 0 findings`, so a clean run says what it looked at."""
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors
    parts = [counted(n, word) for n, word in ((errors, "error"), (warnings, "warning")) if n]
    if checked is None:
        return "found " + " and ".join(parts) if parts else ""
    found = f" ({' and '.join(parts)})" if parts else ""
    return f"checked {counted(checked, 'file')}, {counted(len(diagnostics), 'finding')}{found}"


def render_text(diagnostics: list[Diagnostic], *, color: bool = False, checked: int | None = None) -> str:
    footer = [summary(diagnostics, checked)] if diagnostics or checked is not None else []
    if not diagnostics:
        return "".join(line + "\n" for line in footer)
    paint = Paint(color)
    blocks = [render_one(d, paint) for d in diagnostics]
    first_code = min(d.code for d in diagnostics)
    footer.append(f"for more information about a code, try `pipec --explain {first_code}`")
    return "\n\n".join(blocks) + "\n\n" + "\n".join(footer) + "\n"


def render_concise(diagnostics: list[Diagnostic], *, color: bool = False, checked: int | None = None) -> str:
    paint = Paint(color)
    lines = [
        f"{visible(d.span.location())}: {paint(d.severity.value, f'{d.severity.value}[{d.code}]')}: "
        f"{visible(d.message)}"
        for d in diagnostics
    ]
    if checked is not None:
        lines.append(summary(diagnostics, checked))
    return "\n".join(lines) + ("\n" if lines else "")
