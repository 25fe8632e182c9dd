"""Evaluation of compile-time expressions.

Values are Python ints (exact, range-checked where they are used), floats, bools and strings,
and the operations on them are plan/arithmetic.py's, which the live-update record's evaluation
shares; this module walks the syntax tree and says where a value went wrong.
A name that denotes device data (a buffer, one of its elements, or `step`) is not a constant:
evaluation raises `RuntimeValue`, and the caller decides which rule that breaks (a host
branch in an `if`, a baked value in a kernel argument).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from dataclasses import fields, is_dataclass
from functools import cache
from typing import Any

from ..dsl import ast
from ..dsl.errors import MAX_INT_BITS
from ..dsl.source import Span
from ..errors import Error
from ..plan.arithmetic import FUNCTIONS, Value, ValueProblem, binary, boolean, describe, unary
from ..plan.arithmetic import literal as literal, representable as representable  # what the resolver imports here
from ..wording import counted
from .codes import PC105, PC112, Rule
from .diagnostics import Fix


class ConstError(Error):
    def __init__(self, message: str, span: Span, hint: str, rule: Rule = PC105, *, fixes: tuple[Fix, ...] = (),
                 cause: Hashable | None = None) -> None:
        super().__init__(message)
        self.message, self.span, self.hint, self.rule = message, span, hint, rule
        self.fixes, self.cause = fixes, cause  # as DiagnosticSink.add takes them

    @property
    def code(self) -> str:
        return self.rule.code


class RuntimeValue(Error):
    """The expression reads device data or the step index."""

    def __init__(self, description: str, span: Span, buffer_name: str | None = None) -> None:
        super().__init__(description)
        self.description, self.span, self.buffer_name = description, span, buffer_name


# lookup(name) returns the constant's value, or raises ConstError / RuntimeValue itself.
Lookup = Callable[[ast.Ident], Value]


def _at(span: Span, operation: Callable, *operands) -> Value:
    """`operation(*operands)`, a ValueProblem reported at `span`; the result kept within bounds."""
    try:
        return _bounded(operation(*operands), span)
    except ValueProblem as problem:
        raise ConstError(problem.message, span, problem.hint) from None

def evaluate(expr: ast.Expr, lookup: Lookup) -> Value:
    """The value of a constant expression; raises ConstError or RuntimeValue."""
    try:
        return _arithmetic(expr, lookup, _RECURSION_DEPTH)
    except _Unhandled:
        return _Evaluation(lookup).run(expr)


_LITERALS = (ast.IntLit, ast.FloatLit, ast.BoolLit, ast.StrLit)
# Nesting up to this depth is evaluated recursively; deeper expressions, and every other kind
# of expression, by the explicit stack, which is safe at any depth but several times slower.
_RECURSION_DEPTH = 32


class _Unhandled(Error):
    """An expression the recursive evaluation leaves to `_Evaluation`."""


def _arithmetic(expr: ast.Expr, lookup: Lookup, depth: int) -> Value:
    """The commonest expressions (literals, names, operators other than `and`/`or`, as in a
    slice `(lo + k) % 63`), evaluated recursively: the same operations in the same order as
    `_Evaluation`, so the same value or the same first error. Names are only looked up, so
    starting over with `_Evaluation` after `_Unhandled` changes nothing."""
    node: Any = expr  # dispatched on `kind`, which is faster than `match` here and opaque to mypy
    kind = type(node)
    if kind in _LITERALS:
        return node.value
    if kind is ast.Name:
        return lookup(node.ident)
    if kind is ast.Binary and depth and node.op not in ("and", "or"):
        a = _arithmetic(node.left, lookup, depth - 1)
        b = _arithmetic(node.right, lookup, depth - 1)
        op = node.op
        if type(a) is int and type(b) is int and op in _INTEGER_OPS and (op != "%" or (a >= 0 and b > 0)):
            return _bounded(_INTEGER_OPS[op](a, b), node.span)
        return _at(node.span, binary, op, a, b)
    raise _Unhandled


def is_arithmetic(expr: ast.Expr, depth: int = _RECURSION_DEPTH) -> bool:
    """Whether `_arithmetic` evaluates `expr` by itself: literals and names joined by operators
    other than `and`/`or`, nested no deeper than it recurses. Such an expression costs less to
    evaluate again than a key to look its value up."""
    node: Any = expr  # dispatched on `kind`, as in `_arithmetic`
    kind = type(node)
    if kind in _LITERALS or kind is ast.Name:
        return True
    return (kind is ast.Binary and depth > 0 and node.op not in ("and", "or")
            and is_arithmetic(node.left, depth - 1) and is_arithmetic(node.right, depth - 1))


def names_read(expr: ast.Expr) -> tuple[str, ...]:
    """The names an expression reads, each once (iteratively: chains may be long)."""
    names: dict[str, None] = {}
    pending = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name):
            names[node.ident.text] = None
        else:
            kind: type = type(node)
            for value in _field_values(kind)(node):
                pending.extend(v for v in (value if isinstance(value, tuple) else (value,))
                               if _is_expression(v))
    return tuple(names)


@cache
def _field_values(kind: type) -> Callable[[Any], tuple]:
    """A function giving the fields of a syntax-tree type in order, in one call."""
    names = tuple(f.name for f in fields(kind))
    return (lambda node: ()) if not names else operator.attrgetter(*names) if len(names) > 1 else \
        (lambda node: (getattr(node, names[0]),))


def _is_expression(value) -> bool:
    return is_dataclass(value) and not isinstance(value, (Span, ast.Ident))


Arithmetic = Callable[[dict[str, Value]], Value]


class NotPlain(Error):
    """A compiled arithmetic expression met what it leaves to `evaluate`: an operand that is no
    integer, `%` of a negative, a value past MAX_INT_BITS, or a name bound otherwise than it was
    compiled with."""


def compile_arithmetic(expr: ast.Expr, variables: frozenset[str],
                       constant: Callable[[str], Value | None]) -> Arithmetic | None:
    """`expr` (`is_arithmetic`) as a function of the loop variables and graph parameters, for an
    expression evaluated again at each iteration or use: a slice's bounds, `(u + 1) * BATCH`.
    Names in `variables` are read from the environment it is called with; any other is a
    constant, folded in (`constant` gives its value; None, when it is not one, compiles nothing).
    The function computes what `_arithmetic` does where both operands of every operator are
    integers, exactly, and raises NotPlain wherever `_arithmetic` would do anything else (its
    caller then evaluates as usual, which reports errors)."""
    node: Any = expr  # dispatched on `kind`, as in `_arithmetic`
    kind = type(node)
    if kind in _LITERALS:
        value = node.value
        return lambda env: value
    if kind is ast.Name:
        name = node.ident.text
        if name in variables:
            def variable(env: dict[str, Value]) -> Value:
                if name not in env:
                    raise NotPlain
                return env[name]
            return variable
        folded = constant(name)
        if folded is None:
            return None

        def constant_value(env: dict[str, Value]) -> Value:
            if name in env:  # a loop variable that hides the constant
                raise NotPlain
            return folded
        return constant_value
    if kind is not ast.Binary or node.op not in _INTEGER_OPS:
        return None
    left, right = compile_arithmetic(node.left, variables, constant), compile_arithmetic(node.right, variables, constant)
    if left is None or right is None:
        return None
    operation, remainder = _INTEGER_OPS[node.op], node.op == "%"

    def binary(env: dict[str, Value]) -> Value:
        a, b = left(env), right(env)
        if type(a) is int and type(b) is int and (not remainder or (a >= 0 and b > 0)):
            value = operation(a, b)
            if value.bit_length() <= MAX_INT_BITS:
                return value
        raise NotPlain
    return binary


# What `_arith` computes for two integers, directly; `%` only where C's remainder and Python's
# agree (a >= 0, b > 0).
_INTEGER_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "%": operator.mod}


class _Evaluation:
    """Evaluation with an explicit stack of pending work instead of Python recursion, so that
    a long operator chain (`1 + 1 + ... + 1`) or deep nesting cannot exhaust Python's stack.
    Operands are evaluated left to right, `and`/`or` short-circuit, and a call's name and
    arity are checked before its arguments, as a recursive evaluator would. Pending work is an
    expression to evaluate, or a tuple `(method, *arguments)` that combines computed values."""

    def __init__(self, lookup: Lookup) -> None:
        self.lookup = lookup
        self.values: list[Value] = []
        self.pending: list = []

    def run(self, expr: ast.Expr) -> Value:
        pending = self.pending
        pending.append(expr)
        while pending:
            item = pending.pop()
            if isinstance(item, tuple):
                item[0](*item[1:])
            else:
                self._visit(item)
        return self.values.pop()

    def _visit(self, expr: ast.Expr) -> None:
        pending = self.pending
        match expr:
            case ast.IntLit(value=v) | ast.FloatLit(value=v) | ast.BoolLit(value=v) | ast.StrLit(value=v):
                self.values.append(v)
            case ast.Name(ident=ident):
                self.values.append(self.lookup(ident))
            case ast.StepRef(span=span):
                raise RuntimeValue("the step index `step`", span)
            case ast.Index(base=ast.Name(ident=ident), span=span):
                try:
                    base = self.lookup(ident)
                except RuntimeValue as rv:
                    raise RuntimeValue(
                        f"the element `{span.text}` of buffer `{ident.text}`", span, rv.buffer_name
                    ) from None
                raise ConstError(f"{describe(base)} cannot be indexed", span, "index buffers only")
            case ast.Unary(op=op, operand=operand, span=span):
                pending += [(self._unary, op, span), operand]
            case ast.Binary(op="and" | "or" as op, left=left, right=right):
                pending += [(self._short_circuit, op, left, right), left]
            case ast.Binary(op=op, left=left, right=right, span=span):
                pending += [(self._binary, op, span), right, left]
            case ast.Call(func=ast.Name(ident=func), args=args, keywords=keywords, span=span):
                pending.append((self._call, _function(func, args, keywords, span), len(args), span))
                pending.extend(reversed(args))
            case ast.NullLit(span=span):
                raise ConstError("`null` is not a constant", span, "`null` is only a pointer argument")
            case _:
                raise ConstError(f"`{expr.span.text}` is not a constant expression", expr.span,
                                 "constants are numbers, booleans and arithmetic on them")

    def _unary(self, op: str, span: Span) -> None:
        self.values.append(_at(span, unary, op, self.values.pop()))

    def _binary(self, op: str, span: Span) -> None:
        b = self.values.pop()
        self.values.append(_at(span, binary, op, self.values.pop(), b))

    def _call(self, implementation: Callable, count: int, span: Span) -> None:
        args = self.values[len(self.values) - count :]
        del self.values[len(self.values) - count :]
        self.values.append(_at(span, implementation, *args))

    def _short_circuit(self, op: str, left: ast.Expr, right: ast.Expr) -> None:
        a = _at(left.span, boolean, self.values.pop())
        if (op == "and" and not a) or (op == "or" and a):
            self.values.append(a)
        else:
            self.pending += [(self._boolean, right.span), right]

    def _boolean(self, span: Span) -> None:
        self.values.append(_at(span, boolean, self.values.pop()))


def _bounded(value: Value, span: Span) -> Value:
    """Integers stay within 2**MAX_INT_BITS, as literals do: each operation then costs little
    (even `pow` of the largest), and every integer converts to a float."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ConstError(f"the value lies beyond 2**{MAX_INT_BITS}", span,
                         f"integers are limited to {MAX_INT_BITS} bits", rule=PC112)
    return value


def _function(func: ast.Ident, args, keywords, span: Span) -> Callable:
    """The implementation of a call, once its name and arity are known to be right."""
    if func.text not in FUNCTIONS:
        raise ConstError(f"unknown function `{func.text}`", func.span,
                         "functions: " + ", ".join(sorted(FUNCTIONS)))
    if keywords:
        raise ConstError(f"`{func.text}` takes no keyword arguments", keywords[0].span,
                         "pass the arguments by position")
    arity, implementation = FUNCTIONS[func.text]
    if arity is not None and len(args) != arity:
        raise ConstError(f"`{func.text}` takes {counted(arity, 'argument')}, "
                         f"found {len(args)}", span, f"write `{func.text}(...)` with {arity}")
    return implementation


