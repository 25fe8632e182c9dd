"""What the compiler learns from a CUDA source: signatures as the compiler sees them, launch
bounds, annotations, and the PTX findings behind the atomics, fence and spin-wait rules."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipec.compiler import cache, kernels
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
    return kernels.analyze(path, (), get_toolchain("nvrtc"), "compute_90")


def test_signatures_as_the_compiler_sees_them(source):
    analysis = _analyze(source)
    scale = analysis.kernels["scale"]
    params = [(p["name"], p["kind"], p["dtype"], p["const"], p["write_only"]) for p in scale["params"]]
    assert params == [
        ("x", "pointer", "f32", True, False),     # REAL from a macro in an included header
        ("y", "pointer", "f32", False, True),     # `pipec: out y`
        ("n", "scalar", "u32", False, False),     # a typedef
        ("a", "scalar", "f64", False, False),
        ("count", "pointer", "i32", False, False),
        ("any", "pointer", None, False, False),   # void* binds any buffer
    ]
    assert scale["params"][0]["extent"]["text"] == "n * 4"
    assert scale["max_threads"] == 128
    assert analysis.mangled == ("_Z8cpp_namePi",)


def test_forbidden_instructions_map_to_source_lines(source):
    analysis = _analyze(source)
    lines = SOURCE.splitlines()

    def found(kernel):
        return {(f["rule"], lines[f["location"][1] - 1].strip()[:22]) for f in analysis.kernels[kernel]["findings"]}

    assert found("scale") == {("atomics", "__device__ inline void")}  # inside the inlined helper
    inlined = analysis.kernels["scale"]["findings"][0]["inlined_at"]
    assert lines[inlined[1] - 1].strip() == "bump(count);"
    assert found("spin") == {("spin-wait", "while (*flag == 0) { }"), ("fence-barrier", "__threadfence();")}
    assert found("reduce_red") == {("atomics", 'asm volatile("red.glob')}


def test_the_cache_key_follows_included_headers(source, tmp_path):
    toolchain = get_toolchain("nvrtc")
    first = kernels.source_key(source, (), toolchain, "compute_90")
    assert first == kernels.source_key(source, (), toolchain, "compute_90")
    (tmp_path / "defs.cuh").write_text("#define REAL double\n")
    assert kernels.source_key(source, (), toolchain, "compute_90") != first
    assert _analyze(source).kernels["scale"]["params"][0]["dtype"] == "f64"


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
    by_nvcc = kernels.analyze(source, (), get_toolchain("nvcc"), "compute_90")
    assert by_nvcc.kernels["scale"]["params"] == _analyze(source).kernels["scale"]["params"]
