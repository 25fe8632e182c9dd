"""Compile-time evaluation, operator by operator, at the boundaries where a changed comparison
or constant would give another value or another error. (Written to kill the surviving mutants
of scripts/mutate.py over compiler/consteval.py.)"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pipec.compiler.consteval import (
    ConstError, RuntimeValue, _arithmetic, _Unhandled, evaluate, is_arithmetic, literal, representable,
)
from pipec.compiler.model import DTYPES
from pipec.dsl.parser import parse_expression
from pipec.dsl.source import SourceFile

CONSTANTS = {"N": 4, "HALF": 0.5, "ON": True, "NAME": "k"}


def _lookup(ident):
    if ident.text == "buf":
        raise RuntimeValue("the buffer `buf`", ident.span, "buf")
    return CONSTANTS[ident.text]


def value(text: str):
    source = SourceFile(Path("t.pipe"), text)
    return evaluate(parse_expression(source, 0, len(text)), _lookup)


def error(text: str) -> ConstError:
    with pytest.raises(ConstError) as caught:
        value(text)
    return caught.value


@pytest.mark.parametrize("text, expected", [
    ("3", 3), ("2.5", 2.5), ("true", True), ('"s"', "s"), ("N", 4), ("NAME", "k"),
    ("-3", -3), ("-2.5", -2.5), ("+3", 3), ("~5", -6), ("not true", False), ("not false", True),
    ("1 + 2", 3), ("1 + 2.5", 3.5), ("3 - 1", 2), ("3 * 2", 6), ("7.0 / 2", 3.5), ("1 * 0", 0),
    # integer division and remainder truncate toward zero, as in C
    ("7 / 2", 3), ("-7 / 2", -3), ("7 / -2", -3), ("-7 / -2", 3), ("6 / 3", 2), ("-6 / 3", -2),
    ("7 % 2", 1), ("-7 % 2", -1), ("7 % -2", 1), ("-7 % -2", -1), ("7.5 % 2", 1.5), ("-7.5 % 2", -1.5),
    ("6 & 3", 2), ("6 | 3", 7), ("6 ^ 3", 5), ("1 << 3", 8), ("16 >> 2", 4), ("3 << 0", 3),
    ("1 << 255", 1 << 255), ("1 >> 255", 0),
    ("2 < 2", False), ("1 < 2", True), ("2 <= 2", True), ("3 <= 2", False), ("2 > 2", False),
    ("3 > 2", True), ("2 >= 2", True), ("1 >= 2", False), ("2 == 2", True), ("2 == 3", False),
    ("2 != 2", False), ("2 != 3", True), ("1 == 1.0", True), ("true == true", True), ("true != false", True),
    ("true and false", False), ("true and true", True), ("false or true", True), ("false or false", False),
    ("false and step", False), ("true or step", True), ("ON and 1 < N", True),
    ("min(3, 1, 2)", 1), ("max(3, 1, 2)", 3), ("max(1.5, 2)", 2), ("min(4)", 4),
    ("abs(-3)", 3), ("abs(-1.5)", 1.5), ("abs(2)", 2),
    ("log2(1)", 0), ("log2(2)", 1), ("log2(8)", 3), ("log2(1 << 40)", 40),
    ("ceil_div(7, 2)", 4), ("ceil_div(8, 2)", 4), ("ceil_div(9, 2)", 5), ("ceil_div(-7, 2)", -3),
    ("ceil_div(0, 1)", 0), ("ceil_div(5, 1)", 5),
    ("sqrt(4)", 2.0), ("sqrt(2.25)", 1.5), ("sqrt(0)", 0.0),
    ("pow(2, 10)", 1024), ("pow(3, 0)", 1), ("pow(2, 1)", 2), ("pow(2, -1)", 0.5), ("pow(4, 0.5)", 2.0),
    ("pow(0, 0)", 1), ("pow(0, 2)", 0), ("pow(2.0, 3)", 8.0), ("pow(1, 4096)", 1),
])
def test_value(text, expected):
    result = value(text)
    assert result == expected and type(result) is type(expected)


def test_pow_up_to_the_largest_exponent_and_the_largest_integer():
    assert value("pow(-1, 4096)") == 1 and value("pow(-1, 4095)") == -1
    with pytest.raises(ConstError, match="exponent too large"):
        value("pow(1, 4097)")
    assert value("pow(2, 999)") == 2**999
    with pytest.raises(ConstError, match="beyond 2\\*\\*1000"):
        value("pow(2, 1000)")


@pytest.mark.parametrize("text, message", [
    ("1 / 0", "division by zero"), ("1 % 0", "division by zero"), ("1.5 / 0", "division by zero"),
    ("true + 1", "expected a number, found the boolean `true`"),
    ('"a" + 1', "expected a number, found the string 'a'"),
    ("1 - false", "expected a number, found the boolean `false`"),
    ("-true", "expected a number, found the boolean `true`"),
    ("1.5 & 1", "expected an integer, found the float `1.5`"),
    ("true & 1", "expected an integer, found the boolean `true`"),
    ("1 | 2.0", "expected an integer, found the float `2.0`"),
    ("~1.5", "expected an integer, found the float `1.5`"),
    ("not 3", "expected a boolean, found the integer `3`"),
    ("1 and true", "expected a boolean, found the integer `1`"),
    ("true and 1", "expected a boolean, found the integer `1`"),
    ("false or 2", "expected a boolean, found the integer `2`"),
    ("1 << 256", "shift by 256 bits"), ("1 >> -1", "shift by -1 bits"),
    ("true == 1", "cannot compare the boolean `true` with the integer `1`"),
    ("1 < false", "cannot compare the integer `1` with the boolean `false`"),
    ('"a" == "a"', "cannot compare the string 'a' with the string 'a'"),
    ('1 == "a"', "cannot compare"), ('"a" != 1', "cannot compare"),
    ("log2(0)", "`log2` of 0, which is not a power of two"), ("log2(6)", "not a power of two"),
    ("log2(-4)", "not a power of two"), ("log2(2.0)", "expected an integer"),
    ("ceil_div(1, 0)", "`ceil_div` by 0"), ("ceil_div(1, -1)", "`ceil_div` by -1"),
    ("ceil_div(1.5, 1)", "expected an integer"), ("ceil_div(1, 1.5)", "expected an integer"),
    ("sqrt(-1)", "`sqrt` of a negative number"), ("sqrt(true)", "expected a number"),
    ("pow(2, 4097)", "`pow` exponent too large"), ("pow(0, -1)", "`pow(0, negative)`"),
    ("pow(0.0, -0.5)", "`pow(0, negative)`"), ("pow(10.0, 400)", "`pow` result is not a real number"),
    ("pow(true, 2)", "expected a number"),
    ("min()", "`min`/`max` need at least one argument"), ("max(1, true)", "expected a number"),
    ("abs(true)", "expected a number"),
    ("ceil_div(1)", "`ceil_div` takes 2 arguments, found 1"),
    ("abs(1, 2)", "`abs` takes 1 argument, found 2"), ("sqrt()", "`sqrt` takes 1 argument, found 0"),
    ("frob(1)", "unknown function `frob`"), ("ceil_div(1, b=2)", "`ceil_div` takes no keyword arguments"),
    ("null", "`null` is not a constant"), ("N[0]", "the integer `4` cannot be indexed"),
])
def test_error(text, message):
    assert message in error(text).message


def test_an_error_points_at_the_offending_operand_or_call():
    assert error("1 + (true and 2)").span.text == "2"
    assert error("(1 and true) or false").span.text == "1"
    assert error("frob(1)").span.text == "frob"
    assert error("ceil_div(1, b=2)").span.text == "b=2"
    assert error("ceil_div(1)").span.text == "ceil_div(1)"
    assert "ceil_div, log2, max, min, pow, sqrt" in error("frob(1)").hint
    assert error("1 / 0").code == "PC105"


def test_device_data_is_not_a_constant():
    with pytest.raises(RuntimeValue) as step:
        value("1 + step")
    assert step.value.description == "the step index `step`" and step.value.buffer_name is None
    with pytest.raises(RuntimeValue) as element:
        value("buf[2] * 2")
    assert element.value.description == "the element `buf[2]` of buffer `buf`"
    assert element.value.buffer_name == "buf" and element.value.span.text == "buf[2]"


@pytest.mark.parametrize("v, text", [
    (True, "true"), (False, "false"), ("k", '"k"'), ('a"b\\c', '"a\\"b\\\\c"'), (0.5, "0.5"), (3, "3"),
])
def test_literal(v, text):
    assert literal(v) == text


@pytest.mark.parametrize("v, dtype, why", [
    (65504.0, "f16", None), (65505.0, "f16", "65505.0 overflows `f16`"), (-65505, "f16", "overflows"),
    (3.3895e38, "bf16", None), (3.4e38, "bf16", "overflows `bf16`"),
    (3.4028234e38, "f32", None), (3.5e38, "f32", "overflows `f32`"), (True, "f32", None),
    (1.7976931348623157e308, "f64", None), (math.inf, "f64", "overflows `f64`"),
    ("k", "f32", '`"k"` is not a number'),
    (127, "i8", None), (128, "i8", "128 is outside the range of `i8` (-128 to 127)"), (-128, "i8", None),
    (-129, "i8", "outside"), (255, "u8", None), (256, "u8", "outside the range of `u8` (0 to 255)"),
    (-1, "u32", "outside"), (2**31 - 1, "i32", None), (2**31, "i32", "outside"), (2**64 - 1, "u64", None),
    (True, "i32", None), (1, "bool", None), (2, "bool", "outside the range of `bool` (0 to 1)"),
    (1.5, "i32", "1.5 is not an integer, and `i32` holds integers"),
])
def test_representable(v, dtype, why):
    reason = representable(v, DTYPES[dtype])
    assert reason == why if why is None else why in reason


def test_the_exceptions_carry_their_message():
    assert str(error("1 / 0")) == "division by zero"
    with pytest.raises(RuntimeValue, match="^the step index `step`$"):
        value("step")


def test_pow_of_a_float_zero():
    assert value("pow(0.0, 0)") == 1.0
    assert value("pow(0.0, 0.5)") == 0.0


def test_min_and_max_report_at_the_call():
    assert error("max(1, true)").span.text == "max(1, true)"
    assert error("min(2, true)").span.text == "min(2, true)"


@pytest.mark.parametrize("text", ["N[0][1]", "N[1:2]", "x.y"])
def test_other_expressions_are_not_constants(text):
    assert error(text).message == f"`{text}` is not a constant expression"


def test_a_negative_base_with_a_fractional_exponent_is_an_error_not_a_complex_number():
    with pytest.raises(ConstError, match="not a real number"):
        value("pow(-8, 0.5)")
    assert value("pow(-2.0, 3.0)") == -8.0


def _expression(text: str):
    return parse_expression(SourceFile(Path("t.pipe"), text), 0, len(text))


@pytest.mark.parametrize("text, expected", [
    ("3", True), ("N", True), ('"s"', True), ("(N + 1) % 3 * 2", True), ("N < 2", True),
    ("1" + " + 1" * 32, True), ("1" + " + 1" * 33, False),
    ("-N", False), ("N > 1 and ON", False), ("min(N, 2)", False), ("1 + max(N, 2)", False),
])
def test_is_arithmetic_is_what_the_recursive_evaluation_handles(text, expected):
    """The resolver keeps no values of these expressions: each is evaluated again, recursively."""
    expr = _expression(text)
    assert is_arithmetic(expr) is expected
    try:
        _arithmetic(expr, _lookup, 32)
        handled = True
    except _Unhandled:
        handled = False
    assert handled is expected
