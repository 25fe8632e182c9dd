"""JSON: one object per diagnostic (`Diagnostic.to_json`), 1-based lines and columns, end exclusive."""

from __future__ import annotations

import json

from ..diagnostics import Diagnostic


def render_json(diagnostics: list[Diagnostic], *, color: bool = False, checked: int | None = None) -> str:
    return json.dumps([d.to_json() for d in diagnostics], indent=2) + "\n"
