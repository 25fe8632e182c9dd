"""`import "f.pipe" with (NAME = EXPR, ...)`: the importer's values for the constants an
imported file declares (docs/language.md, "Sharing declarations between files"; PC113)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.compiler.resolve.declare import STATEMENT_KEYWORDS
from pipec.dsl import PipeSyntaxError, SourceFile, parse

LIB = """const N = 4
const M = N * 2
buffer lib_buf: f32[M]
graph reduce_lib {
    if N > 1 {
        allreduce sum lib_buf
    }
}
"""


def _compile(tmp_path: Path, main: str, lib: str = LIB, **defines):
    (tmp_path / "lib.pipe").write_text(lib)
    path = tmp_path / "main.pipe"
    path.write_text(main)
    settings = override(load_settings(path), defines=tuple((k, str(v)) for k, v in defines.items()) or None)
    return compile_file(path, settings)


def _errors(compilation) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in compilation.diagnostics if d.severity.value == "error"]


def _shapes(compilation) -> dict[str, tuple[int, ...]]:
    return {b.name: tuple(b.shape) for b in compilation.plan.buffers}


STEP = "step {\n    fill lib_buf = 1.0\n}\n"


def test_unbound_constants_keep_the_files_values(tmp_path):
    compilation = _compile(tmp_path, 'import "lib.pipe"\n' + STEP)
    assert _errors(compilation) == [] and _shapes(compilation)["lib_buf"] == (8,)


def test_a_binding_replaces_the_value_and_what_is_derived_from_it(tmp_path):
    compilation = _compile(tmp_path, 'const K = 16\nimport "lib.pipe" with (N = K + 1)\n'
                           "buffer mine: f32[M]\n" + STEP)
    assert _errors(compilation) == []
    assert _shapes(compilation) == {"lib_buf": (34,), "mine": (34,)}


def test_define_on_the_importer_flows_through_a_binding(tmp_path):
    compilation = _compile(tmp_path, 'const N = 16\nimport "lib.pipe" with (N = N)\n' + STEP, N=3)
    assert _errors(compilation) == [] and _shapes(compilation)["lib_buf"] == (6,)


def test_a_define_of_an_imported_constant_is_refused_with_a_hint_to_bind_it(tmp_path):
    compilation = _compile(tmp_path, 'import "lib.pipe"\n' + STEP, N=3)
    assert [code for code, _ in _errors(compilation)] == ["PC103"]
    assert "bind it in the import, `with (N = N)`" in compilation.diagnostics[0].hint


def test_files_importing_one_file_with_the_same_values_share_one_instance(tmp_path):
    (tmp_path / "mid.pipe").write_text('import "lib.pipe" with (N = 2)\n')
    compilation = _compile(tmp_path, 'import "mid.pipe"\nimport "lib.pipe" with (N = 1 + 1)\n' + STEP)
    assert _errors(compilation) == [] and _shapes(compilation)["lib_buf"] == (4,)


def test_other_values_load_another_instance_whose_names_clash(tmp_path):
    compilation = _compile(tmp_path, 'import "lib.pipe" with (N = 2)\nimport "lib.pipe" with (N = 3)\n' + STEP)
    errors = _errors(compilation)
    assert ("PC104", "`lib_buf` is declared twice") in errors
    assert ("PC104", "`reduce_lib` is declared twice") in errors


@pytest.mark.parametrize("main, message", [
    ('import "lib.pipe" with (NN = 2)\n', "`lib.pipe` declares no constant `NN`"),
    ('import "lib.pipe" with (lib_buf = 2)\n', "declares `lib_buf` as a buffer, not a constant"),
    ('import "lib.pipe" with (WORLD_SIZE = 2)\n', "takes `WORLD_SIZE` from elsewhere"),
    ('import "lib.pipe" with (N = 2, N = 3)\n', "`N` is bound twice"),
    ('from "lib.pipe" import lib_buf with (NN = 2)\n', "`lib.pipe` declares no constant `NN`"),
    ('from "k.cu" import noop with (N = 2)\nimport "lib.pipe"\n', "is a kernel source"),
])
def test_bindings_that_bind_nothing(tmp_path, main, message):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void noop() {}\n')
    errors = _errors(_compile(tmp_path, main + STEP))
    assert [code for code, _ in errors] == ["PC113"] and message in errors[0][1], errors


@pytest.mark.parametrize("binding, code", [("RANK + 2", "PC603"), ("WORLD_SIZE", None)])
def test_a_rank_dependent_binding_is_rank_dependent_in_the_imported_file(tmp_path, binding, code):
    main = f'const PER_RANK = {binding}\nimport "lib.pipe" with (N = PER_RANK)\nstep {{\n    reduce_lib\n}}\n'
    errors = _errors(_compile(tmp_path, main, WORLD_SIZE=2))
    assert [c for c, _ in errors] == ([code] if code else []), errors


MM = "const N = 4\nbuffer c: f32[N]\ngraph mm {\n    fill c = 1.0\n}\n"


def test_a_buffer_used_only_through_an_imported_graph_is_in_the_plan(tmp_path):
    (tmp_path / "mid.pipe").write_text('import "lib.pipe" with (N = 8)\ngraph outer {\n    mm\n}\n')
    compilation = _compile(tmp_path, 'from "mid.pipe" import outer\nstep {\n    outer\n}\n', lib=MM)
    assert _errors(compilation) == [] and _shapes(compilation) == {"c": (8,)}


def test_two_instances_whose_buffers_share_a_name_are_refused_not_merged(tmp_path):
    main = ('from "lib.pipe" import mm with (N = 128)\nfrom "lib.pipe" import c with (N = 64)\n'
            "step {\n    mm\n    fill c = 2.0\n}\n")
    errors = _errors(_compile(tmp_path, main, lib=MM))
    assert errors == [("PC104", "two buffers named `c` from two instances of `lib.pipe` loaded with "
                                "other values (`N` 64 and 128)")], errors


@pytest.mark.parametrize("keyword", STATEMENT_KEYWORDS)
def test_a_graph_named_as_a_statement_keyword_is_refused_where_it_is_declared(tmp_path, keyword):
    declaration = f"buffer c: f32[4]\ngraph {keyword} {{\n    fill c = 1.0\n}}\n"
    errors = _errors(_compile(tmp_path, declaration + "step {\n    fill c = 2.0\n}\n"))
    assert errors == [("PC104", f"`{keyword}` is a statement keyword")], errors
    with pytest.raises(PipeSyntaxError):  # a call to it reads as the statement
        parse(SourceFile(Path("main.pipe"), declaration + f"step {{\n    {keyword}\n    fill c = 2.0\n}}\n"))
