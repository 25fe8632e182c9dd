"""The operations of compile-time values, one implementation for the compiler and the runtimes.

Values are Python ints, floats, bools and strings. The compiler evaluates `.pipe` expressions
with these operations (compiler/consteval.py, which adds where each operand came from); the
live-update record's expressions (plan/live.py) are evaluated with the same ones, so that a
runtime that changes a constant computes exactly what the compiler would have. Integer division
and remainder truncate toward zero, as in C; shifts, `&`, `|`, `^` and comparisons are
Python's (exact on negative and mixed operands). A value that an operation cannot take raises
`ValueProblem`, whose message and hint the caller places.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable

from ..errors import Error
from .dtypes import DType

Value = int | float | bool | str


class ValueProblem(Error):
    """An operation cannot take its operands: `message` says why, `hint` what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def number(value: Value) -> int | float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueProblem(f"expected a number, found {describe(value)}", "use an integer or float expression")
    return value


def integer(value: Value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueProblem(f"expected an integer, found {describe(value)}",
                           "use an integer expression (for example `ceil_div(a, b)`)")
    return value


def boolean(value: Value) -> bool:
    if not isinstance(value, bool):
        raise ValueProblem(f"expected a boolean, found {describe(value)}", "compare explicitly, for example `N > 0`")
    return value


def describe(value: Value) -> str:
    if isinstance(value, bool):
        return f"the boolean `{str(value).lower()}`"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, float):
        return f"the float `{value!r}`"
    return f"the integer `{value}`"


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _arith(op: str, a: Value, b: Value) -> Value:
    a, b = number(a), number(b)
    if op in ("/", "%") and b == 0:
        raise ValueProblem("division by zero", "check the divisor's value")
    if isinstance(a, int) and isinstance(b, int):
        if op == "/":
            return c_div(a, b)
        if op == "%":
            return a - c_div(a, b) * b
    if op == "%":
        if isinstance(a, float) and math.isinf(a) and not math.isnan(b):  # math.fmod's domain error
            raise ValueProblem("the remainder of an infinite number", "check the dividend's value")
        return math.fmod(a, b)
    return {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}[op](a, b)


def _bitwise(op: str, a: Value, b: Value) -> int:
    a, b = integer(a), integer(b)
    if op in ("<<", ">>"):
        if not 0 <= b < 256:
            raise ValueProblem(f"shift by {b} bits", "shift counts lie in 0..255")
        return a << b if op == "<<" else a >> b
    return {"&": operator.and_, "|": operator.or_, "^": operator.xor}[op](a, b)


COMPARE = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
BINARY = ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", *COMPARE)


def binary(op: str, a: Value, b: Value) -> Value:
    """`a op b` for every binary operator but `and` and `or` (which short-circuit) and `@`."""
    if op in COMPARE:
        if isinstance(a, bool) != isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
            raise ValueProblem(f"cannot compare {describe(a)} with {describe(b)}",
                               "compare numbers with numbers, booleans with booleans")
        return COMPARE[op](a, b)
    if op in ("+", "-", "*", "/", "%"):
        return _arith(op, a, b)
    if op == "@":
        raise ValueProblem("`@` multiplies matrices, not numbers",
                           "`@` belongs in a `gemm` statement: `gemm c = a @ b`")
    return _bitwise(op, a, b)


def unary(op: str, value: Value) -> Value:
    if op == "not":
        return not boolean(value)
    if op == "~":
        return ~integer(value)
    n = number(value)
    return -n if op == "-" else n


def _log2(x: Value) -> int:
    n = integer(x)
    if n <= 0 or n & (n - 1):
        raise ValueProblem(f"`log2` of {n}, which is not a power of two", "log2 is exact; pass a power of two")
    return n.bit_length() - 1


def _ceil_div(a: Value, b: Value) -> int:
    a, b = integer(a), integer(b)
    if b <= 0:
        raise ValueProblem(f"`ceil_div` by {b}", "the divisor must be positive")
    return -(-a // b)


def _sqrt(x: Value) -> float:
    v = number(x)
    if v < 0:
        raise ValueProblem("`sqrt` of a negative number", "pass a value >= 0")
    return math.sqrt(v)


MAX_POW_EXPONENT = 4096


def _pow(a: Value, b: Value) -> int | float:
    a, b = number(a), number(b)
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        if b > MAX_POW_EXPONENT:
            raise ValueProblem("`pow` exponent too large", f"use an exponent up to {MAX_POW_EXPONENT}")
        return a**b
    if a == 0 and b < 0:
        raise ValueProblem("`pow(0, negative)`", "the base must be non-zero")
    if a < 0 and not float(b).is_integer():  # Python would return a complex number
        raise ValueProblem("`pow` result is not a real number", "a negative base takes only whole exponents")
    try:
        return float(a) ** float(b)
    except (OverflowError, ValueError):
        raise ValueProblem("`pow` result is not a real number", "check the operands") from None


def _min_max(choose, *args: Value) -> int | float:
    if not args:
        raise ValueProblem("`min`/`max` need at least one argument", "pass the values to compare")
    return choose(number(a) for a in args)


FUNCTIONS: dict[str, tuple[int | None, Callable]] = {
    # name: (arity, None for variadic; the implementation, taking the arguments' values)
    "min": (None, lambda *a: _min_max(min, *a)),
    "max": (None, lambda *a: _min_max(max, *a)),
    "abs": (1, lambda x: abs(number(x))),
    "log2": (1, _log2),
    "ceil_div": (2, _ceil_div),
    "sqrt": (1, _sqrt),
    "pow": (2, _pow),
}


def literal(value: Value) -> str:
    """A value as the .pipe language writes it (`true`, `"kernel"`, `0.5`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


# The largest finite magnitude of each floating-point element type.
FLOAT_LIMITS = {"f16": 65504.0, "bf16": 3.3895e38, "f32": 3.4028234e38, "f64": 1.7976931348623157e308}


def representable(value: Value, dtype: DType) -> str | None:
    """Why `value` does not fit `dtype`, or None if it does."""
    if isinstance(value, bool):
        value = int(value)
    if dtype.kind == "f":
        if not isinstance(value, (int, float)):
            return f"`{literal(value)}` is not a number"
        if abs(float(value)) > FLOAT_LIMITS[dtype.name]:
            return f"{value!r} overflows `{dtype.name}`"
        return None
    if isinstance(value, float):
        return f"{value!r} is not an integer, and `{dtype.name}` holds integers"
    if not isinstance(value, int):
        return f"`{literal(value)}` is not a number"
    low, high = dtype.int_range()
    if not low <= value <= high:
        return f"{value} is outside the range of `{dtype.name}` ({low} to {high})"
    return None


def argument_problem(value: Value, dtype: DType) -> str | None:
    """Why `value` cannot be a scalar argument of type `dtype` (PC204), or None."""
    if isinstance(value, str):
        return f"`{literal(value)}` is a string"
    if dtype.kind == "b":
        return None if isinstance(value, bool) or value in (0, 1) else f"`{value!r}` is not a boolean"
    return representable(value, dtype)


def argument_value(value: int | float | bool, dtype: DType) -> int | float:
    """What a kernel receives for a value `argument_problem` accepts: a float for a floating
    parameter, an integer otherwise (a boolean as 0 or 1)."""
    return float(value) if dtype.kind == "f" else int(value)
