"""What the compiler learns from a CUDA source: signatures as the compiler sees them, launch
bounds, annotations, and the PTX findings behind the atomics, fence and spin-wait rules."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from pipec.compiler import cache, kernel_analysis
from pipec.compiler.toolchain import CompileFailed, get_toolchain

SOURCE = r'''
#include "defs.cuh"
typedef unsigned int u32_t;
__device__ inline void bump(int* p) { atomicAdd(p, 1); }

/// Scales a vector.
/// pipec: extent x = n * 4
/// pipec: out y
extern "C" __global__ void __launch_bounds__(128) scale(const REAL* __restrict__ x, REAL* y,
                                                       u32_t n, double a, int* count, void* any) {
    int i = threadIdx.x;
    if (i < n) y[i] = a * x[i];
    bump(count);
}

extern "C" __global__ void spin(volatile int* flag, int* out) {
    while (*flag == 0) { }
    __threadfence();
    out[0] = 1;
}

extern "C" __global__ void reduce_red(float* total, float v) {
    asm volatile("red.global.add.f32 [%0], %1;" :: "l"(total), "f"(v));
}

__global__ void cpp_name(int* x) {}
'''


@pytest.fixture
def source(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "defs.cuh").write_text("#define REAL float\n")
    path = tmp_path / "k.cu"
    path.write_text(SOURCE)
    return path


def _analyze(path: Path):
    return kernel_analysis.analyze(path, (), get_toolchain("nvrtc"), "compute_90")


def test_signatures_as_the_compiler_sees_them(source):
    analysis = _analyze(source)
    scale = analysis.kernels["scale"]
    params = [(p.name, p.kind, p.dtype, p.const, p.write_only) for p in scale.params]
    assert params == [
        ("x", "pointer", "f32", True, False),     # REAL from a macro in an included header
        ("y", "pointer", "f32", False, True),     # `pipec: out y`
        ("n", "scalar", "u32", False, False),     # a typedef
        ("a", "scalar", "f64", False, False),
        ("count", "pointer", "i32", False, False),
        ("any", "pointer", None, False, False),   # void* binds any buffer
    ]
    assert scale.params[0].extent.text == "n * 4"
    assert scale.max_threads == 128
    assert analysis.mangled == ("_Z8cpp_namePi",)


def test_forbidden_instructions_map_to_source_lines(source):
    analysis = _analyze(source)
    lines = SOURCE.splitlines()

    def found(kernel):
        return {(f.rule, lines[f.reported_at.line - 1].strip()[:22]) for f in analysis.kernels[kernel].findings}

    assert found("scale") == {("atomics", "bump(count);")}  # the kernel's line that reaches the helper
    helper = analysis.kernels["scale"].findings[0]
    assert lines[helper.location.line - 1].startswith("__device__ inline void bump")
    assert [site.called for site in helper.reached_from] == [False]
    assert found("spin") == {("spin-wait", "while (*flag == 0) { }"), ("fence-barrier", "__threadfence();")}
    assert found("reduce_red") == {("atomics", 'asm volatile("red.glob')}


def test_the_cache_key_follows_included_headers(source, tmp_path):
    toolchain = get_toolchain("nvrtc")
    first = kernel_analysis.source_key(source, (), toolchain, "compute_90")
    assert first == kernel_analysis.source_key(source, (), toolchain, "compute_90")
    (tmp_path / "defs.cuh").write_text("#define REAL double\n")
    assert kernel_analysis.source_key(source, (), toolchain, "compute_90") != first
    assert _analyze(source).kernels["scale"].params[0].dtype == "f64"


def test_the_analysis_is_cached(source):
    first = _analyze(source)
    assert cache.load("analysis", first.key) is not None
    assert _analyze(source).kernels == first.kernels


def test_compile_errors_carry_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "broken.cu"
    path.write_text('extern "C" __global__ void k(int* x) { x[0] = undefined_name; }\n')
    with pytest.raises(CompileFailed) as info:
        _analyze(path)
    assert "undefined_name" in info.value.log and "broken.cu(1)" in info.value.log


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
def test_nvcc_gives_the_same_signatures(source):
    by_nvcc = kernel_analysis.analyze(source, (), get_toolchain("nvcc"), "compute_90")

    def comparable(params):  # where a store is found differs by compiler (line info of inlined atomics)
        return [replace(p, written_at=None, read_first=p.read_first and p.read_first.reached_from) for p in params]

    assert comparable(by_nvcc.kernels["scale"].params) == comparable(_analyze(source).kernels["scale"].params)


# Every form a C parameter can take: (declaration, kind, element type, const, C type).
PARAMETER_FORMS = [
    ("float* p", "pointer", "f32", False, "float*"),
    ("const float* p", "pointer", "f32", True, "const float*"),
    ("float const* p", "pointer", "f32", True, "const float*"),
    ("float* const p", "pointer", "f32", False, "float*"),
    ("const float* const p", "pointer", "f32", True, "const float*"),
    ("float* __restrict__ p", "pointer", "f32", False, "float*"),
    ("const float* __restrict__ p", "pointer", "f32", True, "const float*"),
    ("const float* const __restrict__ p", "pointer", "f32", True, "const float*"),
    ("volatile int* p", "pointer", "i32", False, "int*"),
    ("const volatile int* p", "pointer", "i32", True, "const int*"),
    ("void* p", "pointer", None, False, "void*"),
    ("const void* p", "pointer", None, True, "const void*"),
    ("float p[4]", "pointer", "f32", False, "float*"),           # arrays decay
    ("const double p[]", "pointer", "f64", True, "const double*"),
    ("fptr p", "pointer", "f32", False, "float*"),               # typedef'd pointers
    ("cfptr p", "pointer", "f32", True, "const float*"),
    ("const fptr p", "pointer", "f32", False, "float*"),         # the pointer is const, not the floats
    ("float** p", "pointer", "f32", False, "float**"),           # a table of addresses; was reported const
    ("const float** p", "pointer", "f32", False, "const float**"),
    ("float* const* p", "pointer", "f32", True, "float* const*"),  # the kernel cannot write the table
    ("const float* const* p", "pointer", "f32", True, "const float* const*"),
    ("float** __restrict__ p", "pointer", "f32", False, "float**"),
    ("float*** p", "unsupported", None, False, "float***"),
    ("float& p", "unsupported", None, False, "a type pipec cannot bind"),
    ("const float& p", "unsupported", None, False, "a type pipec cannot bind"),
    ("Pair p", "unsupported", None, False, "a type pipec cannot bind"),
    ("Pair* p", "unsupported", None, False, "struct*"),
    ("const Pair* p", "unsupported", None, False, "const struct*"),
    ("Color p", "unsupported", None, False, "a type pipec cannot bind"),
    ("bool p", "scalar", "bool", False, "bool"),
    ("char p", "scalar", "i8", False, "char"),
    ("signed char p", "scalar", "i8", False, "signed char"),
    ("unsigned char p", "scalar", "u8", False, "unsigned char"),
    ("short p", "scalar", "i16", False, "short"),
    ("unsigned short p", "scalar", "u16", False, "unsigned short"),
    ("int p", "scalar", "i32", False, "int"),
    ("const int p", "scalar", "i32", False, "int"),
    ("unsigned p", "scalar", "u32", False, "unsigned int"),
    ("long p", "scalar", "i64", False, "long"),
    ("unsigned long p", "scalar", "u64", False, "unsigned long"),
    ("long long p", "scalar", "i64", False, "long long"),
    ("unsigned long long p", "scalar", "u64", False, "unsigned long long"),
    ("float p", "scalar", "f32", False, "float"),
    ("double p", "scalar", "f64", False, "double"),
    ("u32_t p", "scalar", "u32", False, "unsigned int"),
]


@pytest.fixture(scope="module")
def parameter_forms(tmp_path_factory):
    folder = tmp_path_factory.mktemp("forms")
    kernels_text = "\n".join(
        f'extern "C" __global__ void form{i}({decl}) {{}}' for i, (decl, *_) in enumerate(PARAMETER_FORMS)
    )
    path = folder / "forms.cu"
    path.write_text("typedef float* fptr;\ntypedef const float* cfptr;\ntypedef unsigned int u32_t;\n"
                    "struct Pair { float a, b; };\nenum Color { RED, GREEN };\n" + kernels_text + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PIPEC_NO_CACHE", "1")
        return _analyze(path)


@pytest.mark.parametrize("index", range(len(PARAMETER_FORMS)), ids=[f[0] for f in PARAMETER_FORMS])
def test_every_parameter_form_is_encoded(parameter_forms, index):
    _, kind, dtype, const, ctype = PARAMETER_FORMS[index]
    (param,) = parameter_forms.kernels[f"form{index}"].params
    assert (param.name, param.kind, param.dtype, param.const, param.ctype) == ("p", kind, dtype, const, ctype)
    assert param.table == (kind == "pointer" and ctype.count("*") == 2)  # a pointer to pointers


def _cuda_headers() -> Path | None:
    """A CUDA toolkit's include folder with the half-precision headers, if one is installed."""
    roots = [Path(os.environ["CUDA_HOME"])] if os.environ.get("CUDA_HOME") else []
    roots += sorted(Path("/usr/local").glob("cuda*"), reverse=True)
    return next((r / "include" for r in roots if (r / "include" / "cuda_bf16.h").is_file()), None)


@pytest.mark.skipif(_cuda_headers() is None, reason="no CUDA toolkit headers for __half")
def test_half_precision_parameters(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_NO_CACHE", "1")
    path = tmp_path / "half.cu"
    path.write_text("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
                    'extern "C" __global__ void k(__half a, const __half* b, __nv_bfloat16 c, '
                    "__nv_bfloat16* const* d) {}\n")
    analysis = kernel_analysis.analyze(path, (_cuda_headers(),), get_toolchain("nvrtc"), "compute_90")
    assert [(p.kind, p.dtype, p.const, p.ctype) for p in analysis.kernels["k"].params] == [
        ("scalar", "f16", False, "__half"),
        ("pointer", "f16", True, "const __half*"),
        ("scalar", "bf16", False, "__nv_bfloat16"),
        ("pointer", "bf16", True, "__nv_bfloat16* const*"),  # a table of addresses of bf16 buffers
    ]


def test_a_kernel_declared_by_a_macro_keeps_its_names_and_annotations(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "macro.cu"
    path.write_text('#define KERNEL(name) extern "C" __global__ void name(float* x, int n) {}\n'
                    "/// pipec: extent x = n\n/// pipec: out x\nKERNEL(fill_x)\n")
    (param, count) = _analyze(path).kernels["fill_x"].params
    assert (param.name, param.write_only, param.extent.text, count.name) == ("x", True, "n", "n")


def test_a_stale_cache_entry_is_recomputed(source):
    first = _analyze(source)
    cache.store("analysis", first.key, b'{"kernels": {"scale": {}}, "mangled": []}')  # format 3
    assert _analyze(source).kernels == first.kernels
    assert cache.load("analysis", first.key) != b'{"kernels": {"scale": {}}, "mangled": []}'
