"""GitHub Actions workflow commands: one `::error`/`::warning` annotation per diagnostic.

User text goes through `visible` first (an annotation is read by people, and the log viewer
interprets escape sequences), then through GitHub's own escapes: `%`, CR and LF in the message,
and `:` and `,` too in a property (actions/toolkit, `escapeData` and `escapeProperty`)."""

from __future__ import annotations

from ..diagnostics import Diagnostic
from .safe import visible


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(diagnostics: list[Diagnostic], *, color: bool = False, checked: int | None = None) -> str:
    lines = []
    for d in diagnostics:
        end_line, end_column = d.span.end_line_col()
        props = ",".join([
            f"file={_property(visible(d.span.source.display_path()))}", f"line={d.span.line}",
            f"col={d.span.column}", f"endLine={end_line}", f"endColumn={end_column}",
            f"title={_property(f'pipec {d.code} ({d.rule.name})')}",
        ])
        body = _data(visible(d.message) + "\nhelp: " + visible(d.hint))
        lines.append(f"::{d.severity.value} {props}::{body}")
    return "\n".join(lines) + ("\n" if lines else "")
