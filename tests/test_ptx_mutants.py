"""The PTX reader and its analyses (compiler/ptx*.py) on hand-written PTX, one behaviour per
test, for what scripts/mutate.py found unchecked: the `.global` arrays the signature probe
reads, line-info chains, operand splitting, the call graph, spin waits and parameter writes.
The equivalent survivors are listed in CONTRIBUTING.md ("Mutation testing")."""

from __future__ import annotations

import pytest

from pipec.compiler import ptx
from pipec.compiler.ptx import Location, Written

from test_ptx_analysis import module, rules


def test_u32_and_byte_arrays_read_as_little_endian_words_padded_with_zeros():
    m = ptx.parse("""
.global .align 4 .u32 pipec_sig_a[4] = {7, 0x10};
.global .align 1 .b8 pipec_sig_b[8] = {1, 2, 3, 4, 5};
.visible .global .align 4 .b32 pipec_sig_c[2];
""")
    assert m.globals == {"pipec_sig_a": [7, 16, 0, 0], "pipec_sig_b": [0x04030201, 5],
                         "pipec_sig_c": [0, 0]}


def test_a_function_on_the_first_line_is_read():
    m = ptx.parse(".visible .entry k()\n{\n  membar.gl;\n  ret;\n}\n")
    assert [f.rule for f in m.findings("k")] == ["fence-barrier"]


def test_a_header_without_a_body_at_the_end_of_the_text_is_a_function_without_body():
    m = ptx.parse(".visible .entry k(\n  .param .u64 k_param_0\n)")
    assert not m.functions["k"].has_body and m.functions["k"].params == 1


def test_the_line_after_a_prototype_is_read():
    m = ptx.parse(".extern .func helper();\n.visible .entry k()\n{\n  membar.gl;\n  ret;\n}\n")
    assert m.functions["k"].has_body and [f.rule for f in m.findings("k")] == ["fence-barrier"]


HELPER_BODY = """
.func helper()
{
  .loc 1 20 1
  atom.global.add.u32 %r1, [%rd1], 1;
  ret;
}
"""


def test_a_prototype_neither_hides_the_body_that_follows_nor_is_lost_before_it():
    m = module("  call.uni helper, ();", extra=".func helper();" + HELPER_BODY)
    assert rules(m) == [("atomics", 20)]
    declared_only = ptx.parse(".extern .func helper();\n")
    assert "helper" in declared_only.functions and not declared_only.functions["helper"].has_body


def test_cluster_dimensions_are_read_from_the_entry_header():
    m = ptx.parse("""
.visible .entry clustered()
.explicitcluster
.reqnctapercluster 4, 2
{
  ret;
}
.visible .entry plain()
{
  ret;
}
""")
    assert {f.name: f.cluster for f in m.entries} == {"clustered": (4, 2, 1), "plain": None}


def test_launch_bounds_multiply_their_dimensions_and_the_tightest_wins():
    m = ptx.parse("""
.visible .entry three(
  .param .u64 three_param_0
)
.maxntid 8, 4, 2
.reqntid 100
{
  ret;
}
.visible .entry two()
.maxntid 16, 3
{
  ret;
}
.visible .entry one()
.maxntid 256
{
  ret;
}
""")
    assert {f.name: f.max_threads for f in m.entries} == {"three": 64, "two": 48, "one": 256}


def test_a_body_cut_off_at_the_end_of_the_text_is_read_up_to_there():
    m = ptx.parse(".visible .entry k()\n{\n  membar.gl;\n  ret;\n")
    assert m.functions["k"].has_body
    assert m.functions["k"].instructions[0].opcode == "membar.gl"


def test_a_label_resolves_in_its_own_scope_first_then_outwards():
    m = module("""
$L:
  mov.u32 %r1, 0;
  { .reg .pred p;
    $L: setp.eq.s32 p, %r1, 0;
    @p bra $L; }
  { .reg .pred q;
    mov.u32 %r2, 1;
    $L: setp.eq.s32 q, %r2, 0;
    $M: @q bra $L;
    { @q bra $M;
      { @q bra $N; } }
    @q bra $N; }
  @%p1 bra $L;
$N:
  } membar.gl; {
  @%p1 bra $L;
""")
    targets = [(i.position, i.target) for i in m.functions["k"].instructions if i.opcode == "bra"]
    # the stray `}` closes no scope (the `{` after it opens one): the function's labels stay in reach
    assert targets == [(2, 1), (5, 4), (6, 5), (7, 10), (8, 10), (9, 0), (11, 0)]


def test_the_first_and_the_last_line_of_a_body_are_read():
    m = ptx.parse(".visible .entry k()\n{\n  membar.gl;\n  red.global.add.u32 [%rd1], 1;\n}\n")
    assert [(f.rule, f.instruction) for f in m.findings("k")] == [
        ("fence-barrier", "membar.gl"), ("atomics", "red.global.add.u32 [%rd1], 1")]


def test_line_info_names_files_through_the_file_table_and_the_inlining_chain():
    m = ptx.parse("""
.file 1 "k.cu"
.file 2 "helpers.h"
.visible .entry k()
{
  .loc 1 7 3
  mov.u32 %r1, 0;
  .loc 2 30 5, function_name $L__info_string0, inlined_at 1 7 3
  membar.gl;
  .loc 9 11 1
  membar.sys;
  .loc 2 31 5, function_name $L__info_string1, inlined_at 8 12 4
  fence.sc.gpu;
}
""")
    first, second, third = (f.location for f in m.findings("k"))
    assert first.chain() == [Location("helpers.h", 30, 5, first.caller), Location("k.cu", 7, 3)]
    assert (second.file, second.line, second.caller) == ("9", 11, None)  # a file the table lacks
    assert third.caller == Location("8", 12, 4)


def test_a_statement_split_over_unindented_lines_is_one_instruction_and_empty_ones_are_none():
    m = ptx.parse(".visible .entry k()\n{\nmembar.gl;;\ncall.uni\nhelper,\n(\nparam0\n);\nret;\n}\n")
    assert [i.text for i in m.functions["k"].instructions] == ["membar.gl", "call.uni helper, ( param0 )", "ret"]


def test_registers_declared_without_a_percent_sign_carry_data_flow():
    m = module("""
$L_wait:
  .loc 1 6 1
  { .reg .u32 flag, %tmp;
    .reg .pred done;
    ld.volatile.global.u32 flag, [%rd1];
    setp.ne.u32 done, flag, 0;
    selp.u32 %r1, 1, 0, done; }
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_wait;
""")
    assert rules(m) == [("spin-wait", 6)]
    assert {"flag", "%tmp", "done"} <= m.functions["k"].registers
    assert not any("<" in name for name in m.functions["k"].registers)


def test_only_branches_with_an_operand_get_a_target():
    m = module("""
$L_top:
  mov.u32 %r1, $L_top;
  bra.uni;
""")
    assert [(i.opcode, i.target) for i in m.functions["k"].instructions[:2]] == [("mov.u32", None), ("bra.uni", None)]


def test_an_indexed_branch_resolves_its_last_operand():
    m = module("""
$L_table:
  .branchtargets $L_table;
  brx.idx %r1, $L_table;
""")
    (branch,) = [i for i in m.functions["k"].instructions if i.opcode == "brx.idx"]
    assert branch.target == 0


def test_operands_split_at_top_level_commas_only():
    assert ptx.split_operands("[%rd1+8], {%r1, %r2}, (p0, p1), %r3, ") == [
        "[%rd1+8]", "{%r1, %r2}", "(p0, p1)", "%r3"]
    assert ptx.split_operands("") == []


INDIRECT = """
  ld.param.u64 %rd1, [k_param_0];
  .loc 1 2 1
  mov.u64 %rd5, {taken};
  {{ .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  prototype_1 : .callprototype ()_ (.param .b64 _);
  call %rd5, (param0), prototype_1;
  }}
  .loc 1 3 1
  {{ .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  call.uni {called}, (param0);
  }}
"""
LEAF = """
.func leaf(.param .b64 leaf_param_0)
{
  .loc 1 20 1
  ld.param.u64 %rd1, [leaf_param_0];
  atom.global.add.u32 %r1, [%rd1], 1;
  ret;
}
.func clean(.param .b64 clean_param_0)
{
  ret;
}
"""


def test_a_function_whose_address_a_register_takes_may_be_reached_by_an_indirect_call():
    m = module(INDIRECT.format(taken="leaf", called="clean"), extra=LEAF)
    (finding,) = m.findings("k")
    assert (finding.rule, finding.location.line) == ("unfollowed-call", 2)
    assert finding.instruction == "indirect call through `%rd5`: it may reach `leaf` (atomics)"
    assert m.writes("k")[0] == (Written.YES, Location("k.cu", 20, 1, Location("k.cu", 2, 1), True))


def test_a_direct_call_takes_no_address():
    m = module(INDIRECT.format(taken="clean", called="leaf"), extra=LEAF)
    assert rules(m) == [("atomics", 20)]


FORWARDER = """
.extern .func elsewhere(.param .b64 elsewhere_param_0);
.func forward(.param .b64 forward_param_0)
{
  .loc 1 30 1
  ld.param.u64 %rd1, [forward_param_0];
  { .param .b64 param0; st.param.b64 [param0+0], %rd1; call.uni elsewhere, (param0); }
  ret;
}
"""


def test_a_call_leaving_the_module_is_reported_where_the_kernel_reaches_it():
    m = module(INDIRECT.format(taken="clean", called="forward"), extra=LEAF + FORWARDER)
    (finding,) = m.findings("k")
    assert finding.instruction == "call to `elsewhere`, whose body is not in this module"
    assert [(line.line, line.called) for line in finding.location.chain()] == [(30, True), (3, False)]


def test_an_indirect_call_may_reach_a_function_that_leaves_the_module():
    m = module(INDIRECT.format(taken="forward", called="clean"), extra=LEAF + FORWARDER)
    (finding,) = m.findings("k")
    assert finding.instruction == "indirect call through `%rd5`: it may reach `forward` (unfollowed-call)"


def spins(body: str) -> list[str]:
    return [f.instruction for f in module(body).findings("k") if f.rule == "spin-wait"]


def poll(load: str) -> str:
    return f"""
$L_wait:
  {load};
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_wait;
"""


@pytest.mark.parametrize("load, polled", [
    ("ld.volatile.global.u32 %r1, [%rd1]", True),
    ("ld.global.u32 %r1, [%rd1]", True),
    ("atom.global.cas.b32 %r1, [%rd1], 0, 1", True),
    ("ld.volatile.shared.u32 %r1, [%rd1]", False),
    ("ld.local.u32 %r1, [%rd1]", False),
    ("ld.param.u32 %r1, [%rd1]", False),
    ("ld.const.u32 %r1, [%rd1]", False),
    ("ld.global.nc.u32 %r1, [%rd1]", False),
    ("atom.shared.add.u32 %r1, [%rd1], 0", False),
    ("mov.u32 %r1, %r9", False),  # no memory at all: the loop cannot be ended from outside
])
def test_what_a_polling_loop_reads(load, polled):
    assert spins(poll(load)) == ([load] if polled else [])


def test_a_compare_and_swap_retry_loop_is_no_wait_even_when_relaxed():
    assert spins("""
$L_retry:
  atom.relaxed.gpu.global.cas.b32 %r2, [%rd1], %r1, %r3;
  setp.ne.s32 %p1, %r2, %r1;
  mov.u32 %r1, %r2;
  @%p1 bra $L_retry;
""") == []


def test_an_ordered_load_in_the_exit_is_a_wait_even_beside_a_counter():
    assert spins("""
$L_wait:
  ld.volatile.global.u32 %r1, [%rd1];
  add.s32 %r3, %r3, 1;
  setp.eq.s32 %p1, %r1, 0;
  setp.lt.s32 %p2, %r3, 100;
  and.pred %p3, %p1, %p2;
  @%p3 bra $L_wait;
""") == ["ld.volatile.global.u32 %r1, [%rd1]"]


def test_a_loop_leaving_from_its_first_instruction_has_an_exit():
    assert spins("""
$L_head:
  @%p2 bra $L_done;
  add.s32 %r3, %r3, 1;
  setp.ge.s32 %p2, %r3, 8;
  bra.uni $L_head;
$L_done:
""") == []


def test_a_loop_without_exit_spins_even_before_a_return():
    assert spins("""
$L_forever:
  nanosleep.u32 32;
  bra.uni $L_forever;
  ret;
""") == ["bra.uni $L_forever"]


def test_branches_inside_the_loop_and_guarded_work_decide_no_exit():
    # a counted loop with `if (flag) ...` on volatile data jumping inside it, and guarded
    # arithmetic; only the `continue` without progress back to the top is a wait of its own
    assert spins("""
  mov.u32 %r3, 0;
$L_top:
  ld.volatile.global.u32 %r5, [%rd1];
  setp.eq.s32 %p3, %r5, 0;
  @%p3 bra $L_top;
  @%p3 bra $L_next;
  @%p3 add.s32 %r6, %r6, 1;
$L_next:
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, 8;
  @%p3 bra $L_back;
$L_back:
  @%p1 bra $L_top;
""") == ["ld.volatile.global.u32 %r5, [%rd1]"]


@pytest.mark.parametrize("leave", ["@%p4 ret", "@%p4 exit", "@%p4 trap", "@%p4 bra $L_out", "@%p4 bra $L_nowhere"])
def test_every_way_out_of_a_loop_is_an_exit(leave):
    # the loop's own condition is a counter; only the other way out polls memory
    assert spins(f"""
$L_top:
  ld.volatile.global.u32 %r5, [%rd1];
  setp.ne.s32 %p4, %r5, 0;
  {leave};
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, 8;
  @%p1 bra $L_top;
$L_out:
""") == ["ld.volatile.global.u32 %r5, [%rd1]"]


def test_every_loop_is_examined_after_one_without_exit():
    assert spins("""
$L_forever:
  bra.uni $L_forever;
""" + poll("ld.volatile.global.u32 %r1, [%rd1]")) == ["bra.uni $L_forever", "ld.volatile.global.u32 %r1, [%rd1]"]


def test_only_the_loop_body_defines_what_decides_its_exit():
    assert spins("""
$L_count:
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, 8;
  @%p1 bra $L_count;
  ld.volatile.global.u32 %r3, [%rd1];
""") == []


def test_the_exit_is_traced_through_every_operand_of_every_definition():
    assert spins("""
$L_wait:
  ld.volatile.global.u32 %r7, [%rd1];
  add.s32 %r2, %r6, %r6;
  setp.eq.s32 %p1, %r7, %r2;
  @%p1 bra $L_wait;
""") == ["ld.volatile.global.u32 %r7, [%rd1]"]


POLLED = """
  ld.param.u64 %rd1, [k_param_0];
$L_wait:
  { .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  .param .b32 retval0;
  call.uni (retval0), poll, (param0);
  ld.param.b32 %r1, [retval0];
  }
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_wait;
"""


def helper_poll(load: str, body: str = POLLED, extra: str = "") -> ptx.PtxModule:
    """`while (poll(flag) == 0)` with `poll` not inlined; poll calls itself (never, at run time),
    `vprintf` (not in the module) and `read`, which makes the load."""
    return module(body, extra=f"""
.func (.param .b32 read_retval0) read(.param .b64 read_param_0)
{{
  ld.param.u64 %rd1, [read_param_0];
  {load};
  st.param.b32 [read_retval0], %r1;
  ret;
}}
.func (.param .b32 poll_retval0) poll(.param .b64 poll_param_0)
{{
  ld.param.u64 %rd1, [poll_param_0];
  @%p1 call.uni (retval0), poll, (param0);
  call.uni vprintf, ();
  call.uni (retval0), read, (param0);
  ld.param.b32 %r1, [retval0];
  st.param.b32 [poll_retval0], %r1;
  ret;
}}
{extra}
""")


def test_a_call_whose_result_ends_a_loop_is_the_poll_when_it_reads_ordered_memory():
    (finding,) = helper_poll("ld.volatile.global.u32 %r1, [%rd1]").findings("k")
    assert (finding.rule, finding.instruction) == ("spin-wait", "call.uni (retval0), poll, (param0)")
    assert helper_poll("cvt.u32.u64 %r1, %rd1").findings("k") == []  # reads no memory


def test_a_polling_call_whose_result_decides_nothing_is_no_wait():
    counted = POLLED.replace("setp.eq.s32 %p1, %r1, 0;", "ld.param.u32 %r4, [k_param_1];\n"
                             "  add.s32 %r3, %r3, 1;\n  setp.lt.s32 %p1, %r3, %r4;")
    assert helper_poll("ld.volatile.global.u32 %r1, [%rd1]", counted).findings("k") == []


def test_a_polling_call_beside_a_counter_is_still_a_wait():
    # `while (poll(flag) == 0 && ++i < 100)`: a timeout, like an ordered load beside a counter
    timed = POLLED.replace("setp.eq.s32 %p1, %r1, 0;", "add.s32 %r3, %r3, 1;\n  setp.lt.s32 %p2, %r3, 100;\n"
                           "  setp.eq.s32 %p3, %r1, 0;\n  and.pred %p1, %p2, %p3;")
    (finding,) = helper_poll("ld.volatile.global.u32 %r1, [%rd1]", timed).findings("k")
    assert finding.instruction == "call.uni (retval0), poll, (param0)"


def test_only_a_calls_own_arguments_feed_its_result():
    # `while (poll(flag) == 0) i = bump(i);`: the counter is another call's argument
    bumped = POLLED.replace("$L_wait:", """$L_wait:
  { .param .b32 param0;
  st.param.b32 [param0+0], %r3;
  .param .b32 retval0;
  call.uni (retval0), bump, (param0);
  ld.param.b32 %r3, [retval0];
  }""")
    bump = ".func (.param .b32 bump_retval0) bump(.param .b32 bump_param_0)\n{\n  ret;\n}\n"
    (finding,) = helper_poll("ld.global.u32 %r1, [%rd1]", bumped, extra=bump).findings("k")
    assert finding.instruction == "call.uni (retval0), poll, (param0)"


def test_a_loop_is_every_path_from_its_header_to_its_branch_back():
    # an `if` inside the loop: the walk back from the branch meets the header along one arm
    # before it has finished the other, which holds the way out
    assert spins("""
$L_top:
  ld.volatile.global.u32 %r5, [%rd1];
  setp.ne.s32 %p4, %r5, 0;
  @%p2 bra $L_else;
  @%p4 bra $L_out;
  bra.uni $L_join;
$L_else:
  add.s32 %r6, %r6, 1;
$L_join:
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, 8;
  @%p1 bra $L_top;
$L_out:
""") == ["ld.volatile.global.u32 %r5, [%rd1]"]


def test_a_plain_load_beside_a_counter_is_bounded():
    assert spins("""
$L_fill:
  ld.global.u32 %r1, [%rd1];
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, %r1;
  @%p1 bra $L_fill;
""") == []


def writes(body: str, extra: str = "") -> list[Written]:
    m = module("  ld.param.u64 %rd1, [k_param_0];\n  ld.param.u64 %rd4, [k_param_1];\n" + body, extra=extra)
    return [m.writes("k")[i][0] for i in range(2)]


def through(body: str, extra: str = "") -> dict[int, str]:
    """Per parameter, the modes of the accesses through pointers loaded from its memory."""
    m = module("  ld.param.u64 %rd1, [k_param_0];\n  ld.param.u64 %rd4, [k_param_1];\n" + body, extra=extra)
    found: dict[int, str] = {}
    for mode, params in m.accesses("k").through.items():
        for index in params:
            found[index] = "".join(sorted(found.get(index, "") + mode))
    return found


def test_writes_through_a_chain_of_calls_reach_the_kernel():
    chain = "".join(f"""
.func {name}(.param .b64 {name}_param_0)
{{
  ld.param.u64 %rd1, [{name}_param_0];
  {body}
  ret;
}}""" for name, body in [
        ("store", "st.global.u32 [%rd1], 1;"),
        ("middle", "{ .param .b64 param0; st.param.b64 [param0+0], %rd1; call.uni store, (param0); }"),
        ("outer", "{ .param .b64 param0; st.param.b64 [param0+0], %rd1; call.uni middle, (param0); }")])
    call = "{ .param .b64 param0; st.param.b64 [param0+0], %rd4; call.uni outer, (param0); }"
    assert writes(call, extra=chain) == [Written.NO, Written.YES]


def test_instructions_without_a_destination_address_write_nothing():
    # `st.global.u32;` is what inline assembly may hold: NVRTC pastes it unassembled
    assert writes("""
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group 0;
  st.global.u32;
  st.param.b64 [param0+0];
  cvt.u32.u64 %r1, %rd1;
  cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd4], 64, [%r2];
""") == [Written.NO, Written.NO]


IDENTITY = """
.func (.param .b64 same_retval0) same(.param .b64 same_param_0)
{
  ld.param.u64 %rd1, [same_param_0];
  st.param.b64 [same_retval0], %rd1;
  ret;
}
.func (.param .b64 store_retval0) store(.param .b64 store_param_0)
{
  ld.param.u64 %rd1, [store_param_0];
  st.global.u32 [%rd1], 1;
  ret;
}
"""


def test_a_pointer_returned_by_a_call_keeps_its_origin():
    assert writes("""
  { .param .b64 param0; st.param.b64 [param0+0], %rd4;
  .param .b64 retval0;
  call.uni (retval0), same, (param0);
  ld.param.u64 %rd6, [retval0]; }
  cvta.to.global.u64 %rd7, %rd6;
  st.global.u32 [%rd7], 1;
""", extra=IDENTITY) == [Written.NO, Written.YES]


def test_arguments_of_a_call_with_a_result_are_its_parameters_not_its_result():
    assert writes("""
  { .param .b64 param0; st.param.b64 [param0+0], %rd4;
  .param .b64 retval0; st.param.b64 [retval0+0], %rd1;
  call.uni (retval0), store, (param0); }
""", extra=IDENTITY) == [Written.NO, Written.YES]


def test_origins_flow_backwards_through_a_loop():
    # %rd7 learns its origin from %rd4 only on the third pass over the body
    assert writes("""
$L_next:
  add.s64 %rd7, %rd8, 4;
  st.global.u32 [%rd7], 1;
  mov.b64 %rd8, %rd9;
  mov.b64 %rd9, %rd4;
  @%p1 bra $L_next;
""") == [Written.NO, Written.YES]


def test_only_the_grid_workspace_makes_an_atomic_a_grid_sync():
    m = module("""
  ld.param.u64 %rd1, [k_param_0];
  .loc 1 4 1
  atom.global.add.u32 %r1, [%rd1], 1;
  mov.u64 %rd2, %envreg2;
  .loc 1 5 1
  atom.global.add.u32 %r2, [%rd2], 1;
  .loc 1 6 1
  red.global.add.u32 [%rd2], 1;
$L_barrier:
  ld.volatile.global.u32 %r3, [%rd2];
  setp.eq.s32 %p1, %r3, 0;
  @%p1 bra $L_barrier;
""")
    assert rules(m) == [("atomics", 4), ("grid-sync", 5), ("grid-sync", 6)]  # the wait is the barrier's


def test_address_arithmetic_keeps_the_base_and_anything_else_keeps_the_loaded_pointer():
    loaded = "  ld.global.u64 %rd9, [%rd4];\n  cvta.to.global.u64 %rd2, %rd1;\n"
    assert writes(loaded + "  add.s64 %rd3, %rd2, %rd9;\n  st.global.u32 [%rd3], 1;") == [Written.YES, Written.NO]
    assert through(loaded + "  add.s64 %rd3, %rd2, %rd9;\n  st.global.u32 [%rd3], 1;") == {}
    selected = loaded + "  selp.b64 %rd3, %rd2, %rd9, %p1;\n  st.global.u32 [%rd3], 1;"
    assert writes(selected) == [Written.YES, Written.NO]
    assert through(selected) == {1: "w"}  # the pointer loaded from parameter 1's memory


def test_a_callee_writing_through_a_pointer_it_loads_writes_through_the_callers_table():
    double = """
.func scatter(.param .b64 scatter_param_0)
{
  ld.param.u64 %rd1, [scatter_param_0];
  ld.global.u64 %rd2, [%rd1];
  st.global.u32 [%rd2], 1;
  ret;
}
"""
    call = "{ .param .b64 param0; st.param.b64 [param0+0], %rd4; call.uni scatter, (param0); }"
    assert writes(call, extra=double) == [Written.NO, Written.NO]
    assert through(call, extra=double) == {1: "w"}
    # passed a pointer loaded from parameter 1's memory, it writes through a pointer loaded twice
    twice = "ld.global.u64 %rd5, [%rd4];\n  " + call.replace("%rd4;", "%rd5;")
    assert writes(twice, extra=double) == [Written.UNKNOWN, Written.UNKNOWN]
    assert through(twice, extra=double) == {1: "r"}  # it reads the pointer it passes from that memory


def test_summaries_settle_even_when_every_function_changed_in_one_round():
    call = "st.global.u32 [%rd1], 1;\n  { .param .b64 param0; st.param.b64 [param0+0], %rd4; call.uni store, (param0); }"
    store = IDENTITY[IDENTITY.index(".func (.param .b64 store_retval0)"):]
    assert writes(call, extra=store) == [Written.YES, Written.YES]


@pytest.mark.parametrize("leave, stay, polled", [
    ("", "%p1", False),  # only the counter decides: it jumps past the way out
    ("@%p5 bra $L_leave;", "%p1", True),  # and `if (*flag) break;` jumps to it
    ("@%p1 bra $L_leave;", "%p5", True),
])
def test_every_branch_to_or_past_a_way_out_decides_it(leave, stay, polled):
    found = spins(f"""
$L_top:
  ld.volatile.global.u32 %r5, [%rd1];
  setp.ne.s32 %p5, %r5, 0;
  add.s32 %r3, %r3, 1;
  setp.lt.s32 %p1, %r3, 8;
  {leave}
  @{stay} bra $L_stay;
$L_leave:
  bra.uni $L_out;
$L_stay:
  bra.uni $L_top;
$L_out:
""")
    assert found == (["ld.volatile.global.u32 %r5, [%rd1]"] if polled else [])


def test_a_finding_in_a_callee_without_line_info_is_located_at_the_call():
    m = module("""
  .loc 1 3 1
  call.uni bare, ();
""", extra=".func bare()\n{\n  membar.gl;\n  ret;\n}\n")
    (finding,) = m.findings("k")
    assert (finding.rule, finding.location) == ("fence-barrier", Location("k.cu", 3, 1))


def test_stores_to_block_local_memory_write_no_parameter_whatever_their_address():
    assert writes("""
  cvt.u32.u64 %r1, %rd1;
  st.shared.u32 [%r1], 1;
  st.local.u32 [%r1], 1;
  red.shared.add.u32 [%r1], 1;
  atom.shared::cta.add.u32 %r2, [%r1], 1;
""") == [Written.NO, Written.NO]
