"""Reads before writes (compiler/ptx/first_reads.py) on hand-written PTX: which parameters a
kernel loads from before the same thread has stored the same bytes, on some path. NVRTC
output is covered by the soundness corpus (tests/corpus/soundness/out_read_*.cu)."""

from __future__ import annotations

import pytest

from pipec.compiler import ptx
from pipec.compiler.ptx.first_reads import access_width
from ptx_kernel import kernel_module

SETUP = """
  ld.param.u64 %rd1, [k_param_0];
  ld.param.u64 %rd2, [k_param_1];
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
"""


def module(body: str, extra: str = "") -> ptx.AnalysedModule:
    return kernel_module(SETUP, body, ("u64", "u64"), extra)


def first_reads(body: str, extra: str = "") -> dict[int, int | None]:
    """Per parameter read before written: the line of the read (1 unless the body says)."""
    found = module(body, extra).first_reads("k")
    return {param: location.line if location else None for param, location in found.items()}


def test_a_load_before_any_store_reads_what_the_buffer_held():
    assert first_reads("""
  .loc 1 5 1
  ld.global.f32 %f1, [%rd3];
  .loc 1 6 1
  st.global.f32 [%rd4], %f1;
  ld.global.f32 %f2, [%rd4];
""") == {0: 5}


@pytest.mark.parametrize("stores, load, read", [
    ("st.global.f32 [%rd3], %f1;", "ld.global.f32 %f2, [%rd3];", False),
    ("st.global.f32 [%rd3+4], %f1;", "ld.global.f32 %f2, [%rd3];", True),  # other bytes
    ("st.global.f32 [%rd3], %f1;", "ld.global.f32 %f2, [%rd3+4];", True),
    ("st.global.f32 [%rd3], %f1; st.global.f32 [%rd3+4], %f1;", "ld.global.v2.f32 {%f2, %f3}, [%rd3];", False),
    ("st.global.f32 [%rd3], %f1; st.global.f32 [%rd3+8], %f1;", "ld.global.v2.f32 {%f2, %f3}, [%rd3];", True),
    ("st.global.v4.f32 [%rd3], {%f1, %f1, %f1, %f1};", "ld.global.f32 %f2, [%rd3+12];", False),
    ("st.global.v4.f32 [%rd3], {%f1, %f1, %f1, %f1};", "ld.global.f32 %f2, [%rd3+13];", True),
    ("st.global.f32 [%rd3+-4], %f1;", "ld.global.f32 %f2, [%rd3+-4];", False),
    ("st.global.f32 [%rd4+4], %f1;", "ld.global.f32 %f2, [%rd4];", True),
    ("st.global.f32 [%rd3], %f1; add.s64 %rd3, %rd3, 4;", "ld.global.f32 %f2, [%rd3];", True),  # moved on
    ("st.global.f32 [%rd3], %f1; add.s64 %rd9, %rd3, 4;", "ld.global.f32 %f2, [%rd3];", False),
    ("@%p1 st.global.f32 [%rd3], %f1;", "ld.global.f32 %f2, [%rd3];", True),  # a guarded store may not happen
    ("st.global.f32 [%rd3], %f1;", "ld.global.f32 %f2, [%rd3 + 0];", False),
    ("st.global.f32 [%rd3], %f1;", "ld.global %f2, [%rd3];", True),  # no type: no width
    ("st.global [%rd3], %f1;", "ld.global.f32 %f2, [%rd3];", True),
    ("st.global.f32 [%rd3], %f1;", "atom.global.add.f32 %f2, [%rd3], %f1;", False),
    ("", "atom.global.add.f32 %f2, [%rd3], %f1;", True),  # an atomic reads what the memory held
    ("", "red.global.add.f32 [%rd3], %f1;", True),  # and so does a reduction
    ("st.global.f32 [%rd3], %f1;", "red.global.add.f32 [%rd3], %f1;", False),
    ("", "st.global.f32 [%rd3], %f1;", False),
    ("", "prefetch.global.L2 [%rd3];", False),  # nothing a kernel sees
    ("", "cp.async.ca.shared.global [%r1], [%rd3], 16;", True),
])
def test_a_load_is_covered_by_the_same_registers_stores_on_every_path(stores, load, read):
    parameter = 1 if "%rd4" in load else 0
    assert first_reads(f"  {stores}\n  {load}\n") == ({parameter: 1} if read else {})


def test_a_store_through_another_register_of_the_same_value_covers_nothing():
    assert first_reads("""
  mov.b64 %rd9, %rd3;
  st.global.f32 [%rd9], %f1;
  ld.global.f32 %f2, [%rd3];
""") == {0: 1}


def test_a_store_on_one_path_only_does_not_cover_the_load_after_the_join():
    branch = """
  @%p1 bra $L_other;
  st.global.f32 [%rd3], %f1;
  {other}
  bra.uni $L_join;
$L_other:
  {other_store}
$L_join:
  ld.global.f32 %f2, [%rd3];
"""
    assert first_reads(branch.format(other="", other_store="")) == {0: 1}
    assert first_reads(branch.format(other="", other_store="st.global.f32 [%rd3], %f3;")) == {}


def test_a_store_in_one_iteration_covers_the_load_after_it_in_the_same_iteration_only():
    assert first_reads("""
$L_loop:
  st.global.f32 [%rd3], %f1;
  ld.global.f32 %f2, [%rd3];
  add.s64 %rd3, %rd3, 4;
  @%p1 bra $L_loop;
""") == {}
    assert first_reads("""
$L_loop:
  ld.global.f32 %f2, [%rd3];
  st.global.f32 [%rd3], %f1;
  @%p1 bra $L_loop;
""") == {0: 1}


def test_code_after_a_return_reads_nothing_and_after_a_guarded_one_does():
    assert first_reads("""
  ret;
  ld.global.f32 %f2, [%rd3];
""") == {}
    assert first_reads("""
  @%p1 ret;
  ld.global.f32 %f2, [%rd3];
""") == {0: 1}


def test_nothing_runs_past_the_last_instruction_and_an_empty_body_reads_nothing():
    m = ptx.parse(""".version 8.8
.target sm_90
.address_size 64
.func nothing()
{
}
.visible .entry k(
  .param .u64 k_param_0
)
{
  .reg .b64 %rd<4>;
  .reg .f32 %f<4>;
  ld.param.u64 %rd1, [k_param_0];
  ret;
  ld.global.f32 %f1, [%rd1];
}
""")
    assert m.first_reads("k") == {} and m.first_reads("nothing") == {}


def test_a_load_through_a_pointer_loaded_from_memory_is_no_parameters():
    assert first_reads("""
  ld.global.u64 %rd9, [%rd3];
  ld.global.f32 %f2, [%rd9];
""") == {0: 1}  # the load of the pointer itself is a read of parameter 0


CALLEES = """
.func read_first(.param .b64 read_first_param_0)
{
  ld.param.u64 %rd1, [read_first_param_0];
  .loc 1 30 1
  ld.global.f32 %f1, [%rd1];
  ret;
}
.func write_first(.param .b64 write_first_param_0)
{
  ld.param.u64 %rd1, [write_first_param_0];
  st.global.f32 [%rd1], %f1;
  ld.global.f32 %f2, [%rd1];
  ret;
}
.func again(.param .b64 again_param_0)
{
  ld.param.u64 %rd1, [again_param_0];
  { .param .b64 param0; st.param.b64 [param0+0], %rd1; call.uni again, (param0); }
  { .param .b64 param0; st.param.b64 [param0+0], %rd1; call.uni read_first, (param0); }
  ret;
}
.extern .func outside(.param .b64 outside_param_0);
"""


@pytest.mark.parametrize("callee, read", [("read_first", True), ("write_first", False), ("again", True),
                                          ("outside", True), ("vprintf", False)])
def test_a_callees_reads_before_writes_are_its_callers_at_the_call(callee, read):
    found = first_reads(f"""
  .loc 1 7 1
  {{ .param .b64 param0; st.param.b64 [param0+0], %rd4; call.uni {callee}, (param0); }}
""", extra=CALLEES)
    assert found == ({1: 30 if callee in ("read_first", "again") else 7} if read else {})


def test_a_callees_stores_cover_nothing_in_its_caller():
    assert first_reads("""
  { .param .b64 param0; st.param.b64 [param0+0], %rd4; call.uni write_first, (param0); }
  ld.global.f32 %f2, [%rd4];
""", extra=CALLEES) == {1: 1}


def test_an_indirect_call_reads_what_any_function_whose_address_is_taken_reads():
    taken = CALLEES + ".global .u64 table[1] = {read_first};\n"
    call = """
  ld.global.u64 %rd9, [table];
  { .param .b64 param0; st.param.b64 [param0+0], %rd4; prototype_0 : .callprototype ()_ (.param .b64 _);
    call %rd9, (param0), prototype_0; }
"""
    assert first_reads(call, extra=taken) == {1: 30}
    assert first_reads(call, extra=CALLEES) == {1: 1}  # no address taken: a body pipec cannot see


@pytest.mark.parametrize("opcode, width", [
    ("ld.global.f32", 4), ("ld.global.v4.f32", 16), ("st.global.v2.u64", 16), ("ld.global.b8", 1),
    ("ld.global.u16", 2), ("ld.global.f16x2", 4), ("ld.global.bf16x2", 4), ("ld.global.b128", 16),
    ("st.global.v8.b16", 16), ("atom.global.add.f64", 8), ("ld.global.nc.L1::no_allocate.v2.f32", 8),
    ("ld.global", None), ("cp.async.ca.shared.global", None), ("ld.v4.f32", 16), ("ld.f32", 4),
])
def test_the_width_of_an_access_is_its_type_times_its_vector(opcode, width):
    assert access_width(opcode) == width
