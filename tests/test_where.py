"""Where a finding points: the kernel's own line that reaches the instruction, through every
inlined function (`.loc ... inlined_at` chains) and every call, with the lines between as notes;
the compiler's own headers left out of the chain. The corpus (tests/test_soundness_corpus.py)
checks the lines NVRTC and nvcc give for real sources; this file the parts one by one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness import compile_fixture
from pipec.compiler import kernel_records, kernel_analysis, ptx
from pipec.compiler.toolchain import CompileFailed, CompileRequest, get_toolchain

# Two levels of inlining into a helper that is not inlined, which the kernel calls; the same
# header line is inlined once more straight into the kernel, after the helper's chain.
CHAINED = """.version 8.8
.target sm_90
.address_size 64
.func helper(
  .param .b64 helper_param_0
)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  .loc 1 7 0
  ld.param.u64 %rd1, [helper_param_0];
  .loc 1 8 5
  .loc 1 5 5, function_name $L__info_string0, inlined_at 1 8 5
  .loc 1 2 5, function_name $L__info_string1, inlined_at 1 5 5
  atom.global.add.u32 %r1, [%rd1], 1;
  ret;
}
.visible .entry k(
  .param .u64 k_param_0
)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;
  .loc 2 2 0
  ld.param.u64 %rd1, [k_param_0];
  .loc 2 3 5
  .loc 1 5 5, function_name $L__info_string0, inlined_at 2 3 5
  .loc 1 2 5, function_name $L__info_string1, inlined_at 1 5 5
  red.global.add.u32 [%rd1], 1;
  .loc 2 4 5
  {
  .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  call.uni
  helper,
  (
  param0
  );
  }
  .loc 2 5 1
  ret;
}
  .file 1 "/src/h.cuh"
  .file 2 "/src/k.cu"
"""


def _lines(location: ptx.Location) -> list[tuple[str, int, bool]]:
    return [(Path(line.file).name, line.line, line.called) for line in location.chain()]


def test_an_inlined_line_carries_the_whole_chain_and_a_call_continues_it():
    findings = ptx.parse(CHAINED).findings("k")
    assert [_lines(f.location) for f in findings] == [
        [("h.cuh", 2, False), ("h.cuh", 5, False), ("k.cu", 3, False)],  # inlined twice into k
        [("h.cuh", 2, False), ("h.cuh", 5, False), ("h.cuh", 8, True), ("k.cu", 4, False)],  # via the call
    ]


def test_a_store_in_a_callee_is_located_through_the_call():
    only_through_the_call = CHAINED.replace("  red.global.add.u32 [%rd1], 1;\n", "")
    written, where = ptx.parse(only_through_the_call).writes("k")[0]
    assert written is ptx.Written.YES
    assert _lines(where) == [("h.cuh", 2, False), ("h.cuh", 5, False), ("h.cuh", 8, True), ("k.cu", 4, False)]


def _function(name: str, calls: list[tuple[str, int]], body: str = "") -> str:
    lines = [f".func {name}()", "{"]
    for callee, line in calls:
        lines += [f"  .loc 1 {line} 5", f"  call.uni {callee}, ();"]
    return "\n".join([*lines, body, "  ret;", "}"])


def test_a_function_reached_twice_is_reported_through_the_shortest_chain():
    text = "\n".join([
        _function("b", [], "  .loc 1 20 5\n  atom.global.add.u32 %r1, [%rd1], 1;"),
        _function("a", [("b", 10)]),
        _function("k", [("a", 3), ("b", 4)]).replace(".func k()", ".visible .entry k()"),
        '  .file 1 "k.cu"',
    ])
    [finding] = ptx.parse(text).findings("k")
    assert [line.line for line in finding.location.chain()] == [20, 4]


def test_a_line_missing_on_either_side_of_a_call_keeps_the_other():
    no_line_in_the_callee = "\n".join([
        _function("b", [], "  atom.global.add.u32 %r1, [%rd1], 1;"),
        _function("k", [("b", 4)]).replace(".func k()", ".visible .entry k()"), '  .file 1 "k.cu"'])
    [finding] = ptx.parse(no_line_in_the_callee).findings("k")
    assert [(line.line, line.called) for line in finding.location.chain()] == [(4, False)]
    no_line_at_the_call = no_line_in_the_callee.replace("  .loc 1 4 5\n", "").replace(
        "  atom.global", "  .loc 1 20 5\n  atom.global")
    [finding] = ptx.parse(no_line_at_the_call).findings("k")
    assert [line.line for line in finding.location.chain()] == [20]


class RecordedPtx:
    """A toolchain that hands back recorded PTX, with a folder of headers of its own."""

    name, version = "recorded", "1"

    def __init__(self, text: str, system: Path) -> None:
        self.text, self.system_headers = text, (system,)

    def compile(self, request: CompileRequest) -> bytes:
        return self.text.encode()


def test_records_skip_the_compilers_own_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "k.cu"
    source.write_text('extern "C" __global__ void k(unsigned int* p) { }\n')
    # nvcc's `atomicAdd` is a function of the toolkit's device_atomic_functions.hpp.
    text = CHAINED.replace("  .loc 1 2 5, function_name $L__info_string1, inlined_at 1 5 5\n  red",
                           "  .loc 1 2 5, function_name $L__info_string1, inlined_at 1 5 5\n"
                           "  .loc 3 112 3, function_name $L__info_string2, inlined_at 1 2 5\n  red")
    text = text.replace('"/src/k.cu"', f'"{source}"') + f'  .file 3 "{tmp_path}/cuda/include/atomics.hpp"\n'
    analysis = kernel_analysis.analyze(source, (), RecordedPtx(text, tmp_path / "cuda"), "compute_90")
    inlined, called = analysis.kernels["k"].findings
    assert (Path(inlined.location.file).name, inlined.location.line) == ("h.cuh", 2)
    assert [(site.location.line, site.called) for site in inlined.reached_from] == [(5, False), (3, False)]
    assert [(site.location.line, site.called) for site in called.reached_from] == [(5, False), (8, False), (4, True)]
    assert (inlined.reported_at.line, called.reported_at.line) == (3, 4)


def test_the_chain_survives_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "k.cu"
    source.write_text('extern "C" __global__ void k(unsigned int* p) { }\n')
    toolchain = RecordedPtx(CHAINED.replace('"/src/k.cu"', f'"{source}"'), tmp_path / "cuda")
    first = kernel_analysis.analyze(source, (), toolchain, "compute_90")
    stored = kernel_records.from_json(source, first.key, kernel_records.to_json(first.kernels, first.mangled))
    assert stored is not None and stored.kernels == first.kernels
    assert [site.called for site in stored.kernels["k"].findings[1].reached_from] == [False, False, True]


CORPUS = Path(__file__).parent / "corpus" / "soundness"


def test_the_diagnostic_points_at_the_kernel_with_the_header_as_a_note(tmp_path):
    shutil.copytree(CORPUS / "helpers", tmp_path / "helpers")  # a link out of the project: PC110
    shutil.copy(CORPUS / "atomic_header_subfolder.cu", tmp_path / "k.cu")
    pipe = tmp_path / "p.pipe"
    pipe.write_text('from "k.cu" import sum\nbuffer x: f32[256]\nbuffer t: f32[1]\n'
                    "step {\n    launch sum<<<1, 256>>>(in x, t, 256)\n}\n")
    actual, result = compile_fixture(pipe)
    assert actual == {("k.cu", 4, "PC305")}
    [diagnostic] = result.diagnostics
    launched, itself = diagnostic.labels
    assert launched.message == "launched in the step here"
    assert (Path(itself.span.source.path).name, itself.span.line) == ("atomic_ops.cuh", 3)
    assert itself.message.startswith("`atom.global.add.f32") and itself.message.endswith("itself, in `atomic_ops.cuh`")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_nvcc_names_the_real_file(tmp_path):
    source = tmp_path / "broken.cu"
    request = CompileRequest("\nint x = ;\n", str(source), (), "compute_90", "ptx")
    with pytest.raises(CompileFailed) as failure:
        get_toolchain("nvcc").compile(request)
    assert f"{source}(2)" in failure.value.log


def test_a_write_through_a_helper_notes_the_store():
    _, result = compile_fixture(CORPUS / "in_bound_writes.pipe")
    [helper] = [d for d in result.diagnostics if "store_via_helper" in d.message]
    labels = [(label.span.line, label.message) for label in helper.labels]
    assert labels == [(13, "the kernel writes through it here"),
                      (3, "the store itself, in `in_bound_kernels.cu`")]
