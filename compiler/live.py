"""Which constants a runtime may change without the compiler, tracked where constants are
evaluated (docs/plan.md, "Live updates").

Every constant of the main file is *updatable*: `-D` may set it. Each one, and each constant an
import binds from one, is a value of the record (`LiveEntry`, held by its `ConstSymbol.live`),
defined by an expression over the values before it. Context.lookup sees every read of such a
symbol. An evaluation is *structural* by default: each updatable value it reads, directly or
through a derived one, is marked with that use (a buffer's size, a compile-time `if`, a loop
bound, ...) and can then only change with a new graph. Three kinds of evaluation say otherwise
and take the expression's record form (`LiveTerm`) instead: a constant's definition and an import
binding, whose values flow on (`Context.flow`), and a step kernel node's scalar argument or
launch shape, a *site* (`Context.live_value`). compiler/live_record.py turns what is tracked here into
the plan's record once the nodes have their places in the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..dsl import Span, ast
from ..errors import Error
from ..plan.arithmetic import BINARY, FUNCTIONS, Value
from ..plan.live import MAX_DEPTH, LiveProblem, encode, evaluate
from ..plan.schema import Expression

_OPERATORS = (*BINARY, "and", "or")


@dataclass(frozen=True)
class LiveTerm:
    """An expression in the record's language (plan/live.py) and the updatable values (by index)
    it depends on."""

    tree: Expression
    roots: frozenset[int]


@dataclass
class LiveEntry:
    index: int
    name: str
    span: Span
    updatable: bool
    tree: Expression | None  # None: no number the record can hold (a string)
    value: Value
    roots: frozenset[int]  # the updatable values it depends on, itself included when updatable


@dataclass
class LaunchLive:
    """The record forms of a launch's scalar arguments and launch shape (None where no updatable
    value reaches)."""

    args: tuple[LiveTerm | None, ...]
    grid: tuple[LiveTerm | None, ...]
    block: tuple[LiveTerm | None, ...]
    shared: LiveTerm | None


# A name's record form where an expression reads it: a value (a loop variable, a graph
# parameter, a constant no update changes), a record entry, or None (no value: not held).
Resolved = tuple[str, object] | None
Resolve = Callable[[ast.Ident], Resolved]


class _NotHeld(Error):
    """The expression has a part the record's language does not hold."""


def location(span: Span) -> str:
    return f"{span.source.display_path()}:{span.line}:{span.column}"


@dataclass
class LiveTracker:
    entries: list[LiveEntry] = field(default_factory=list)
    # updatable entry -> why it cannot change in place, its first structural use ("reaches a buffer's dimension at ...")
    structural: dict[int, str] = field(default_factory=dict)

    def add(self, name: str, span: Span, updatable: bool, term: LiveTerm | None, value: Value) -> int:
        """A new value of the record: its definition's term (None: not held)."""
        index = len(self.entries)
        roots = (term.roots if term is not None else frozenset()) | ({index} if updatable else frozenset())
        tree = term.tree if term is not None and not isinstance(value, str) else None
        self.entries.append(LiveEntry(index, name, span, updatable, tree, value, roots))
        if tree is None:
            what = f"is the string `{value}`, which" if isinstance(value, str) else "has a definition the record cannot hold," \
                " which"
            self._mark(roots, f"{what} no live update can set, at {location(span)}")
        return index

    def read(self, entry: int, use: str, span: Span) -> None:
        """A structural use, at `span`, of value `entry`: its updatable values cannot change in place."""
        through = self.entries[entry]
        for root in through.roots:
            if root not in self.structural:
                via = f" (through `{through.name}`)" if root != entry else ""
                self.structural[root] = f"reaches {use} at {location(span)}{via}"

    def fixed(self, roots: frozenset[int]) -> bool:
        """Whether each of the updatable values `roots` has its structural use already."""
        return self.structural.keys() >= roots

    def mark(self, roots: frozenset[int], use: str, span: Span) -> None:
        """A structural use, `use` at `span`, of the updatable values `roots` (the first use of
        each is kept: the words are made only when one has none yet, not at each of an
        unrolled launch's uses)."""
        if not self.fixed(roots):
            self._mark(roots, f"reaches {use} at {location(span)}")

    def _mark(self, roots: Iterable[int], why: str) -> None:
        for root in roots:
            self.structural.setdefault(root, why)

    def term(self, expr: ast.Expr, resolve: Resolve) -> LiveTerm | None:
        """`expr` in the record's language, its names resolved by `resolve`; None when it has a
        part the language does not hold (a string, a buffer, `step`, nesting beyond MAX_DEPTH)."""
        try:
            return self._term(expr, resolve, MAX_DEPTH)
        except _NotHeld:
            return None

    def _term(self, expr: ast.Expr, resolve: Resolve, depth: int) -> LiveTerm:
        if depth == 0:
            raise _NotHeld
        match expr:
            case ast.IntLit(value=v) | ast.FloatLit(value=v) | ast.BoolLit(value=v):
                return LiveTerm(encode(v), frozenset())
            case ast.Name(ident=ident):
                return self._name(resolve(ident))
            case ast.Unary(op=op, operand=operand):
                return _fold((op,), (self._term(operand, resolve, depth - 1),))
            case ast.Binary(op=op, left=left, right=right) if op in _OPERATORS:
                return _fold((op,), (self._term(left, resolve, depth - 1), self._term(right, resolve, depth - 1)))
            case ast.Call(func=ast.Name(ident=func), args=args, keywords=()) if func.text in FUNCTIONS and \
                    FUNCTIONS[func.text][0] in (None, len(args)):
                return _fold((func.text,), tuple(self._term(a, resolve, depth - 1) for a in args))
        raise _NotHeld

    def _name(self, resolved: Resolved) -> LiveTerm:
        if resolved is not None and resolved[0] == "entry":
            entry = self.entries[resolved[1]]  # type: ignore[call-overload]
            if entry.tree is None:
                raise _NotHeld
            return LiveTerm(Expression(("ref", entry.index)), entry.roots)
        if resolved is None or isinstance(resolved[1], str):
            raise _NotHeld
        return LiveTerm(encode(resolved[1]), frozenset())  # type: ignore[arg-type]


def encode_value(value: Value) -> Expression | None:
    """A compiled value as the record holds it; None for a string."""
    return None if isinstance(value, str) else encode(value)


def _fold(head: tuple[str], operands: tuple[LiveTerm, ...]) -> LiveTerm:
    """An operation on terms; computed now when it reads no updatable value and its value is one
    the record holds (an error is left for the evaluation that reaches it)."""
    roots = frozenset().union(*(o.roots for o in operands))
    tree = Expression(head + tuple(o.tree for o in operands))
    if not roots:
        try:
            return LiveTerm(encode(evaluate(tree, [])), roots)  # type: ignore[arg-type]
        except LiveProblem:
            pass
    return LiveTerm(tree, roots)
