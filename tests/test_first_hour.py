"""Stumbles of a first hour: `-D NAME=word` where a string was meant (the shell ate the
quotes: the finding says how to keep them), and `piperun` on a missing file, which says it as
`pipec` does."""

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
