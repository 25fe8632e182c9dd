"""Diagnostics as data: a code from the rule table, a message, a span, a hint, extra labels,
and the edits that fix it when one is obvious.

Stages and checks never print and rarely raise: they add to a `DiagnosticSink`, and the driver
decides at each stage boundary whether to go on. Renderers (`pipec.compiler.render`) turn the
collected diagnostics into text, JSON, SARIF or GitHub annotations.

One mistake, one finding: the sink keeps one finding per cause. The same finding reached again
(a graph body resolved for another use) adds the use to it; a finding given a `cause` that an
earlier one has (an undefined name used again) adds its place to that one as a label.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from ..dsl.source import Span
from ..wording import counted
from .codes import BY_CODE, Rule, Severity

# labels a finding lists at most for the other places of its cause, and values per use
MORE_PLACES = 5
MORE_VALUES = 3


@dataclass(frozen=True)
class Label:
    """A secondary location that explains the primary one ("first write here")."""

    span: Span
    message: str


@dataclass(frozen=True)
class Edit:
    """Replace the text of `span` with `text` (an insertion: an empty span)."""

    span: Span
    text: str


@dataclass(frozen=True)
class Fix:
    """The one obvious edit a finding has (an editor's quick fix; `--format json` carries it)."""

    title: str
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Use:
    """A use that instantiated the text a finding lies in: a graph used with some values, or a
    file imported with bindings. The finding names it, as rustc notes "in this macro
    invocation": the same body can be right for one use and wrong for another."""

    span: Span
    what: str  # "graph `layer` used here", "`lib.pipe` imported here"
    values: str = ""  # "k = 3": the values this use gives (empty: none)


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    hint: str
    label: str = ""
    labels: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()

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
            "fixes": [{"title": fix.title, "edits": [{**_region(e.span), "text": e.text} for e in fix.edits]}
                      for fix in self.fixes],
        }


def _region(span: Span) -> dict:
    end_line, end_column = span.end_line_col()
    return {"file": span.source.display_path(), "line": span.line, "column": span.column,
            "end_line": end_line, "end_column": end_column}


def _place(span: Span) -> tuple[int, int, int]:
    return id(span.source), span.start, span.end


@dataclass
class _Entry:
    """What the sink knows of one finding besides the finding: its own labels and notes, the
    other places of its cause, and the uses it arose for by site, each with the values it was
    used with (a use inside a loop is one site with many), from which its labels are made."""

    index: int
    labels: tuple[Label, ...]
    notes: tuple[str, ...]
    fixes: tuple[Fix, ...]
    places: dict[tuple[int, int, int], Span] = field(default_factory=dict)
    sites: dict[tuple, tuple[Use, list[str]]] = field(default_factory=dict)
    values_seen: set[tuple] = field(default_factory=set)

    def place(self, span: Span, fixes: tuple[Fix, ...]) -> bool:
        """Record another place of the cause, whose fixes join the first place's of the same
        title (one fix edits every place); whether it is new."""
        if _place(span) in self.places:
            return False
        self.places[_place(span)] = span
        more = {fix.title: fix.edits for fix in fixes}
        self.fixes = tuple(replace(fix, edits=fix.edits + more.get(fix.title, ())) for fix in self.fixes)
        return True

    def use(self, uses: tuple[Use, ...]) -> bool:
        """Record the uses a report arose for; whether any is new."""
        changed = False
        for use in uses:
            site = (*_place(use.span), use.what)
            if site not in self.sites:
                self.sites[site] = (use, [])
                changed = True
            if use.values and (site, use.values) not in self.values_seen:
                self.values_seen.add((site, use.values))
                self.sites[site][1].append(use.values)
                changed = True
        return changed

    def finish(self, d: Diagnostic) -> Diagnostic:
        places = list(self.places.values())
        also = tuple(Label(span, "also here") for span in places[:MORE_PLACES])
        more = len(places) - MORE_PLACES
        notes = self.notes + ((f"and {counted(more, 'more place')}",) if more > 0 else ())
        used = tuple(_use_label(use, values) for use, values in self.sites.values())
        return replace(d, labels=self.labels + also + used, notes=notes, fixes=self.fixes)


def _use_label(use: Use, values: list[str]) -> Label:
    """`in graph `layer` used here with k = 0; k = 1; k = 2 and 5 more`."""
    if not values:
        return Label(use.span, f"in {use.what}")
    more = len(values) - MORE_VALUES
    shown = "; ".join(values[:MORE_VALUES]) + (f" and {more} more" if more > 0 else "")
    return Label(use.span, f"in {use.what} with {shown}")


@dataclass
class DiagnosticSink:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    _entries: dict[tuple, _Entry] = field(default_factory=dict)
    _causes: dict[Hashable, _Entry] = field(default_factory=dict)
    _uses: tuple[Use, ...] = ()  # the uses whose text is being resolved, outermost first

    @contextmanager
    def within(self, uses: tuple[Use, ...]) -> Iterator[None]:
        """Findings added inside the block arose for these uses (and those around them)."""
        outer, self._uses = self._uses, self._uses + uses
        try:
            yield
        finally:
            self._uses = outer

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
        fixes: tuple[Fix, ...] = (),
        uses: tuple[Use, ...] = (),
        cause: Hashable | None = None,
    ) -> None:
        """Report a finding; `uses`: the uses it arose for besides those of `within`; `cause`:
        what makes it, when other findings can have the same cause at other places (an
        undefined name, at each of its uses): the first is reported, the others add their
        places to it."""
        uses = self._uses + uses
        if cause is not None and cause in self._causes:
            entry = self._causes[cause]
            first = self.diagnostics[entry.index].span
            # at the first place: the same finding reached again, through other uses; at
            # another place: a label there (the uses name the first place's instance)
            if entry.use(uses) if _place(span) == _place(first) else entry.place(span, fixes):
                self.diagnostics[entry.index] = entry.finish(self.diagnostics[entry.index])
            return
        key = (rule.code, message, *_place(span))
        if key in self._entries:  # one report per cause, however many paths lead to it
            entry = self._entries[key]
            if entry.use(uses):
                self.diagnostics[entry.index] = entry.finish(self.diagnostics[entry.index])
            return
        entry = _Entry(len(self.diagnostics), labels, notes, fixes)
        entry.use(uses)
        self._entries[key] = entry
        if cause is not None:
            self._causes[cause] = entry
        self.diagnostics.append(entry.finish(Diagnostic(rule.code, message, span, hint, label)))

    def sorted(self) -> list[Diagnostic]:
        return sorted(self.diagnostics, key=Diagnostic.sort_key)
