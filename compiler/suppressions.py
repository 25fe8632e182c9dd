"""Inline suppressions: `# pipec: ignore[PC302, PC401] reason` silences those findings on its
own line, or on the next line when the comment stands alone. Every suppression must give a
reason (PC002), and one that silences nothing is reported (PC001), unless an error dropped a
statement or a binding was found wrong (its finding may be what is missing). Only suppressible rules
(`Rule.suppressible` in codes.py) can be silenced: naming another is reported as PC001 and
leaves the finding in place."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..dsl.source import SourceFile, Span
from .codes import PC001, PC002, lookup
from .diagnostics import Diagnostic, DiagnosticSink
from .fixes import removal

_COMMENT = re.compile(r"#\s*pipec:\s*ignore\[([^\]]*)\]\s*(.*)$")


@dataclass
class Suppression:
    span: Span
    line: int  # the line it applies to
    codes: set[str]
    reason: str
    used: bool = field(default=False)


def find_suppressions(source: SourceFile, sink: DiagnosticSink) -> list[Suppression]:
    found = []
    for number in range(1, source.line_count + 1):
        text = source.line_text(number)
        match = _COMMENT.search(text)
        if not match or _inside_string(text, match.start()):
            continue
        span = Span(source, source.offset(number, match.start() + 1), source.offset(number, len(text) + 1))
        target = _next_code_line(source, number) if not text[: match.start()].strip() else number
        codes = set()
        for item in filter(None, (c.strip() for c in match.group(1).split(","))):
            rule = lookup(item)
            if rule is None:
                sink.add(PC001, f"`{item}` is not a rule code or name", span,
                         "docs/rules.md lists every code and name")
            elif not rule.suppressible:
                sink.add(PC001, f"{rule.code} ({rule.name}) cannot be suppressed: "
                         + ("exempt a kernel with `waive` instead" if rule.waivable
                            else "it leaves no meaningful plan"), span,
                         "fix the finding; docs/rules.md lists the suppressible rules")
            else:
                codes.add(rule.code)
        reason = match.group(2).strip()
        if not reason:
            sink.add(PC002, "this suppression gives no reason", span,
                     "say why the finding does not apply, after the brackets")
        found.append(Suppression(span, target, codes, reason))
    return found


def _inside_string(text: str, index: int) -> bool:
    return text[:index].count('"') % 2 == 1


def _next_code_line(source: SourceFile, line: int) -> int:
    for number in range(line + 1, source.line_count + 1):
        stripped = source.line_text(number).strip()
        if stripped and not stripped.startswith("#"):
            return number
    return line


def apply_suppressions(diagnostics: list[Diagnostic], suppressions: list[Suppression],
                       sink: DiagnosticSink, *, complete: bool) -> list[Diagnostic]:
    """The diagnostics no suppression silences; unused suppressions are added to `sink` when
    the findings are `complete`: after a statement was dropped for an error, or a binding found
    wrong, the finding a suppression was written for may not have been made (one mistake, one
    finding)."""
    kept = []
    for d in diagnostics:
        match = next((s for s in suppressions
                      if s.span.source is d.span.source and s.line == d.span.line and d.code in s.codes), None)
        if match is None:
            kept.append(d)
        else:
            match.used = True
    for s in suppressions:
        if complete and not s.used and s.codes:
            sink.add(PC001, f"this suppression of {', '.join(sorted(s.codes))} silences nothing",
                     s.span, "remove it; the finding it was written for is gone",
                     fixes=(removal("Remove the suppression", s.span),))
    return kept
