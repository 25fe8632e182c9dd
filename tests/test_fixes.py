"""The edits that fix a finding where one is obvious, as `pipec --format json` gives them (the
language server's quick fixes are the same data, tests/test_lsp.py drives them): the missing
arguments of a launch or a graph use bound to placeholders, extra ones removed."""

from __future__ import annotations

import json

import pytest

from pipec.compiler.cli import main

KERNEL = 'extern "C" __global__ void k(const float* x, float* y, int* flags, float a, int n) {}\n'


def _fixed(tmp_path, capsys, monkeypatch, pipe: str) -> tuple[dict, str]:
    """The one finding of `pipe`, and its text after the finding's one fix."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "p.pipe").write_text(pipe)
    main(["--check", "--format", "json", "p.pipe"])
    [finding] = json.loads(capsys.readouterr().out)
    [fix] = finding["fixes"]
    starts = [0] + [i + 1 for i, c in enumerate(pipe) if c == "\n"]
    text = pipe
    for edit in sorted(fix["edits"], key=lambda e: (e["line"], e["column"]), reverse=True):
        assert edit["file"] == "p.pipe"
        start = starts[edit["line"] - 1] + edit["column"] - 1
        end = starts[edit["end_line"] - 1] + edit["end_column"] - 1
        text = text[:start] + edit["text"] + text[end:]
    return {**finding, "fix": fix["title"]}, text


HEAD = 'from "k.cu" import k\nconst N = 64\nbuffer a: f32[64]\nbuffer b: f32[64]\nbuffer flags: i32[64]\n'


@pytest.mark.parametrize("step, title, fixed", [
    # y: the one f32 buffer the launch does not bind yet; flags: the one i32 buffer; n: the
    # constant N; a: nothing fits, its name
    ("launch k<<<1, 64>>>(in a)", "Bind `b`, `flags`, `a`, `N`", "launch k<<<1, 64>>>(in a, b, flags, a, N)"),
    # x and y: two f32 buffers could be either, their names
    ("launch k<<<1, 64>>>()", "Bind `x`, `y`, `flags`, `a`, `N`", "launch k<<<1, 64>>>(x, y, flags, a, N)"),
    ("launch k<<<1, 64>>>(in a, out b, flags, 1.0, N, 3, 4)", "Remove the extra arguments",
     "launch k<<<1, 64>>>(in a, out b, flags, 1.0, N)"),
])
def test_a_launch_with_the_wrong_argument_count(tmp_path, capsys, monkeypatch, step, title, fixed):
    finding, text = _fixed(tmp_path, capsys, monkeypatch, HEAD + f"step {{\n    {step}\n}}\n")
    assert (finding["code"], finding["fix"]) == ("PC201", title)
    assert text == HEAD + f"step {{\n    {fixed}\n}}\n"


def test_without_a_constant_of_its_name_a_scalar_gets_the_parameter_s_name(tmp_path, capsys, monkeypatch):
    head = 'from "k.cu" import k\nbuffer a: f32[64]\nbuffer b: f32[64]\nbuffer flags: i32[64]\n'
    finding, text = _fixed(tmp_path, capsys, monkeypatch, head + "step {\n    launch k<<<1, 64>>>(in a, out b)\n}\n")
    assert finding["fix"] == "Bind `flags`, `a`, `n`"  # no constant N here: the parameter's name
    assert "launch k<<<1, 64>>>(in a, out b, flags, a, n)" in text


@pytest.mark.parametrize("use, title, fixed", [
    ("g", "Bind `N`, `width`", "g(N, width)"),
    ("g()", "Bind `N`, `width`", "g(N, width)"),
    ("g(1)", "Bind `width`", "g(1, width)"),
    ("g(1, 2, 3, 4)", "Remove the extra arguments", "g(1, 2)"),
    ("h(1)", "Remove the extra argument", "h()"),
])
def test_a_graph_use_with_the_wrong_argument_count(tmp_path, capsys, monkeypatch, use, title, fixed):
    head = HEAD + "graph g(n, width) {\n    fill a[0 : n] = width\n}\ngraph h {\n    fill b = 0\n}\n"
    finding, text = _fixed(tmp_path, capsys, monkeypatch, head + f"step {{\n    {use}\n}}\n")
    assert (finding["code"], finding["fix"]) == ("PC201", title)
    assert text == head + f"step {{\n    {fixed}\n}}\n"


@pytest.mark.parametrize("pipe, code, title, fixed", [
    ("step {\n    launch k<<<1, 64>> (x, y, flags, 1.0, 4)\n}\n", "PC101", "Change to `>>>`",
     "step {\n    launch k<<<1, 64>>> (x, y, flags, 1.0, 4)\n}\n"),
    ('buffer x: f3[4]\n', "PC107", "Change to `f32`", "buffer x: f32[4]\n"),
    ('buffer x: f32[4] = unint\n', "PC107", "Change to `uninit`", "buffer x: f32[4] = uninit\n"),
    ('buffer x: f32[4] = unifrom(0.0, 1.0)\n', "PC107", "Change to `uniform`",
     "buffer x: f32[4] = uniform(0.0, 1.0)\n"),
    ('from "k.cu" import kk\n', "PC106", "Change to `k`", 'from "k.cu" import k\n'),
    ("option lane = 4\n", "PC108", "Change to `lanes`", "option lanes = 4\n"),
    # the suppression alone on its line goes with its line; trailing, with the blanks before it
    ("buffer x: f32[4]\n# pipec: ignore[PC402] kept for later\nbuffer y: f32[4]\nstep {\n    fill x = 1\n"
     "    fill y = 1\n}\n", "PC001", "Remove the suppression",
     "buffer x: f32[4]\nbuffer y: f32[4]\nstep {\n    fill x = 1\n    fill y = 1\n}\n"),
    ("buffer x: f32[4]  # pipec: ignore[PC402] kept for later\nstep {\n    fill x = 1\n}\n", "PC001",
     "Remove the suppression", "buffer x: f32[4]\nstep {\n    fill x = 1\n}\n"),
    ('from "k.cu" import k\nwaive atomics for k: "it sums"\nbuffer x: f32[4]\nstep {\n    fill x = 1\n}\n',
     "PC003", "Remove the waiver", 'from "k.cu" import k\nbuffer x: f32[4]\nstep {\n    fill x = 1\n}\n'),
])
def test_other_findings_with_one_obvious_edit(tmp_path, capsys, monkeypatch, pipe, code, title, fixed):
    finding, text = _fixed(tmp_path, capsys, monkeypatch, pipe)
    assert (finding["code"], finding["fix"]) == (code, title)
    assert text == fixed
