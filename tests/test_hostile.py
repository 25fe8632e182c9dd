"""Hostile input to `pipec --check`: deep nesting, long chains, undecodable bytes (also behind an
import), NUL bytes, a byte-order mark, CRLF, files beyond the size limits and random bytes.
Whatever the input, the answer is a diagnostic with a code and a position, never a traceback."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipec.compiler.cli import main
from pipec.compiler.consteval import evaluate
from pipec.dsl import SourceFile, parse
from pipec.dsl.errors import MAX_NESTING, MAX_PIPE_CHARS
from pipec.dsl.source import MAX_READ_BYTES

KERNELS = Path(__file__).parent.parent / "compiler" / "explanations" / "examples" / "kernels.cu"


def check(capsys, path: Path, *options: str) -> tuple[int, str]:
    code = main(["--check", "--format", "concise", *options, str(path)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out


def write(tmp_path: Path, text: str | bytes, name: str = "t.pipe") -> Path:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text)
    else:
        path.write_bytes(text)
    return path


def _constant(text: str):
    (decl,) = parse(SourceFile(Path("t.pipe"), f"const X = {text}")).decls
    return evaluate(decl.value, lambda ident: pytest.fail(f"no names here: {ident.text}"))


def test_a_600_term_sum_evaluates():
    assert _constant(" + ".join(["1"] * 600)) == 600


def test_a_long_mixed_chain_evaluates_by_precedence():
    rng = random.Random(9)
    terms = [rng.randint(0, 99) for _ in range(20_000)]
    ops = [rng.choice(["+", "-", "*"]) for _ in terms[1:]]
    text = str(terms[0]) + "".join(f" {op} {term}" for op, term in zip(ops, terms[1:]))
    total, sign, product = 0, 1, terms[0]  # a sum of products (Python's eval overflows its stack)
    for op, term in zip(ops, terms[1:]):
        if op == "*":
            product *= term
        else:
            total, sign, product = total + sign * product, 1 if op == "+" else -1, term
    assert _constant(text) == total + sign * product


_INTEGERS = st.recursive(
    st.integers(-50, 50).map(str), lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*"]), inner).map(" ".join),
        inner.map(lambda e: f"({e})"), inner.map(lambda e: f"-{e}"),
        st.lists(inner, min_size=1, max_size=3).map(lambda a: f"max({', '.join(a)})"),
    ), max_leaves=25)
_COMPARISONS = st.tuples(_INTEGERS, st.sampled_from(["<", "==", ">=", "!="]), _INTEGERS).map(" ".join)
_BOOLEANS = st.recursive(
    _COMPARISONS, lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["and", "or"]), inner).map(" ".join),
        inner.map(lambda e: f"not ({e})"),
    ), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_INTEGERS, _BOOLEANS))
def test_evaluation_agrees_with_python(text):
    assert _constant(text) == eval(text.replace("max(", "_max("), {"_max": lambda *a: max(a)})


def test_and_or_short_circuit_left_to_right():
    assert _constant("false and 1 / 0 == 1") is False
    assert _constant("true or log2(3) == 1") is True
    with pytest.raises(Exception, match="division by zero"):
        _constant("true and 1 / 0 == 1")


_DEEP = {
    "negation": lambda n: "const X = " + "-" * n + "1",
    "not": lambda n: "const X = " + "not " * n + "true",
    "parenthesised sums": lambda n: "const X = " + "1 + (" * n + "1" + ")" * n,
    "calls": lambda n: "const X = " + "abs(" * n + "1" + ")" * n,
    "tuples": lambda n: "const X = " + "(1, " * n + "1" + ")" * n,
    "subscripts": lambda n: "const X = x" + "[0]" * n,
    "attributes": lambda n: "const X = x" + ".y" * n,
    "if blocks": lambda n: "step {\n" + "if true {\n" * n + "}\n" * n + "}\n",
    "for blocks": lambda n: "step {\n" + "".join(f"for i{k} in 0 .. 1 {{\n" for k in range(n)) + "}\n" * n + "}\n",
    "parallel blocks": lambda n: "step {\n" + "parallel {\n" * n + "}\n" * n + "}\n",
    "else-if chains": lambda n: "step {\nif false {}" + " else if false {}" * n + "\n}\n",
}


@pytest.mark.parametrize("kind", _DEEP)
def test_deep_nesting_is_one_input_limit_diagnostic(capsys, tmp_path, kind):
    code, out = check(capsys, write(tmp_path, _DEEP[kind](1000)))
    assert code == 2
    assert out.count("error[") == 1 and "error[PC112]" in out and f"{MAX_NESTING} levels" in out


@pytest.mark.parametrize("kind", _DEEP)
def test_nesting_within_the_limit_is_checked_without_a_limit_diagnostic(capsys, tmp_path, kind):
    _, out = check(capsys, write(tmp_path, _DEEP[kind](MAX_NESTING - 20)))
    assert "PC112" not in out


def test_undecodable_bytes_point_at_the_first_bad_byte(capsys, tmp_path):
    # columns count code points: the two bytes of `é` are one column
    code, out = check(capsys, write(tmp_path, b"const A = 1\nconst B = 2 # caf\xc3\xa9 \xff\n"))
    assert code == 2
    assert "t.pipe:2:20: error[PC101]: the file is not UTF-8 text: byte 0xff cannot be decoded" in out


@pytest.mark.parametrize("statement", ['import "lib.pipe"', 'from "lib.pipe" import A'])
def test_undecodable_imported_file_is_reported_in_that_file(capsys, tmp_path, statement):
    write(tmp_path, b"const A = 1\n\x80\n", "lib.pipe")
    code, out = check(capsys, write(tmp_path, f"{statement}\nconst B = 2\n"))
    assert code == 2
    assert "lib.pipe:2:1: error[PC101]: the file is not UTF-8 text: byte 0x80" in out


def test_deep_nesting_in_an_imported_file_is_reported_in_that_file(capsys, tmp_path):
    write(tmp_path, _DEEP["negation"](1000), "lib.pipe")
    code, out = check(capsys, write(tmp_path, 'import "lib.pipe"\n'))
    assert code == 2 and "lib.pipe:1:" in out and "error[PC112]" in out


def test_nul_byte_is_a_syntax_error_named_by_code_point(capsys, tmp_path):
    code, out = check(capsys, write(tmp_path, b"const A = 1\nconst B = \x00\n"))
    assert code == 2 and ":2:11: error[PC101]: unexpected character U+0000" in out
    assert "\x00" not in out


def test_byte_order_mark_and_crlf_are_ordinary_text(capsys, tmp_path):
    text = "\ufeffconst A = 1\r\nconst B = 1 / 0\r\nconst C = A\r"
    code, out = check(capsys, write(tmp_path, text.encode("utf-8")))
    assert code == 1 and out.count("error[") == 1 and ":2:11: error[PC105]:" in out


def test_a_file_beyond_the_read_limit_is_not_read(capsys, tmp_path):
    code, out = check(capsys, write(tmp_path, b"#" * (MAX_READ_BYTES + 1)))
    assert code == 2 and ":1:1: error[PC112]: the file is larger than 4 MiB" in out


def test_a_file_beyond_the_parse_limit_is_not_parsed(capsys, tmp_path):
    code, out = check(capsys, write(tmp_path, "const X = " + "1 + " * (MAX_PIPE_CHARS // 4) + "1\n"))
    assert code == 2 and f":1:{MAX_PIPE_CHARS + 1}: error[PC112]: the file is longer than" in out


def test_a_long_chain_just_within_the_parse_limit_is_checked(tmp_path):
    source = SourceFile(Path("t.pipe"), "const X = " + "1 + " * (MAX_PIPE_CHARS // 4 - 4) + "1")
    (decl,) = parse(source).decls
    assert evaluate(decl.value, lambda ident: 0) == MAX_PIPE_CHARS // 4 - 3


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "concise", "text"])
def test_random_bytes_give_exit_2_and_a_located_report_in_every_format(capsys, tmp_path, fmt, seed):
    rng = random.Random(seed)
    path = write(tmp_path, bytes(rng.randrange(256) for _ in range(2000)))
    code = main(["--check", "--format", fmt, str(path)])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in out + err
    if fmt == "json":
        (item,) = json.loads(out)
        assert item["code"] == "PC101" and item["line"] >= 1 and item["column"] >= 1
    elif fmt == "sarif":
        (result,) = json.loads(out)["runs"][0]["results"]
        region = result["locations"][0]["physicalLocation"]["region"]
        assert result["ruleId"] == "PC101" and region["startLine"] >= 1 and region["startColumn"] >= 1
    elif fmt == "github":
        assert out.startswith("::error file=") and ",line=" in out and ",col=" in out
    else:
        assert "t.pipe:" in out and "error[PC101]" in out


def test_kernel_source_that_is_not_utf8_is_still_compiled(capsys, tmp_path):
    cuda = KERNELS.read_bytes() + b"\n// \xff\xfe\n"
    write(tmp_path, cuda, "kernels.cu")
    code, out = check(capsys, write(tmp_path, 'from "kernels.cu" import add_one\n'
                                    "buffer x: f32[4]\nstep { launch add_one<<<1, 4>>>(x, 4) }\n"))
    assert code == 0, out


def test_a_long_chain_in_a_kernel_extent_is_evaluated(capsys, tmp_path):
    chain = " + ".join(["n"] * 3000)
    write(tmp_path, f"/// pipec: extent x = {chain} + gridDim.x * 0\n"
                    'extern "C" __global__ void k(float* x, int n) { x[0] = n; }\n', "long.cu")
    code, out = check(capsys, write(tmp_path, 'from "long.cu" import k\nbuffer x: f32[4]\n'
                                    "step { launch k<<<1, 1>>>(out x, 1) }\n"))
    assert code == 1 and "error[PC310]" in out and "touches 3000 elements" in out


def test_a_configuration_that_is_not_utf8_is_a_one_line_error(capsys, tmp_path):
    write(tmp_path, b'[tool.pipec]\nselect = ["\xff"]\n', "pyproject.toml")
    code = main(["--check", str(write(tmp_path, "const A = 1\n"))])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("pipec: error:") and "pyproject.toml" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("literal", ['"\\x"', '"\\N{no such name}"', '"a\\0b"', '"a\x00b"'])
def test_a_string_with_a_bad_escape_or_a_nul_is_a_syntax_error(capsys, tmp_path, literal):
    code, out = check(capsys, write(tmp_path, f"import {literal}\n"))
    assert code == 2 and ":1:8: error[PC101]: invalid string" in out


@pytest.mark.parametrize("text, where", [
    ("const A = " + "9" * 5000, "1:11"),                      # Python refuses to convert it
    ("const A = 0x" + "f" * 251, "1:11"),
    ("const A = pow(10, 300)\nconst B = pow(A, 4096)", "2:11"),
    ("const A = pow(2, 999)\nconst B = A * 1.5 + ~(A * 2)", "2:23"),  # at `A * 2`
])
def test_integers_beyond_the_limit_are_an_input_limit(capsys, tmp_path, text, where):
    code, out = check(capsys, write(tmp_path, text + "\n"))
    assert code == 2 and f":{where}: error[PC112]:" in out and "2**1000" in out


def test_integers_within_the_limit_convert_to_floats(capsys, tmp_path):
    code, out = check(capsys, write(tmp_path, "const A = pow(2, 999)\nconst B = A * 1.5 + 0x" + "0" * 5000 + "1\n"))
    assert code == 0, out


def _graph_chain(depth: int) -> str:
    """`depth` graphs, each using the next; the last fills a buffer."""
    graphs = [f"graph g{i} {{\n    g{i + 1}\n}}\n" for i in range(depth - 1)]
    return ("buffer c: u32[1]\n" + "".join(graphs) + f"graph g{depth - 1} {{\n    fill c = 1\n}}\n"
            "step {\n    g0\n}\n")


def test_a_deep_chain_of_graph_uses_is_an_input_limit_at_the_use_that_crosses_it(capsys, tmp_path):
    code, out = check(capsys, write(tmp_path, _graph_chain(400)))
    assert code == 2 and out.count("error[") == 1
    # g199 (lines 3 * 199 + 2 to + 4) uses g200: the 201st level under `step`
    assert f":{3 * 199 + 3}:5: error[PC112]: graph uses and blocks nest more than {MAX_NESTING}" in out


def test_a_chain_of_graph_uses_at_the_limit_is_planned(capsys, tmp_path):
    path = write(tmp_path, _graph_chain(MAX_NESTING))
    assert check(capsys, path) == (0, "checked 1 file, 0 findings\n")
    assert main(["--emit", "plan", "-o", str(tmp_path / "plan.json"), str(path)]) == 0
    assert len(json.loads((tmp_path / "plan.json").read_text())["graphs"]) == MAX_NESTING + 1
