"""Kernel imports in the resolver: analysis records become model kernels whose parameters the
checks bind, through every way a source can declare them."""

from __future__ import annotations

import pytest

from stage_helpers import check_text

NESTED = r'''
extern "C" __global__ void gather(float** rows, float* out) {}
extern "C" __global__ void gather_const(const float* const* rows, float* out) {}
'''

MACROS = r'''
#define SCALE(name) extern "C" __global__ void name(float* x, int n) {}
#define PASTED(suffix) extern "C" __global__ void scale_##suffix(float* x, int n) {}
/// pipec: extent x = n
/// pipec: out x
SCALE(scale_named)
/// pipec: extent x = n
PASTED(f32)
'''


@pytest.fixture
def kernel_file(tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_CACHE_DIR", str(tmp_path / "cache"))

    def write(text: str):
        path = tmp_path / "k.cu"
        path.write_text(text)
        return path
    return write


def _codes(result) -> list[str]:
    return sorted(d.code for d in result.diagnostics)


@pytest.mark.parametrize("kernel", ["gather", "gather_const"])
def test_a_pointer_to_pointers_binds_a_table_of_addresses_and_nothing_else(kernel_file, kernel):
    path = kernel_file(NESTED)
    result = check_text(f"""
        buffer rows: f32[4]
        buffer out: f32[4] mapped
        step {{ launch {kernel}<<<1, 4>>>(in rows, out out) }}
    """, header=f'from "{path}" import {kernel}\n')
    assert _codes(result) == ["PC203"]
    result = check_text(f"""
        buffer rows: f32[4]
        buffer table: ptr[1] = addresses(rows)
        buffer out: f32[4] mapped
        step {{ launch {kernel}<<<1, 4>>>(table, out out) }}
    """, header=f'from "{path}" import {kernel}\n')
    assert _codes(result) == []


def test_a_kernel_declared_by_a_macro_keeps_its_annotations(kernel_file):
    path = kernel_file(MACROS)
    result = check_text("""
        buffer x: f32[4] mapped
        step { launch scale_named<<<1, 8>>>(x, 8) }
    """, header=f'from "{path}" import scale_named\n')
    assert _codes(result) == ["PC310"]  # the extent above the macro's use applies
    assert result.program.kernels["scale_named"].params[0].write_only


def test_a_pasted_kernel_name_is_reported_once_per_import(kernel_file):
    path = kernel_file(MACROS)
    result = check_text("""
        buffer x: f32[4] mapped
        step { launch scale_f32<<<1, 8>>>(x, 8) }
    """, header=f'from "{path}" import scale_f32\n')
    assert _codes(result) == ["PC109"]  # and no PC310: the extent cannot be seen
    assert [p.name for p in result.program.kernels["scale_f32"].params] == ["arg0", "arg1"]
