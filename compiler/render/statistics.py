"""`--statistics`: how many findings of each code, most frequent first, as `ruff check
--statistics` prints them (a tab-separated table, or JSON objects with `--output-format json`)."""

from __future__ import annotations

import json
from collections import Counter

from ..diagnostics import Diagnostic
from .text import summary


def _counts(diagnostics: list[Diagnostic]) -> list[tuple[str, str, int]]:
    counts = Counter(d.code for d in diagnostics)
    names = {d.code: d.rule.name for d in diagnostics}
    by_frequency = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return [(code, names[code], n) for code, n in by_frequency]


def statistics_text(diagnostics: list[Diagnostic], checked: int) -> str:
    rows = _counts(diagnostics)
    width = max((len(str(n)) for _, _, n in rows), default=1)
    lines = [f"{n:>{width}}\t{code}\t{name}" for code, name, n in rows]
    return "\n".join([*lines, summary(diagnostics, checked)]) + "\n"


def statistics_json(diagnostics: list[Diagnostic]) -> str:
    rows = [{"code": code, "name": name, "count": n} for code, name, n in _counts(diagnostics)]
    return json.dumps(rows, indent=2) + "\n"
