"""`pipec format`: the layout (docs/cli.md), idempotence, and that formatting never changes
meaning: the plan (locations aside) and the findings of a formatted file are the original's,
over every shipped pipeline, every doc example and generated programs (the fuzzer's)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import test_fuzz
from pipec.compiler import compile_file, load_settings
from pipec.compiler.cli import main
from pipec.compiler.emit import plan_json
from pipec.dsl.errors import PipeSyntaxError
from pipec.dsl.format import WIDTH, FormatError, format_text
from test_doc_examples import PIPE_BLOCKS, _home

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted([*(ROOT / "pipelines").rglob("*.pipe"),
                  *(ROOT / "compiler" / "explanations" / "examples").rglob("*.pipe")])
# the shipped files that fail to parse on purpose: there is nothing to format
UNPARSABLE = {"PC101_syntax_error.pipe", "PC112_input_limit.pipe"}


LOCATION = re.compile(r"\S+\.pipe:\d+:\d+")


def _meaning(path: Path, text: str) -> tuple[object, list[tuple[str, str]]]:
    """What a file means to the compiler: its plan without locations or the file's hash, and
    its findings without spans."""
    result = compile_file(path, load_settings(path), text=text)
    plan = None
    if result.plan is not None:
        plan = _without_locations(json.loads(plan_json(result.plan)))
    # a message may quote the source, whose spacing is what formatting changes
    return plan, sorted((d.code, "".join(d.message.split())) for d in result.diagnostics)


def _without_locations(value):
    if isinstance(value, str):  # a location quoted in text (the live-update record's reasons)
        return LOCATION.sub("<location>", value)
    if isinstance(value, dict):
        return {k: _without_locations(v) for k, v in value.items() if k not in ("location", "pipe_sha256")}
    if isinstance(value, list):
        return [_without_locations(v) for v in value]
    return value


def _assert_same_meaning(path: Path, text: str) -> str | None:
    """The formatted text, after checking it; None for text the compiler does not parse
    either (the formatter raises the compiler's error)."""
    try:
        formatted = format_text(text, str(path))
    except PipeSyntaxError as error:
        assert error.code in {code for code, _ in _meaning(path, text)[1]}
        return None
    assert format_text(formatted, str(path)) == formatted, f"{path}: formatting twice changes the text"
    assert _meaning(path, formatted) == _meaning(path, text), f"{path}: formatting changed the plan or findings"
    return formatted


@pytest.mark.parametrize("path", [p for p in SHIPPED if p.name not in UNPARSABLE], ids=lambda p: p.name)
def test_shipped_files_are_formatted_and_keep_their_meaning(path):
    text = path.read_text(encoding="utf-8")
    assert _assert_same_meaning(path, text) == text, \
        f"{path.relative_to(ROOT)} is not formatted: run `pipec format {path.relative_to(ROOT)}`"


@pytest.mark.parametrize("block", PIPE_BLOCKS, ids=lambda b: b.id)
def test_doc_examples_are_formatted_and_keep_their_meaning(block):
    folder, named = _home(block)
    path = named or folder / "example.pipe"
    assert _assert_same_meaning(path, block.text) == block.text, \
        f"{block.id}: the example is not in the layout of `pipec format`"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("format")
    shutil.copy(test_fuzz.KERNELS, folder / "kernels.cu")
    return folder


def _unformatted(text: str) -> str:
    """The same tokens (of a generated program: no comments, no line breaks in lists) on one
    line, squeezed: the layout must not depend on any of that."""
    return " ".join(text.split()).replace(", ", ",").replace(" = ", "=")


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=test_fuzz.programs())
def test_generated_programs_keep_their_meaning(workspace, text):
    path = workspace / "input.pipe"
    formatted = _assert_same_meaning(path, text)
    if formatted is not None:
        assert _assert_same_meaning(path, _unformatted(text)) == formatted


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=test_fuzz.mutated(test_fuzz.programs()))
def test_mutated_programs_keep_their_meaning_or_fail_as_the_compiler_does(workspace, data):
    _assert_same_meaning(workspace / "input.pipe", data.decode("utf-8", errors="replace"))


LAYOUT = [
    # spacing, one statement a line, blocks indented
    ("const A=1+2*-B\nbuffer x : f32 [ A,4 ]=uniform( -1.0,1.0,seed = 2 )\nstep{fill x=0 copy x->x}\n",
     "const A = 1 + 2 * -B\nbuffer x: f32[A, 4] = uniform(-1.0, 1.0, seed=2)\nstep {\n    fill x = 0\n"
     "    copy x -> x\n}\n"),
    # blank-line groups kept (one at most), none at a block's edges, `{}` and `} else {`
    ("const A = 1\n\n\n\nconst B = 2\ngraph g {\n\n}\nstep {\n\n    if A { g } else if B {} else { g }\n\n}\n",
     "const A = 1\n\nconst B = 2\ngraph g {}\nstep {\n    if A {\n        g\n    } else if B {} else {\n"
     "        g\n    }\n}\n"),
    # trailing comments of consecutive lines aligned, a continuation under its comment kept
    ("const A = 1 # one\nconst LONGER = 22       # two\n" + " " * 24 + "# two, continued\n\nconst C = 3   # alone\n",
     "const A = 1        # one\nconst LONGER = 22  # two\n                   # two, continued\n\n"
     "const C = 3  # alone\n"),
    # comments inside a statement break its line there
    ("step {\n    # first\n    launch k<<<1, 1>>>(in a, # the input\n    out b)\n}\n",
     "step {\n    # first\n    launch k<<<1, 1>>>(\n        in a,  # the input\n        out b)\n}\n"),
    # slices, attributes, ranges, switch
    ("step { for i in 0..N { gemm c[i:i+1] = a.T @ b } switch x { case 1 { g } } }\n",
     "step {\n    for i in 0 .. N {\n        gemm c[i : i + 1] = a.T @ b\n    }\n    switch x {\n"
     "        case 1 {\n            g\n        }\n    }\n}\n"),
]


@pytest.mark.parametrize(("text", "expected"), LAYOUT)
def test_layout(text, expected):
    assert format_text(text) == expected
    assert format_text(expected) == expected


def test_a_long_list_is_wrapped_and_its_author_s_groups_are_kept():
    args = ", ".join(f"in buffer_number_{i}" for i in range(12))
    formatted = format_text(f"step {{ launch k<<<1, 1>>>({args}) }}\n")
    lines = formatted.splitlines()
    assert lines[1] == "    launch k<<<1, 1>>>("
    assert all(len(line) <= WIDTH for line in lines)
    assert lines[-2].endswith("in buffer_number_11)") and lines[2].startswith("        in buffer_number_0,")
    grouped = "step {\n    launch k<<<1, 1>>>(in a, in b,\n        out c, out d, 4)\n}\n"
    assert format_text(grouped) == "step {\n    launch k<<<1, 1>>>(\n        in a, in b,\n        out c, out d, 4)\n}\n"
    names = ", ".join(f"kernel_number_{i}" for i in range(8))
    wrapped = format_text(f'from "k.cu" import {names}\n').splitlines()
    assert wrapped[0].startswith('from "k.cu" import kernel_number_0,') and wrapped[1].startswith("    kernel_")


def test_a_suppression_keeps_its_line_or_the_formatter_refuses():
    kept = "step {\n    launch k<<<1,1>>>(in x)   # pipec: ignore[PC401] filled by the host\n}\n"
    assert format_text(kept).splitlines()[1] == "    launch k<<<1, 1>>>(in x)  # pipec: ignore[PC401] filled by the host"
    moved = "step { if A { fill x = 0 } }  # pipec: ignore[PC301] the host orders it\n"
    with pytest.raises(FormatError, match="put the comment on a line of its own"):
        format_text(moved)


def test_syntax_errors_are_the_compiler_s():
    with pytest.raises(PipeSyntaxError, match="the `{` of `step` is never closed"):
        format_text("step {\n")


def _run(args, stdin=""):
    out, err = io.StringIO(), io.StringIO()
    import contextlib
    import sys
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(args)
    finally:
        sys.stdin = old
    return status, out.getvalue(), err.getvalue()


def test_cli_check_diff_write_and_stdin(tmp_path):
    messy, tidy = tmp_path / "messy.pipe", tmp_path / "tidy.pipe"
    messy.write_text("const A=1\n")
    tidy.write_text("const A = 1\n")
    assert _run(["format", "--check", str(tmp_path)])[:2] == (1, f"Would reformat: {messy}\n"
                                                              "1 file would be reformatted, 1 file already formatted\n")
    status, out, err = _run(["format", "--diff", str(messy)])
    assert status == 1 and "-const A=1\n+const A = 1\n" in out and "1 file would be reformatted" in err
    assert messy.read_text() == "const A=1\n"
    assert _run(["format", str(tmp_path)])[:2] == (0, "1 file reformatted, 1 file left unchanged\n")
    assert messy.read_text() == "const A = 1\n"
    assert _run(["format", "--check", str(tmp_path)])[0] == 0
    assert _run(["format", "-"], stdin="const B=2\n")[:2] == (0, "const B = 2\n")
    assert _run(["format", "--check", "-"], stdin="const B=2\n")[0] == 1


def test_cli_errors_exit_2(tmp_path):
    broken = tmp_path / "broken.pipe"
    broken.write_text("step {\n")
    status, _, err = _run(["format", str(broken)])
    assert status == 2 and "broken.pipe:1:6: error[PC101]: the `{` of `step` is never closed" in err
    assert _run(["format", str(tmp_path / "missing.pipe")])[0] == 2
    (tmp_path / "empty").mkdir()
    status, _, err = _run(["format", str(tmp_path / "empty")])
    assert status == 2 and "no .pipe file in" in err


def test_the_example_of_docs_cli_md():
    from test_doc_examples import blocks

    document = blocks(ROOT / "docs" / "cli.md")
    before = next(i for i, b in enumerate(document) if b.language == "text" and b.text.startswith("const N=1<<20"))
    assert document[before + 1].language == "pipe"
    assert format_text(document[before].text) == document[before + 1].text
