"""Programmatic dependent launch in hand-written PTX (compiler/ptx/pdl.py): whether
`griddepcontrol.wait` ends every path, what a kernel touches before it (through calls, loops and
early returns), and where it triggers; and the same read from NVRTC's PTX of shipped kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import kernel_analysis, kernel_records, ptx
from pipec.compiler.config import SHIPPED_KERNELS
from pipec.compiler.ptx import Waits
from pipec.compiler.toolchain import get_toolchain
from test_ptx_analysis import module

PARAMS = """
  ld.param.u64 %rd1, [k_param_0];
  ld.param.u64 %rd2, [k_param_1];
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
"""


def control(body: str, extra: str = "", params: int = 2) -> ptx.LaunchControl:
    return module(PARAMS + body, params=params, extra=extra).launch_control("k")


def early(c: ptx.LaunchControl) -> list[tuple[tuple[int, ...] | None, str]]:
    return [(a.params, a.mode) for a in c.early]


def test_a_wait_before_every_access_leaves_nothing_early():
    c = control("""
  griddepcontrol.launch_dependents;
  griddepcontrol.wait;
  ld.global.f32 %f1, [%rd3];
  st.global.f32 [%rd4], %f1;
""")
    assert c.waits is Waits.EVERY_PATH and c.early == () and c.trigger is not None


def test_accesses_before_the_wait_are_early_by_parameter_and_kind():
    c = control("""
  ld.global.nc.f32 %f1, [%rd3+16];
  atom.global.add.u32 %r1, [%rd4], 1;
  griddepcontrol.wait;
  st.global.f32 [%rd3], %f1;
""")
    assert c.waits is Waits.EVERY_PATH and early(c) == [((0,), "r"), ((1,), "rw")]
    assert c.trigger is None


def test_an_early_return_before_the_wait_is_a_path_without_it():
    c = control("""
  setp.ge.s32 %p1, %r1, 4;
  @%p1 bra $L_done;
  griddepcontrol.wait;
  st.global.f32 [%rd4], %f1;
$L_done:
""")
    assert c.waits is Waits.SOME_PATHS and c.early == ()


def test_a_guarded_wait_ends_no_path():
    c = control("""
  setp.ge.s32 %p1, %r1, 4;
  @%p1 griddepcontrol.wait;
  ld.global.f32 %f1, [%rd3];
""")
    assert c.waits is Waits.SOME_PATHS and early(c) == [((0,), "r")]


def test_a_kernel_without_a_wait_touches_everything_early():
    c = control("""
  griddepcontrol.launch_dependents;
  ld.global.f32 %f1, [%rd3];
  st.global.f32 [%rd4], %f1;
""")
    assert c.waits is Waits.NEVER and early(c) == [((0,), "r"), ((1,), "w")] and c.trigger is not None


def test_a_loop_that_may_not_run_its_wait_leaves_the_loads_after_it_early():
    c = control("""
  mov.u32 %r1, 0;
$L_head:
  setp.ge.s32 %p1, %r1, %r2;
  @%p1 bra $L_exit;
  griddepcontrol.wait;
  add.s32 %r1, %r1, 1;
  bra.uni $L_head;
$L_exit:
  ld.global.f32 %f1, [%rd3];
""")
    assert c.waits is Waits.SOME_PATHS and early(c) == [((0,), "r")]


def test_loads_in_a_loop_before_the_wait_are_early_and_the_wait_after_it_ends_every_path():
    c = control("""
  mov.u32 %r1, 0;
$L_head:
  mul.wide.s32 %rd5, %r1, 4;
  add.s64 %rd6, %rd3, %rd5;
  ld.global.f32 %f1, [%rd6];
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p1, %r1, %r2;
  @%p1 bra $L_head;
  griddepcontrol.wait;
  st.global.f32 [%rd4], %f1;
""")
    assert c.waits is Waits.EVERY_PATH and early(c) == [((0,), "r")]


def test_shared_local_and_param_memory_are_no_buffer_of_the_plan():
    c = control("""
  ld.shared.f32 %f1, [%r1];
  st.local.f32 [%rd9], %f1;
  ld.param.u32 %r2, [k_param_1];
  griddepcontrol.wait;
""")
    assert c.early == ()


def test_a_pointer_loaded_from_memory_is_of_unknown_origin():
    c = control("""
  ld.global.u64 %rd5, [%rd3];
  st.global.f32 [%rd5], %f1;
  griddepcontrol.wait;
""")
    assert early(c) == [((0,), "r"), (None, "w")]


HELPERS = """
.func _Z4waitv()
{
  .loc 1 50 1
  griddepcontrol.wait;
  ret;
}
.func _Z4peekPf(.param .b64 _Z4peekPf_param_0)
{
  .reg .b64 %rd<3>;
  .reg .f32 %f<2>;
  .loc 1 60 1
  ld.param.u64 %rd1, [_Z4peekPf_param_0];
  ld.global.f32 %f1, [%rd1];
  griddepcontrol.launch_dependents;
  ret;
}
.func _Z7recursev()
{
  .loc 1 70 1
  call.uni _Z7recursev, ();
  ret;
}
"""


def test_a_callee_that_waits_on_every_path_is_the_wait():
    c = control("""
  call.uni _Z4waitv, ();
  ld.global.f32 %f1, [%rd3];
""", extra=HELPERS)
    assert c.waits is Waits.EVERY_PATH and c.early == ()


def test_a_callee_s_early_access_is_the_caller_s_argument_located_through_the_call():
    c = control("""
  { .param .b64 param0;
  st.param.b64 [param0+0], %rd4;
  call.uni _Z4peekPf, (param0);
  }
  griddepcontrol.wait;
""", extra=HELPERS)
    assert early(c) == [((1,), "r")]
    (access,) = c.early
    assert access.location.line == 60 and access.location.caller.line == 1
    assert c.trigger.line == 60


def test_recursion_and_calls_outside_the_module_are_unknown_accesses_and_no_wait():
    recursive = control("  call.uni _Z7recursev, ();\n  griddepcontrol.wait;\n", extra=HELPERS)
    assert early(recursive) == [(None, "rw")]
    external = control("  call.uni missing, ();\n  griddepcontrol.wait;\n",
                       extra=".extern .func missing();")
    assert early(external) == [(None, "rw")] and external.waits is Waits.EVERY_PATH


PDL_SOURCE = """#include "pdl.cuh"
__device__ __noinline__ float first(const float* x) { return x[0]; }
extern "C" __global__ void staged(const float* w, const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float scale = w[0];
    pipec_let_dependents_start();
    if (i >= n) { pipec_wait_for_producer(); return; }
    pipec_wait_for_producer();
    y[i] = x[i] * scale + first(x);
}
extern "C" __global__ void returns_early(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    pipec_wait_for_producer();
    y[i] = x[i];
}
"""


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    source = tmp_path_factory.mktemp("pdl") / "pdl_kernels.cu"
    source.write_text(PDL_SOURCE)
    return kernel_analysis.analyze(source, (SHIPPED_KERNELS,), get_toolchain("nvrtc"), "compute_90")


def test_nvrtc_s_ptx_of_the_shipped_wrappers(analysed):
    staged = analysed.kernels["staged"].launch_control
    assert staged.waits == "every-path" and staged.trigger is not None
    assert [(a.params, a.mode, a.reported_at.line) for a in staged.early] == [((0,), "r", 5)]
    assert analysed.kernels["returns_early"].launch_control.waits == "some-paths"


def test_launch_control_survives_the_cache(analysed):
    data = kernel_records.to_json(analysed.kernels, analysed.mangled)
    again = kernel_records.from_json(Path(analysed.path), analysed.key, data)
    assert again is not None and again.kernels == analysed.kernels


def test_below_sm_90_the_wrappers_compile_to_nothing(tmp_path):
    source = tmp_path / "pdl_kernels.cu"
    source.write_text(PDL_SOURCE)
    old = kernel_analysis.analyze(source, (SHIPPED_KERNELS,), get_toolchain("nvrtc"), "compute_80")
    assert old.kernels["staged"].launch_control.waits == "never"
    assert old.kernels["staged"].launch_control.trigger is None
