"""A finding inside a graph body, or inside a file imported with bindings, names the use that
instantiated it (as rustc notes "in this macro invocation"): a label at each use it arose for,
with the values that use gives. The same finding from several uses is one finding listing them:
the mistake is one line of the body, which one edit fixes, and the uses it lists tell whether
the body is wrong for every use or only for some values."""

from __future__ import annotations

import json

from pipec.compiler import Settings, compile_file
from pipec.compiler.cli import main

KERNEL = '''/// pipec: extent x = n
extern "C" __global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
'''


def _findings(tmp_path, pipe: str):
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "p.pipe").write_text('from "k.cu" import scale\nbuffer x: f32[1024]\nbuffer y: f32[4096]\n' + pipe)
    return compile_file(tmp_path / "p.pipe", Settings(), until="check").diagnostics


def _labels(finding) -> list[tuple[int, str]]:
    return [(label.span.line, label.message) for label in finding.labels]


def test_a_finding_for_one_use_names_that_use_and_its_values(tmp_path):
    found = _findings(tmp_path, "graph g(k) {\n    launch scale<<<1, 256>>>(x[0 : k], y, 2.0, 256)\n}\n"
                                "step {\n    g(256)\n    g(2048)\n}\n")
    [finding] = found
    assert (finding.code, finding.message) == ("PC206", "slice [0:2048] of `x` lies outside its 1024 elements")
    assert finding.span.line == 5
    assert _labels(finding) == [(9, "in graph `g` used here with k = 2048")]


def test_the_same_finding_from_several_uses_is_one_finding_listing_them(tmp_path):
    found = _findings(tmp_path, "graph g(k) {\n    launch scale<<<1, 256>>>(x, y, k, UNDECLARED)\n}\n"
                                "step {\n    g(1.0)\n    g(2.0)\n}\n")
    [finding] = found
    assert finding.message == "undefined name `UNDECLARED`"
    assert _labels(finding) == [(8, "in graph `g` used here with k = 1.0"),
                                (9, "in graph `g` used here with k = 2.0")]


def test_a_use_in_a_loop_is_one_label_with_its_values(tmp_path):
    found = _findings(tmp_path, "graph g(k) {\n    launch scale<<<1, 256>>>(x[k * 512 : k * 512 + 256], y, 2.0, 256)\n}\n"
                                "step {\n    for i in 0 .. 8 {\n        g(i)\n    }\n}\n")
    # k = 2 .. 7 reach past the 1024 elements: one finding per message (each names its slice)
    assert [d.code for d in found] == ["PC206"] * 6
    assert _labels(found[0]) == [(9, "in graph `g` used here with k = 2")]


def test_one_message_from_many_values_lists_three_and_counts_the_rest(tmp_path):
    found = _findings(tmp_path, "graph g(k) {\n    launch scale<<<1, 256>>>(x[0 : 4096], y, 2.0, 256)\n}\n"
                                "step {\n    for i in 0 .. 6 {\n        g(i)\n    }\n}\n")
    [finding] = found
    assert _labels(finding) == [(9, "in graph `g` used here with k = 0; k = 1; k = 2 and 3 more")]


def test_nested_uses_are_named_outermost_first(tmp_path):
    found = _findings(tmp_path, "graph inner(k) {\n    launch scale<<<1, 256>>>(x[0 : k], y, 2.0, 256)\n}\n"
                                "graph outer(k) {\n    inner(k * 4)\n}\n"
                                "step {\n    outer(256)\n    outer(512)\n}\n")
    [finding] = found
    assert finding.message == "slice [0:2048] of `x` lies outside its 1024 elements"
    assert _labels(finding) == [(12, "in graph `outer` used here with k = 512"),
                                (8, "in graph `inner` used here with k = 2048")]


def test_a_check_names_the_use_whose_values_break_the_rule(tmp_path):
    # the extent `n` of x is the fourth argument: 4096 elements through a 1024-element buffer
    found = _findings(tmp_path, "graph g(n) {\n    launch scale<<<1, 256>>>(x, y, 2.0, n)\n}\n"
                                "step {\n    g(1024)\n    g(4096)\n}\n")
    [finding] = found
    assert finding.code == "PC310"
    assert _labels(finding)[-1] == (9, "in graph `g` used here with n = 4096")


def test_a_finding_in_a_file_imported_with_values_names_the_import(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lib.pipe").write_text("const N = 4\nbuffer w: f32[N - 8]\n")
    (tmp_path / "p.pipe").write_text('const N = 2\nimport "lib.pipe" with (N = N)\n')
    assert main(["--check", "--format", "json", "p.pipe"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert (finding["file"], finding["line"], finding["message"]) == ("lib.pipe", 2, "dimension -6 is not positive")
    assert [(label["file"], label["line"], label["message"]) for label in finding["labels"]] == [
        ("p.pipe", 2, "in `lib.pipe` imported here with N = 2")]
