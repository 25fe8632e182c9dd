"""Diagnostics as data: a code from the rule table, a message, a span, a hint, extra labels.

Stages and checks never print and rarely raise: they add to a `DiagnosticSink`, and the driver
decides at each stage boundary whether to go on. Renderers (`pipec.compiler.render`) turn the
collected diagnostics into text, JSON, SARIF or GitHub annotations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..dsl.source import Span
from .codes import BY_CODE, Rule, Severity


def counted(count: int, noun: str) -> str:
    """`1 element`, `2 elements`: a count with its noun, for messages."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


@dataclass(frozen=True)
class Label:
    """A secondary location that explains the primary one ("first write here")."""

    span: Span
    message: str


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    hint: str
    label: str = ""
    labels: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def rule(self) -> Rule:
        return BY_CODE[self.code]

    @property
    def severity(self) -> Severity:
        return self.rule.severity

    def sort_key(self) -> tuple:
        return (str(self.span.source.path), self.span.start, self.code, self.message)

    def to_json(self) -> dict:
        """The object `pipec --format json` prints for this diagnostic (and `pipec.check`'s
        callers can serialise as it does)."""
        return {
            "code": self.code, "name": self.rule.name, "severity": self.severity.value, "message": self.message,
            **_region(self.span), "hint": self.hint, "label": self.label,
            "labels": [{"message": label.message, **_region(label.span)} for label in self.labels],
            "notes": list(self.notes),
        }


def _region(span: Span) -> dict:
    end_line, end_column = span.end_line_col()
    return {"file": span.source.display_path(), "line": span.line, "column": span.column,
            "end_line": end_line, "end_column": end_column}


@dataclass
class DiagnosticSink:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    _seen: set[tuple] = field(default_factory=set)

    def add(
        self,
        rule: Rule,
        message: str,
        span: Span,
        hint: str,
        *,
        label: str = "",
        labels: tuple[Label, ...] = (),
        notes: tuple[str, ...] = (),
    ) -> None:
        key = (rule.code, message, id(span.source), span.start, span.end)
        if key in self._seen:  # one report per cause, however many paths lead to it
            return
        self._seen.add(key)
        self.diagnostics.append(Diagnostic(rule.code, message, span, hint, label, labels, notes))

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.diagnostics, key=Diagnostic.sort_key)
