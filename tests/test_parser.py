"""The parser: syntax tree shapes and spans, syntax errors with positions and hints, and a
property test: random and mutated input never ends in a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipec.dsl import PipeSyntaxError, SourceFile, ast, parse
from pipec.dsl.errors import MAX_NESTING, InputLimitError
from pipec.dsl.parser import GRAMMAR

EXAMPLES = sorted((Path(__file__).parent.parent / "pipelines").rglob("*.pipe"))


def _parse(text: str) -> ast.Module:
    return parse(SourceFile(Path("t.pipe"), text))


def _show(e: ast.Expr) -> str:
    if isinstance(e, ast.Binary):
        return f"({_show(e.left)} {e.op} {_show(e.right)})"
    if isinstance(e, ast.Unary):
        return f"({e.op} {_show(e.operand)})"
    return e.span.text


def test_the_grammar_is_unambiguous_lalr():
    interegular = pytest.importorskip("interegular")
    from lark import Lark

    del interegular
    Lark.open(str(GRAMMAR), parser="lalr", strict=True, keep_all_tokens=True, start=["start", "expr"])


@pytest.mark.parametrize("text, shape", [
    ("1 + 2 * 3", "(1 + (2 * 3))"),
    ("1 << 2 + 3", "(1 << (2 + 3))"),
    ("a - b - c", "((a - b) - c)"),
    ("not a == b and c", "((not (a == b)) and c)"),
    ("not not a == b or not c", "((not (not (a == b))) or (not c))"),
    ("a and not not b", "(a and (not (not b)))"),
    ("a or b and c", "(a or (b and c))"),
    ("-x[1] | y & 3 ^ z", "((- x[1]) | ((y & 3) ^ z))"),
    ("ceil_div(N, 4) * 2 >= 8", "((ceil_div(N, 4) * 2) >= 8)"),
])
def test_operator_precedence(text, shape):
    module = _parse(f"const X = {text}")
    assert _show(module.decls[0].value) == shape


def test_every_node_has_the_span_of_its_text():
    text = ('from "k.cu" import f\nbuffer x: f32[4, 2] mapped labels(a) = fill(1.5)\n'
            "graph g(u) {\n    launch f<<<(2, 1), 32, 64>>>(in x[u:], out y, step, null)\n}\n")
    module = _parse(text)
    imp, buf, graph = module.decls
    assert imp.span.text == 'from "k.cu" import f'
    assert buf.span.text == "buffer x: f32[4, 2] mapped labels(a) = fill(1.5)"
    assert buf.mapped and [l.text for l in buf.labels] == ["a"] and buf.init.span.text == "fill(1.5)"
    launch = graph.body.stmts[0]
    assert launch.span.text.startswith("launch f<<<") and launch.span.text.endswith("null)")
    assert launch.grid.span.text == "(2, 1)" and launch.shared_bytes.span.text == "64"
    assert [a.span.text for a in launch.args] == ["in x[u:]", "out y", "step", "null"]
    assert [a.access for a in launch.args] == ["in", "out", None, None]
    assert isinstance(launch.args[0].value, ast.Slice) and launch.args[0].value.stop is None
    assert isinstance(launch.args[2].value, ast.StepRef)


@pytest.mark.parametrize("text, where, message, hint", [
    ("buffer x f32[3]", (1, 10), "unexpected `f32`; expected `:`", None),
    ("graph g { launch k(x) }", (1, 19), "unexpected `(`", "launch kernel<<<grid, block>>>"),
    ("const X = 'a'", (1, 11), "unexpected character `'`", "double quotes"),
    ("step {\n  launch k<<<1, 1>>>(x)\n", (1, 6), "the `{` of `step` is never closed",
     "before the end of the file"),
    # at their cause: `>>` for `>>>`, an unclosed `{` at the brace with its block's name (by
    # indentation when a later `}` closes an outer block), a missing `)` at the launch
    ("step {\n    launch k<<<1, 32>>(x)\n}\n", (2, 21), "`>>` closes the launch configuration, which takes `>>>`",
     "`>>` is a right shift"),
    ("graph g {\n    fill x = 0\n\nstep {\n    g\n}\n", (1, 9), "the `{` of `graph g` is never closed",
     "before line 4"),
    ("graph g {\n    if x > 0 {\n        fill a = 0\n\n    fill b = 1\n}\nstep {\n}\n", (2, 14),
     "the `{` of `if x > 0` is never closed", "before line 7"),
    ("step {\n    launch k<<<1, 32>>>(x, y\n    fill x = 0\n}\n", (2, 24),
     "the arguments of `launch k` are never closed: a `)` is missing", "`)`"),
    ("graph g { 5 }\n", (1, 11), "unexpected `5`; expected a statement or `}`", None),
    # expected tokens in words, every one of them
    ("const A =\n", (2, 1), "unexpected end of file; expected an expression", None),
    ("step { fill x = 1 2 }", (1, 19), "unexpected `2`; expected an operator, a name, `(`,", None),
    ("const A = 3;", (1, 12), "unexpected character `;`", "no `;`"),
    ("step { if x = 3 {} }", (1, 13), "unexpected `=`", "comparisons use `==`"),
])
def test_syntax_errors_point_at_the_problem(text, where, message, hint):
    with pytest.raises(PipeSyntaxError) as info:
        _parse(text)
    error = info.value
    assert (error.span.line, error.span.column) == where
    assert error.message.startswith(message)
    if hint:
        assert hint in error.hint


def test_nesting_counts_levels_not_the_length_of_a_chain():
    # The module is level 0 and the declaration level 1, so the k-th `-` sits at level k + 1.
    _parse("const X = " + "-" * (MAX_NESTING - 2) + "1")
    with pytest.raises(InputLimitError) as info:
        _parse("const X = " + "-" * (MAX_NESTING - 1) + "1")
    assert info.value.code == "PC112" and info.value.span.column == len("const X = ") + MAX_NESTING
    chain = _parse("const X = " + " - ".join(["1"] * 10 * MAX_NESTING)).decls[0].value
    assert isinstance(chain.left, ast.Binary) and chain.right.span.text == "1"
    with pytest.raises(InputLimitError):
        _parse("const X = " + "1 - (" * MAX_NESTING + "1" + ")" * MAX_NESTING)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_shipped_pipelines_parse(path):
    assert _parse(path.read_text()).decls


_TOKENS = st.sampled_from([
    "step", "init", "graph", "launch", "fill", "copy", "for", "in", "if", "else", "parallel",
    "buffer", "const", "from", "import", "option", "waive", "mapped", "labels", "out", "inout",
    "x", "k", "N", "f32", "0", "1.5", "1e-3", '"a.cu"', "<<<", ">>>", "(", ")", "{", "}", "[", "]",
    ":", ",", "=", "==", "->", "..", "+", "-", "*", "/", "<<", ">>", "not", "and", "null", "#c\n",
    "\n", " ", "'", ";", "@", "\t",
])


def _never_a_traceback(text: str) -> None:
    try:
        _parse(text)
    except PipeSyntaxError as error:
        assert 0 <= error.span.start <= len(text) and error.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKENS, max_size=60).map(" ".join))
def test_random_token_soup_never_raises_anything_else(text):
    _never_a_traceback(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_pipelines_never_raise_anything_else(data):
    path = data.draw(st.sampled_from(EXAMPLES or [Path(__file__)]))
    text = path.read_text() if path.suffix == ".pipe" else "step { }"
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        action = data.draw(st.sampled_from(["delete", "insert", "duplicate"]))
        if action == "delete":
            text = text[:at] + text[at + data.draw(st.integers(1, 12)):]
        elif action == "insert":
            text = text[:at] + data.draw(_TOKENS) + text[at:]
        else:
            text = text[:at] + text[max(0, at - 20):at] + text[at:]
    _never_a_traceback(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_raises_anything_else(text):
    _never_a_traceback(text)
