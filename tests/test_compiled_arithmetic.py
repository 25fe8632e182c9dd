"""compile_arithmetic gives evaluate's value, of the same type, wherever it gives one, and hands
everything else back (NotPlain): what `Context.eval` relies on to evaluate a slice bound such as
`(u + 1) * BATCH` once per iteration without its lookups."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipec.compiler.consteval import ConstError, NotPlain, compile_arithmetic, evaluate, is_arithmetic
from pipec.dsl.errors import MAX_INT_BITS
from pipec.dsl.parser import parse_expression
from pipec.dsl.source import SourceFile

CONSTANTS = {"N": 4, "HALF": 0.5, "ON": True, "BIG": 1 << (MAX_INT_BITS - 1)}


def _parse(text: str):
    return parse_expression(SourceFile(Path("t.pipe"), text), 0, len(text))


def _both(text: str, env: dict):
    """compile_arithmetic's function (None when it compiles nothing) and evaluate's value or error."""
    expr = _parse(text)
    assert is_arithmetic(expr)
    run = compile_arithmetic(expr, frozenset(n for n in ("u", "v") if n in env), CONSTANTS.get)

    def lookup(ident):
        return env[ident.text] if ident.text in env else CONSTANTS[ident.text]
    try:
        expected = evaluate(expr, lookup)
    except ConstError as error:
        expected = error
    return run, expected


atoms = st.sampled_from(["u", "v", "N", "HALF", "ON", "BIG", "0", "1", "7", "2.5", "true"])


@st.composite
def expressions(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(atoms)
    op = draw(st.sampled_from(["+", "-", "*", "%", "/"]))
    return f"({draw(expressions(depth - 1))} {op} {draw(expressions(depth - 1))})"


values = st.one_of(st.integers(-50, 50), st.sampled_from([1 << MAX_INT_BITS, -(1 << 200), 1.5, True]))


@settings(max_examples=400)
@given(expressions(), values, values)
@example("(u % N)", -3, 0)  # C's remainder of a negative: not Python's
@example("(BIG * N)", 0, 0)  # past MAX_INT_BITS: an error
def test_a_compiled_expression_gives_evaluates_value_or_hands_it_back(text, u, v):
    run, expected = _both(text, {"u": u, "v": v})
    if run is None:
        return
    try:
        got = run({"u": u, "v": v})
    except NotPlain:
        return
    assert not isinstance(expected, ConstError), f"{text}: compiled {got!r} where evaluate fails"
    assert (type(got), got) == (type(expected), expected)


def test_a_slice_bound_is_computed_and_a_hidden_constant_handed_back():
    run, expected = _both("(u + 1) * N", {"u": 3})
    assert run is not None and run({"u": 3}) == expected == 16
    with pytest.raises(NotPlain):
        run({"u": 3, "N": 2})  # a loop variable named N now hides the constant
    with pytest.raises(NotPlain):
        run({})  # u unbound


@pytest.mark.parametrize("text", ["u / 2", "u + HALF2", "u < N"])
def test_what_it_cannot_compile_is_none(text):
    expr = _parse(text)
    assert compile_arithmetic(expr, frozenset({"u"}), CONSTANTS.get) is None
