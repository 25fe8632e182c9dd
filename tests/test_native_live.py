"""The C runtime's evaluation of the live-update record's expressions (native/src/live_value.c)
against plan/live.py's, which the compiler's own evaluation shares: for random expressions of the
record's language over random values (integers up to 127 bits, floats with their infinities,
NaN and signed zeros, booleans; every operator and function, operands of the wrong kinds too),
and for the conversions to a scalar argument's type and to a launch dimension, both give the
same value of the same kind, bit for bit, or both refuse. native/tests/live_eval.c is the C side."""

from __future__ import annotations

import json
import math
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from native_harness import build_native, native_tools_missing
from pipec.plan.arithmetic import BINARY, FUNCTIONS
from pipec.plan.dtypes import DTYPES
from pipec.plan.live import LiveProblem, argument, dimension, encode, evaluate

pytestmark = pytest.mark.skipif(native_tools_missing() is not None, reason=native_tools_missing() or "")
REFS = 3


@pytest.fixture(scope="module")
def live_eval(tmp_path_factory) -> Path:
    return build_native(tmp_path_factory.mktemp("native-build")) / "live_eval"


_INTEGERS = st.one_of(st.integers(-12, 12), st.integers(-2**64, 2**64), st.integers(-2**127 + 1, 2**127 - 1),
                      st.sampled_from([2**127 - 1, -2**127 + 1, 2**63, -2**63, -2**63 - 1, 2**64 - 1, 2**64, 2**126]))
_FLOATS = st.one_of(st.floats(), st.sampled_from([0.0, -0.0, 0.5, 1.0, -1.0, 2.0, 1e308, -1e308, 0.1, 3.5]))
_VALUES = st.one_of(_INTEGERS, _INTEGERS, _FLOATS, st.booleans())
_UNARY = ("-", "+", "~", "not")


def _expressions():
    leaves = st.one_of(_VALUES.map(encode), st.integers(0, REFS - 1).map(lambda i: ("ref", i)))

    def nodes(sub):
        functions = [st.tuples(st.just(name), *([sub] * arity)) for name, (arity, _) in FUNCTIONS.items() if arity]
        variadic = st.builds(lambda name, args: (name, *args), st.sampled_from(["min", "max"]),
                             st.lists(sub, min_size=0, max_size=4))
        return st.one_of(st.tuples(st.sampled_from((*BINARY, "and", "or")), sub, sub),
                         st.tuples(st.sampled_from(_UNARY), sub), variadic, *functions)
    return st.recursive(leaves, nodes, max_leaves=10)


def _python(expr, values, argument_type=None, bounds=None):
    try:
        value = evaluate(expr, values)
        if argument_type is not None:
            value = argument(value, argument_type)
        if bounds is not None:
            value = dimension(value, "it", *bounds)
    except LiveProblem:
        return None
    return value


def _c_value(line: dict):
    if not line["ok"]:
        return None
    kind, text = line["kind"], line["value"]
    if kind == "bool":
        return text == "true"
    return int(text) if kind == "int" else float.fromhex(text.replace("-nan", "nan"))


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def _run(live_eval: Path, cases: list[dict]) -> list:
    lines = "".join(json.dumps(case) + "\n" for case in cases)
    done = subprocess.run([str(live_eval)], input=lines, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [_c_value(json.loads(line)) for line in done.stdout.splitlines()]


@settings(max_examples=40)
@given(st.lists(st.tuples(_expressions(), st.lists(_INTEGERS | _FLOATS | st.booleans(), min_size=REFS, max_size=REFS)),
                min_size=1, max_size=60))
def test_c_evaluates_every_expression_as_python(live_eval, cases):
    results = _run(live_eval, [{"expr": expr, "values": [encode(v) for v in values]} for expr, values in cases])
    for (expr, values), c in zip(cases, results):
        python = _python(expr, values)
        assert _same(python, c), f"{expr} over {values}: Python {python!r}, C {c!r}"


@settings(max_examples=25)
@given(st.lists(st.tuples(_VALUES, st.sampled_from(sorted(DTYPES))), min_size=1, max_size=80))
def test_c_converts_arguments_as_python(live_eval, cases):
    results = _run(live_eval, [{"expr": encode(v), "values": [], "argument": t} for v, t in cases])
    for (value, ctype), c in zip(cases, results):
        python = _python(encode(value), [], argument_type=ctype)
        assert _same(python, c), f"{value!r} as {ctype}: Python {python!r}, C {c!r}"


@settings(max_examples=25)
@given(st.lists(st.tuples(_VALUES, st.sampled_from([(1, 1024, 1), (0, 232448, 1), (1, 2**31 - 1, 2), (1, 65535, 4)])),
                min_size=1, max_size=80))
def test_c_checks_launch_dimensions_as_python(live_eval, cases):
    results = _run(live_eval, [{"expr": encode(v), "values": [], "dimension": list(b)} for v, b in cases])
    for (value, bounds), c in zip(cases, results):
        python = _python(encode(value), [], bounds=bounds)
        assert _same(python, c), f"{value!r} within {bounds}: Python {python!r}, C {c!r}"
