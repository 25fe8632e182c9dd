"""The PTX analysis on hand-written PTX: how instructions are split, which functions a launch
reaches, which loops are spin waits, the grid barrier, and what a kernel writes through each
parameter. NVRTC output is covered by tests/test_soundness_corpus.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import ptx
from pipec.compiler.ptx import Written
from ptx_kernel import kernel_module

RECORDED = Path(__file__).parent / "corpus" / "ptx"


def module(body: str, params: int = 2, extra: str = "") -> ptx.PtxModule:
    return kernel_module("", body, ("u64",) * params, extra)


def rules(m: ptx.PtxModule) -> list[tuple[str, int]]:
    return sorted((f.rule, f.location.line) for f in m.findings("k"))


def instructions(m: ptx.PtxModule) -> list[str]:
    return [i.text for i in m.functions["k"].instructions]


def test_several_instructions_per_line_braces_and_predicates_are_each_read():
    m = module("""
  // begin inline asm
  { .reg .pred q; setp.eq.s32 q, %r1, 0; @q red.global.add.u32 [%rd1], %r1; }
  mov.u32 %r2, 1; mov.b64 %rd2, {%r2, %r2};
  // end inline asm
""")
    assert instructions(m)[:4] == [
        "setp.eq.s32 q, %r1, 0", "@q red.global.add.u32 [%rd1], %r1", "mov.u32 %r2, 1",
        "mov.b64 %rd2, {%r2, %r2}",
    ]
    assert rules(m) == [("atomics", 1)]


def test_labels_inside_an_asm_scope_are_its_own():
    m = module("""
$L_outer:
  { .reg .pred p;
    $L_inner: setp.eq.s32 p, %r1, 0;
    @p bra $L_inner; }
  bra.uni $L_outer;
""")
    branches = [i for i in m.functions["k"].instructions if i.opcode.startswith("bra")]
    assert [b.target for b in branches] == [0, 0]  # both loops start at the first instruction


EXTRA_FUNCTIONS = """
.func _Z4leafPi(.param .b64 _Z4leafPi_param_0)
{
  .reg .b64 %rd<3>;
  .loc 1 20 1
  ld.param.u64 %rd1, [_Z4leafPi_param_0];
  atom.global.add.u32 %r1, [%rd1], 1;
  ret;
}
.func _Z4selfPi(.param .b64 _Z4selfPi_param_0)
{
  .reg .b64 %rd<3>;
  .loc 1 30 1
  ld.param.u64 %rd1, [_Z4selfPi_param_0];
  { .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  call.uni
  _Z4selfPi,
  (
  param0
  );
  }
  { .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  call.uni _Z4leafPi, (param0);
  }
  ret;
}
.func _Z6unusedv()
{
  .loc 1 40 1
  membar.gl;
  ret;
}
"""


def test_calls_are_followed_through_recursion_and_across_lines():
    m = module("""
  ld.param.u64 %rd1, [k_param_0];
  { .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  call.uni
  _Z4selfPi,
  (
  param0
  );
  }
""", extra=EXTRA_FUNCTIONS)
    assert rules(m) == [("atomics", 20)]  # the unreachable fence stays out
    assert m.writes("k")[0][0] is Written.YES and m.writes("k")[1][0] is Written.NO


INDIRECT = """
  ld.param.u64 %rd1, [k_param_0];
  ld.global.u64 %rd5, [table];
  { .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  prototype_1 : .callprototype ()_ (.param .b64 _);
  call %rd5, (param0), prototype_1;
  }
"""


def test_an_indirect_call_names_the_functions_it_may_reach():
    m = module(INDIRECT, extra=EXTRA_FUNCTIONS + ".global .align 8 .u64 table[2] = {_Z4leafPi, _Z6unusedv};")
    (finding,) = m.findings("k")
    assert finding.rule == "unfollowed-call"
    assert "`_Z4leafPi` (atomics)" in finding.instruction
    assert "`_Z6unusedv` (fence-barrier)" in finding.instruction


def test_an_indirect_call_whose_targets_are_clean_is_silent():
    clean = ".func _Z5cleanPi(.param .b64 _Z5cleanPi_param_0)\n{\n  ret;\n}\n"
    m = module(INDIRECT, extra=clean + ".global .align 8 .u64 table[1] = {_Z5cleanPi};")
    assert m.findings("k") == []


def test_an_indirect_call_that_may_reach_a_body_outside_the_module_is_reported():
    extern = ".extern .func _Z9elsewherePi(.param .b64 _Z9elsewherePi_param_0);\n"
    (finding,) = module(INDIRECT, extra=extern + ".global .align 8 .u64 table[1] = {_Z9elsewherePi};").findings("k")
    assert finding.rule == "unfollowed-call" and "`_Z9elsewherePi`" in finding.instruction


def test_an_indirect_call_with_no_address_taken_cannot_be_followed():
    (finding,) = module(INDIRECT).findings("k")
    assert "takes no function's address" in finding.instruction
    assert module(INDIRECT).writes("k")[0][0] is Written.UNKNOWN  # the argument went somewhere


def test_a_call_to_a_body_outside_the_module_is_reported_but_printf_is_not():
    extern = ".extern .func elsewhere(.param .b64 elsewhere_param_0);\n.extern .func vprintf();"
    m = module("""
  { .param .b64 param0; st.param.b64 [param0+0], %rd1; call.uni elsewhere, (param0); }
  call.uni vprintf, ();
""", extra=extern)
    (finding,) = m.findings("k")
    assert finding.instruction == "call to `elsewhere`, whose body is not in this module"


@pytest.mark.parametrize("load, spins", [
    ("ld.volatile.global.u32", True), ("ld.relaxed.gpu.global.u32", True), ("ld.acquire.sys.u32", True),
    ("ld.global.cv.u32", True), ("ld.volatile.shared.u32", False), ("ld.global.nc.u32", False),
])
def test_a_loop_whose_exit_reads_ordered_memory_is_a_spin(load, spins):
    m = module(f"""
$L_wait:
  .loc 1 5 1
  {load} %r1, [%rd1];
  st.global.u32 [%rd2], %r1;
  nanosleep.u32 32;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_wait;
""")
    assert rules(m) == ([("spin-wait", 5)] if spins else [])


def test_a_counted_loop_reading_volatile_memory_is_not_a_spin():
    m = module("""
  mov.u32 %r3, 0;
$L_sum:
  ld.volatile.global.u32 %r1, [%rd1];
  add.s32 %r2, %r2, %r1;
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, 8;
  @%p1 bra $L_sum;
""")
    assert rules(m) == []


def test_a_plain_load_ends_a_loop_only_without_a_counter():
    waits = module("""
$L_wait:
  .loc 1 7 1
  ld.global.u32 %r1, [%rd1];
  st.global.u32 [%rd2], %r1;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_wait;
""")
    bounded = module("""
$L_fill:
  ld.global.u32 %r1, [%rd1];
  st.global.u32 [%rd2], %r3;
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, %r1;
  @%p1 bra $L_fill;
""")
    assert rules(waits) == [("spin-wait", 7)] and rules(bounded) == []


def test_a_plain_load_at_a_loaded_address_is_polled_unless_a_counter_moves_it():
    # `while (data[idx[0]] == 0)`: the address is computed in the body, from memory
    waits = module("""
$L_wait:
  .loc 1 7 1
  ld.global.u32 %r1, [%rd1];
  mul.wide.s32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r2, [%rd4];
  st.global.u32 [%rd5], %r2;
  setp.eq.s32 %p1, %r2, 0;
  @%p1 bra $L_wait;
""")
    # `for (j = idx[0]; data[j] == 0; ++j)`: the counter moves the address
    walks = module("""
  ld.global.u32 %r1, [%rd1];
$L_walk:
  mul.wide.s32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r2, [%rd4];
  add.s32 %r1, %r1, 1;
  setp.eq.s32 %p1, %r2, 0;
  @%p1 bra $L_walk;
""")
    assert rules(waits) == [("spin-wait", 7)] and rules(walks) == []


def test_a_backward_branch_to_code_that_never_comes_back_is_no_loop():
    # NVRTC lays a shared early `return` out before the code that jumps back to it
    m = module("""
  bra.uni $L_body;
$L_done:
  ret;
$L_body:
  ld.global.u32 %r1, [%rd1];
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_done;
  st.global.u32 [%rd2], %r1;
""")
    assert rules(m) == []


def test_a_loop_is_its_whole_cycle_wherever_its_blocks_lie():
    # a slow path laid out before the loop's top, the counter after the branch back into it:
    # the loop through that branch holds the counter, so the loaded address is no poll
    m = module("""
  bra.uni $L_top;
$L_slow:
  add.s32 %r5, %r5, 1;
  bra.uni $L_join;
$L_top:
  mul.wide.s32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r2, [%rd4];
  setp.eq.s32 %p1, %r2, 0;
  @%p1 bra $L_slow;
$L_join:
  add.s32 %r1, %r1, 1;
  setp.lt.s32 %p2, %r1, 64;
  @%p2 bra $L_top;
""")
    assert rules(m) == []


CALLED = """
.func (.param .b32 peek_retval0) peek(.param .b64 peek_param_0)
{
  ld.param.u64 %rd1, [peek_param_0];
  ld.global.u32 %r1, [%rd1];
  st.param.b32 [peek_retval0], %r1;
  ret;
}
"""


@pytest.mark.parametrize("step, spins", [("", True), ("add.s64 %rd1, %rd1, 4;", False)])
def test_a_call_reading_plain_memory_polls_unless_its_argument_moves(step, spins):
    # `while (peek(flag) == 0)` with `peek` not inlined, and `while (peek(x + i) == 0) ++i`
    m = module(f"""
$L_wait:
  .loc 1 6 1
  {step}
  {{ .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  .param .b32 retval0;
  call.uni (retval0), peek, (param0);
  ld.param.b32 %r1, [retval0];
  }}
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_wait;
""", extra=CALLED)
    assert rules(m) == ([("spin-wait", 6)] if spins else [])


def test_a_loop_without_exit_is_a_spin():
    m = module("""
$L_forever:
  .loc 1 9 1
  bra.uni $L_forever;
""")
    assert [(f.rule, f.instruction) for f in m.findings("k")] == [("spin-wait", "bra.uni $L_forever")]


def test_the_recorded_cooperative_groups_grid_sync_is_one_finding():
    m = ptx.parse((RECORDED / "cg_grid_sync.ptx").read_text())
    findings = m.findings("k")
    assert [(f.rule, f.location.file) for f in findings] == [
        ("grid-sync", "cooperative_groups/details/sync.h")]
    outermost = findings[0].location.chain()[-1]
    assert (outermost.file, outermost.line) == ("g.cu", 6)  # `grid.sync()` in the kernel, line 4 takes the grid
    assert m.writes("k") == {0: (Written.YES, ptx.Location("g.cu", 5, 3)), 1: (Written.NO, None)}


@pytest.mark.parametrize("store, written", [
    ("st.global.u32 [%rd3+8], %r1", Written.YES),
    ("st.u32 [%rd2], %r1", Written.YES),  # generic, not converted
    ("atom.global.add.u32 %r2, [%rd3], 1", Written.YES),
    ("red.global.add.u32 [%rd3], 1", Written.YES),
    ("multimem.st.global.u32 [%rd3], %r1", Written.YES),
    ("cp.async.bulk.global.shared::cta.bulk_group [%rd3], [%r1], 64", Written.YES),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd3], [%r1], 64", Written.YES),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd3], 64, [%r2]",
     Written.NO),
    ("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%r1], %r2, [%r3]", Written.NO),
    ("st.shared.u32 [%r1], %r2", Written.NO),
    ("cp.async.bulk.prefetch.L2.global [%rd3], 64", Written.NO),
    ("tensormap.replace.tile.global_address.global.b1024.b64 [%rd3], %rd4", Written.YES),
    ("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd3, {%r1}], [%r2]", Written.UNKNOWN),
    ("ld.global.u64 %rd9, [%rd3]; st.global.u32 [%rd9], %r1", Written.NO),  # through a table: no parameter
    ("ld.global.u64 %rd9, [%rd3]; ld.global.u64 %rd8, [%rd9]; st.global.u32 [%rd8], %r1",
     Written.UNKNOWN),  # double indirection
    ("ld.global.u32 %r9, [%rd4]; mul.wide.s32 %rd9, %r9, 4; add.s64 %rd10, %rd9, %rd3;"
     " st.global.u32 [%rd10], %r1", Written.YES),  # a loaded index keeps the base
])
def test_what_a_kernel_writes_through_its_parameter(store, written):
    m = module(f"""
  ld.param.u64 %rd1, [k_param_0];
  ld.param.u64 %rd4, [k_param_1];
  mov.b64 %rd2, %rd1;
  cvta.to.global.u64 %rd3, %rd2;
  .loc 1 3 5
  {store};
""")
    assert m.writes("k")[0][0] is written
    assert m.writes("k")[1][0] is (Written.UNKNOWN if written is Written.UNKNOWN else Written.NO)
