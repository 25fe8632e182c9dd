"""Stumbles of a first hour: `-D NAME=word` where a string was meant (the shell ate the
quotes: the finding says how to keep them), `piperun` on a missing file, which says it as
`pipec` does, a line left unfinished (told at that line, not at the next), an element type
spelt as in C, a kernel its source declares that the import does not list."""

from __future__ import annotations

import json

import pytest

from pipec.compiler.cli import main
from pipec.runtime.cli import main as piperun


def test_a_bare_word_for_a_string_constant_gets_the_quoting_hint(tmp_path, capsys):
    pipe = tmp_path / "p.pipe"
    pipe.write_text('const MODE = "slow"\n')
    assert main(["--check", "--format", "json", str(pipe), "-D", "MODE=fast"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert finding["code"] == "PC103" and finding["message"] == "undefined name `fast`"
    assert finding["hint"] == ("`-D MODE=fast` reads `fast` as a name; if you meant the string, quote it "
                               "past the shell: -D MODE='\"fast\"'")
    assert main(["--check", str(pipe), "-D", 'MODE="fast"']) == 0


def test_a_misspelt_name_in_a_larger_definition_gets_the_spelling_hint(tmp_path, capsys):
    pipe = tmp_path / "p.pipe"
    pipe.write_text("const BASE = 4\nconst N = 8\n")
    assert main(["--check", "--format", "json", str(pipe), "-D", "N=BASS * 2"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert finding["hint"] == "a name with a similar spelling exists: `BASE`"


@pytest.mark.parametrize("command", [main, piperun], ids=["pipec", "piperun"])
def test_a_missing_file_is_one_line_naming_it(command, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert command(["missing.pipe"]) == 2
    err = capsys.readouterr().err
    assert err.endswith("error: cannot read missing.pipe: No such file or directory\n") and err.count("\n") == 1


def test_messages_count_one_in_the_singular_and_need_no_article_before_a_type(tmp_path, capsys):
    (tmp_path / "k.cu").write_text('/// pipec: extent x = n\nextern "C" __global__ void k(float* x, unsigned char n) {}\n')
    pipe = tmp_path / "p.pipe"
    pipe.write_text('from "k.cu" import k\nbuffer a: f32[2]\nbuffer b: f32[1]\n'
                    "step {\n    copy b -> a[0 : 2]\n    launch k<<<1, 1>>>(a, 300)\n}\n")
    assert main(["--check", "--format", "json", str(pipe)]) == 1
    found = {f["code"]: f for f in json.loads(capsys.readouterr().out)}
    assert found["PC303"]["message"] == "copy of 1 element into 2"
    assert found["PC204"]["hint"] == "pass a value that fits `unsigned char`"


def _only_finding(tmp_path, capsys, pipe: str) -> dict:
    (tmp_path / "k.cu").write_text('extern "C" __global__ void a(float* x) {}\nextern "C" __global__ void b(float* x) {}\n')
    (tmp_path / "p.pipe").write_text(pipe)
    main(["--check", "--format", "json", str(tmp_path / "p.pipe")])
    [finding] = json.loads(capsys.readouterr().out)
    return finding


def test_an_expression_left_unfinished_at_a_line_s_end_is_told_there(tmp_path, capsys):
    finding = _only_finding(tmp_path, capsys, "const BLOCK = 256 +\n\nbuffer x: f32[BLOCK]\n")
    assert (finding["line"], finding["column"]) == (1, 19)
    assert finding["message"] == "`+` at the end of line 1 has no operand after it"
    assert "the `buffer` of the next line was read as its operand" in finding["hint"]


def test_a_declaration_left_unfinished_is_told_at_its_line(tmp_path, capsys):
    finding = _only_finding(tmp_path, capsys, "buffer x: f32   # the shape forgotten\nbuffer y: f32[4]\n")
    assert (finding["line"], finding["column"]) == (1, 11)
    assert finding["message"] == "line 1 ends before its declaration does: expected `[` after `f32`"


def test_an_element_type_spelt_as_in_c_is_named_as_the_language_spells_it(tmp_path, capsys):
    finding = _only_finding(tmp_path, capsys, "buffer x: float[4]\n")
    assert finding["hint"] == "`float` is the C spelling; buffers are declared `f32`"
    assert [f["title"] for f in finding["fixes"]] == ["Change to `f32`"]


def test_a_kernel_its_source_declares_but_the_import_leaves_out_is_to_be_imported(tmp_path, capsys):
    finding = _only_finding(tmp_path, capsys, 'from "k.cu" import a\nbuffer x: f32[4]\n'
                                              "step {\n    launch b<<<1, 4>>>(x)\n}\n")
    assert finding["message"] == "undefined kernel `b`"
    assert finding["hint"] == "`k.cu` declares `b`: add it to the names its import lists"
    [fix] = finding["fixes"]
    assert fix["title"] == "Import `b`" and fix["edits"][0]["text"] == ", b" and fix["edits"][0]["column"] == 21
