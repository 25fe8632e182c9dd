"""The live-update record's expressions: how a runtime computes, without the compiler, what a
kernel node's scalar argument or launch shape becomes when constants change (docs/plan.md,
"Live updates").

An expression is JSON:

- a literal: a JSON integer (an int), a JSON number with a fraction or exponent (a float),
  `true` or `false`; `["int", "DIGITS"]` for an integer beyond 64 bits, `["float", "inf"]`
  (`"-inf"`, `"nan"`) for a float JSON cannot write;
- `["ref", I]`: the value of the record's value I (`LiveSpec.values[I]`);
- `[OP, A, B]` for a binary operator (`+ - * / % << >> & | ^ == != < <= > >=`), `["and", A, B]`
  and `["or", A, B]` (B evaluated only when A does not decide), `[OP, A]` for `- + ~ not`;
- `[F, A, ...]` for a function: `min`, `max`, `abs`, `log2`, `ceil_div`, `sqrt`, `pow`.

Operations are the compiler's own (plan/arithmetic.py), so an expression computes what the
compiler would, with one limit: integers stay within 127 bits (the C runtime computes in 128),
and a value beyond is refused where the compiler, which allows 1000 bits, might have gone on.
"""

from __future__ import annotations

import math
import re

from ..errors import Error
from .arithmetic import BINARY, FUNCTIONS, Value, ValueProblem, argument_problem, argument_value, binary, boolean, unary
from .dtypes import DTYPES
from .schema import Expression

MAX_BITS = 127  # an integer's magnitude stays below 2**127
MAX_DEPTH = 64  # nesting of an expression, so that readers can recurse (plan.json nests within 200)
_UNARY = ("-", "+", "~", "not")
_JSON_INT = range(-(1 << 63), 1 << 64)  # what a JSON reader holds exactly (int64 or uint64)


class LiveProblem(Error):
    """An expression cannot be evaluated, or its value cannot go where the site puts it."""


def encode(value: int | float | bool) -> Expression:
    """A value as an expression literal."""
    if isinstance(value, float) and not math.isfinite(value):
        return Expression(("float", repr(value)))
    if isinstance(value, int) and not isinstance(value, bool) and value not in _JSON_INT:
        return Expression(("int", str(value)))
    return Expression(value)


def decode(literal: object) -> int | float | bool | None:
    """The value of an expression literal, or None when `literal` is none."""
    if isinstance(literal, (bool, int, float)):
        return literal
    if isinstance(literal, (list, tuple)) and len(literal) == 2 and literal[0] == "int" and \
            isinstance(literal[1], str):
        return int(literal[1])
    if isinstance(literal, (list, tuple)) and len(literal) == 2 and literal[0] == "float" and \
            literal[1] in ("inf", "-inf", "nan"):
        return float(literal[1])
    return None


def evaluate(expr: object, values: list[Value], depth: int = MAX_DEPTH) -> Value:
    """The value of `expr` with `values` for its references; raises LiveProblem."""
    literal = decode(expr)
    if literal is not None:
        return _bounded(literal)
    if not (isinstance(expr, (list, tuple)) and expr and isinstance(expr[0], str)) or depth == 0:
        raise LiveProblem(f"not an expression of the record: {str(expr)[:80]}")
    op, operands = expr[0], expr[1:]
    if op == "ref" and len(operands) == 1 and isinstance(operands[0], int) and 0 <= operands[0] < len(values):
        return values[operands[0]]
    try:
        if op in ("and", "or") and len(operands) == 2:
            decided = boolean(evaluate(operands[0], values, depth - 1))
            if decided == (op == "or"):
                return decided
            return boolean(evaluate(operands[1], values, depth - 1))
        if op in _UNARY and len(operands) == 1:
            return _bounded(unary(op, evaluate(operands[0], values, depth - 1)))
        if op in BINARY and len(operands) == 2:
            a = evaluate(operands[0], values, depth - 1)
            return _bounded(binary(op, a, evaluate(operands[1], values, depth - 1)))
        arity, implementation = FUNCTIONS.get(op, (-1, None))
        if implementation is not None and arity in (None, len(operands)):
            return _bounded(implementation(*(evaluate(o, values, depth - 1) for o in operands)))
    except ValueProblem as problem:
        raise LiveProblem(problem.message) from None
    raise LiveProblem(f"not an expression of the record: {str(expr)[:80]}")


def _bounded(value: Value) -> Value:
    if isinstance(value, int) and value.bit_length() > MAX_BITS:
        raise LiveProblem(f"an intermediate integer lies beyond 2**{MAX_BITS}, past what live updates compute "
                          "(a rebuild computes it)")
    return value


def argument(value: Value, ctype: str) -> int | float:
    """A scalar argument of type `ctype` holding `value`, checked as the compiler checks it (PC204)."""
    dtype = DTYPES[ctype]
    problem = argument_problem(value, dtype)
    if problem is not None:
        raise LiveProblem(f"{problem}, and the argument is `{ctype}`")
    assert not isinstance(value, str)  # argument_problem refuses strings
    return argument_value(value, dtype)


def dimension(value: Value, what: str, low: int, high: int, multiple: int) -> int:
    """A launch dimension or byte count holding `value`, within what the compiler accepts for it
    (PC311, PC312, PC313)."""
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "a boolean" if isinstance(value, bool) else "a float" if isinstance(value, float) else "a string"
        raise LiveProblem(f"{what} must be an integer, not {kind}")
    if not low <= value <= high:
        raise LiveProblem(f"{what} = {value} lies outside {low} to {high}")
    if value % multiple:
        raise LiveProblem(f"{what} = {value} is not a multiple of the kernel's {multiple}-block clusters")
    return value


_NUMBER = re.compile(r"-?(?:0[xX][0-9a-fA-F_]+|[0-9][0-9_]*(?:\.[0-9][0-9_]*)?(?:[eE][+-]?[0-9]+)?)")


def parse_value(text: str) -> int | float | bool | None:
    """A constant's new value as `-D` writes a number: an integer or float literal of the
    language, negated or not, or `true`/`false`; None for anything else (an expression, which
    needs the compiler)."""
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if not _NUMBER.fullmatch(text):
        return None
    negative, digits = text.startswith("-"), text.removeprefix("-").replace("_", "")
    try:
        if digits[:2] in ("0x", "0X"):
            value: int | float = int(digits[2:], 16)
        elif any(c in digits for c in ".eE"):
            value = float(digits)
        else:
            value = int(digits)
    except ValueError:  # `0x_`: the grammar's shape, no digits
        return None
    return -value if negative else value
