"""JSON: one object per diagnostic, 1-based lines and columns, end exclusive."""

from __future__ import annotations

import json

from ..diagnostics import Diagnostic


def _region(span) -> dict:
    end_line, end_column = span.end_line_col()
    return {"file": span.source.display_path(), "line": span.line, "column": span.column,
            "end_line": end_line, "end_column": end_column}


def to_dict(d: Diagnostic) -> dict:
    return {
        "code": d.code, "name": d.rule.name, "severity": d.severity.value, "message": d.message,
        **_region(d.span), "hint": d.hint, "label": d.label,
        "labels": [{"message": label.message, **_region(label.span)} for label in d.labels],
        "notes": list(d.notes),
    }


def render_json(diagnostics: list[Diagnostic], *, color: bool = False, checked: int | None = None) -> str:
    return json.dumps([to_dict(d) for d in diagnostics], indent=2) + "\n"
