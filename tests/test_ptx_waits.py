"""Spin waits through memory, barriers and calls, on hand-written PTX: where addresses point
(compiler/ptx/memory.py), what values depend on (flow.py), which loops wait (spin.py), the
loops themselves (cfg.py) and the components they are found in (graph.py). NVRTC output of
each class is in tests/corpus/soundness/ (spin_shared_*, spin_syncthreads_*,
spin_noinline_out_*, and their clean twins)."""

from __future__ import annotations

import random

import pytest

from pipec.compiler import ptx
from pipec.compiler.ptx.cfg import exits, loops
from pipec.compiler.ptx.flow import BlockTaint, Effect, ModuleFlow, Summary
from pipec.compiler.ptx.graph import components
from pipec.compiler.ptx.memory import ANY, Base, Bases, access

from test_ptx_analysis import module


def device(body: str, extra: str = "", name: str = "f", params: int = 2) -> ptx.PtxModule:
    """A module holding a device function `f` of `params` parameters, and `extra`."""
    declared = ", ".join(f".param .b64 {name}_param_{i}" for i in range(params))
    return ptx.parse(f"""
{extra}
.func {name}({declared})
{{
  .loc 1 1 1
{body}
  ret;
}}
  .file 1 "f.cu"
""")


def spins(m: ptx.PtxModule, name: str = "k") -> list[str]:
    return [f.instruction for f in m.findings(name) if f.rule == "spin-wait"]


# graph.py


def _brute_components(edges: dict[int, list[int]], nodes: list[int]) -> set[frozenset[int]]:
    reach = {}
    for start in nodes:
        seen, stack = {start}, [start]
        while stack:
            for following in edges.get(stack.pop(), []):
                if following not in seen:
                    seen.add(following)
                    stack.append(following)
        reach[start] = seen
    return {frozenset(b for b in reach if a in reach[b] and b in reach[a]) for a in reach}


def test_components_are_those_of_the_definition_and_come_after_what_they_reach():
    rng = random.Random(7)
    for _ in range(300):
        size = rng.randint(1, 9)
        edges = {a: [rng.randrange(size) for _ in range(rng.randint(0, 3))] for a in range(size)}
        found = components(range(size), lambda n: edges[n])
        assert {frozenset(c) for c in found} == _brute_components(edges, list(range(size)))
        assert sorted(n for c in found for n in c) == list(range(size))
        order = {n: i for i, c in enumerate(found) for n in c}
        assert all(order[b] <= order[a] for a in edges for b in edges[a])


def test_components_reach_only_from_their_roots_and_need_no_recursion():
    chain = {n: [n + 1] for n in range(100_000)}
    found = components([0], lambda n: chain.get(n, []))
    assert len(found) == 100_001 and found[0] == [100_000] and found[-1] == [0]
    assert components([2, 2], lambda n: {2: [3], 3: [2]}[n]) in ([[3, 2]], [[2, 3]])
    assert components([], lambda n: [n]) == []


# memory.py


def bases(m: ptx.PtxModule, name: str) -> Bases:
    return Bases(m.functions[name])


def test_an_address_keeps_its_symbol_and_its_offset_while_it_stays_constant():
    found = bases(module("""
  mov.u32 %r1, smem;
  add.s32 %r2, %r1, 8;
  sub.s32 %r3, %r2, 4;
  add.s32 %r4, 16, %r1;
  cvt.u64.u32 %rd1, %r4;
  mov.u64 %rd2, %rd1;
  ld.global.u32 %r5, [%rd9];
  mul.wide.u32 %rd3, %r5, 4;
  add.s64 %rd4, %rd1, %rd3;
  mad.lo.s32 %r6, %r5, 4, %r1;
  mad.lo.s32 %r7, %r1, 4, %r5;
  add.s32 %r8, %r1, %r5;
  selp.b32 %r10, %r1, %r2, %p1;
  sub.s32 %r11, 4, %r1;
  and.b32 %r12, %r1, -16;
  setp.eq.s32 %p2, %r1, 0;
  selp.b32 %r13, %r1, %r5, %p1;
  add.s32 %r14, %r5, 4;
  selp.b32 %r16, %r2, 0, %p1;
  mad.lo.s32 %r15, %r5, %r1, %r9;
  ld.param.u32 %r17, [k_param_0];
  add.s32 %r18, %r1, %r17;
"""), "k")
    assert found.base("%r16") == Base(None, "smem", 8) and found.base("%r15") is None
    assert found.base("%r18") == Base(None, "smem", None)  # a kernel's scalar is an index
    assert found.base("%r1") == Base(None, "smem", 0)
    assert [found.base(r).offset for r in ("%r2", "%r3", "%r4", "%rd1", "%rd2")] == [8, 4, 16, 16, 16]
    assert found.base("%r5") == Base(None, None, None)  # loaded: any pointer
    assert found.base("%rd3") is None  # an index
    assert found.base("%rd4") == Base(None, "smem", None)  # a symbol plus a loaded index
    assert found.base("%r6") == Base(None, "smem", None) and found.base("%r7") == Base(None, None, None)
    assert found.base("%r8") == Base(None, "smem", None)
    assert found.base("%r10") == Base(None, "smem", None)  # two offsets of one symbol
    assert found.base("%r11") == Base(None, "smem", None) and found.base("%r12") == Base(None, "smem", None)
    assert found.base("%p2") is None
    assert found.base("%r13") == Base(None, None, None)  # either pointer: anything
    assert found.base("%r14") == Base(None, None, None)
    assert found.base("%r1", "%r2") == Base(None, "smem", None) and found.base() is None


def test_origins_gather_over_every_definition_of_a_register():
    found = bases(module("""
  mov.u32 %r1, smem;
$L_top:
  add.s32 %r1, %r1, 4;
  @%p1 bra $L_top;
  mov.u32 %r2, smem;
  mov.u32 %r2, other;
  cvta.shared.u64 %rd1, %r1;
  cvta.to.local.u64 %rd2, %rd5;
  cvta.global.u64 %rd3, gvar;
  mov.u64 %rd6, %SP;
  cvta.shared.u64 %rd7, %r3;
  mov.u32 %r3, smem;
  add.s32 %r4, %r3, 4;
  mov.b64 %rd8, {%r1, %r1};
"""), "k")
    assert found.base("%r1") == Base(None, "smem", None)
    assert found.base("%r2") == Base(None, None, None)
    assert found.base("%rd1") == Base("shared", "smem", None)
    assert found.base("%rd2") is None and found.base("%rd6") is None  # %rd5, %SP: never defined here
    assert found.base("%rd3") == Base("global", "gvar", 0)
    assert found.base("%rd7") == Base("shared", "smem", 0)  # defined after its use: one more pass
    assert found.base("%r4") == Base(None, "smem", 4) and found.base("%rd8") is None


def test_an_address_operand_is_a_base_and_a_constant_either_way():
    found = bases(module("  mov.u32 %r1, smem;"), "k")
    assert found.operand("[%r1+8]") == Base(None, "smem", 8) and found.operand("[ %r1 - 4 ]") == Base(None, "smem", -4)
    assert found.operand("[smem+0x10]") == Base(None, "smem", 16) and found.operand("[%r1, {%r2}]") == Base(None, "smem", 0)
    assert found.operand("%r1") is None and found.operand("[%r9]") is None and found.operand("[64]") is None


def test_a_register_used_before_its_definition_gets_its_origins_in_a_later_pass():
    late = bases(module("  cvta.shared.u64 %rd7, %r3;\n  mov.u32 %r3, smem;"), "k")
    assert late.base("%rd7") == Base("shared", "smem", 0)
    # the pointer's offset becomes unknown only when the loop moves it, after its use was read
    moved = bases(module("""
  mov.u32 %r1, smem;
$L_top:
  cvta.shared.u64 %rd7, %r1;
  add.s32 %r1, %r1, 4;
  @%p1 bra $L_top;
"""), "k")
    assert moved.base("%rd7") == Base("shared", "smem", None)
    # an offset found unknown in a pass that finds nothing new reaches an earlier use in one more
    relayed = bases(module("""
  mov.u32 %r1, smem;
  mov.u32 %r6, %r1;
  mov.u32 %r7, %r1;
$L_top:
  mov.u32 %r5, %r7;
  mov.u32 %r7, %r6;
  add.s32 %r6, %r6, 4;
  @%p1 bra $L_top;
"""), "k")
    assert relayed.base("%r5") == Base(None, "smem", None)


def test_a_statement_cut_short_in_inline_assembly_is_read_without_failing():
    m = module("""
  ld.param.u32 %r1;
  ld.global.u32 %r2;
  cp.async.ca [%r1], [%rd1], 16;
  bar.red.popc.u32 %r2, %p1;
  atom.global.add.u32 %r2, [%rd9];
  cp.async.ca.shared.global [smem], [%rd1];
  cp.async.ca.shared [smem], [other], 4;
""")
    function = m.functions["k"]
    found = [access(function, i, Bases(function)) for i in function.instructions[:7]]
    assert found[:4] == [None, None, None, None] and not found[4].advances
    assert (found[5].writes, found[5].poll) == ((("shared", "smem", None),), "plain")  # no width: all of it
    assert (found[6].reads, found[6].writes) == ((("shared", "other", 0),), (("shared", "smem", 0),))
    assert Bases(function).base("%r1") is None


def test_parameters_are_a_kernels_global_memory_and_a_device_functions_callers():
    kernel = bases(module("  ld.param.u64 %rd1, [k_param_1];\n  ld.param.u64 %rd2, [%rd9+8];"), "k")
    assert kernel.base("%rd1") == Base("global", None, None) and kernel.base("%rd2") is None
    helper = bases(device("""
  ld.param.u64 %rd1, [f_param_1];
  ld.param.b32 %r1, [retval0];
  atom.global.add.u32 %r2, [%rd1], 1;
  ld.param.u64 %rd2, [f_param_0];
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u64 %rd4, [%rd1];
  add.s64 %rd5, %rd4, %rd1;
"""), "f")
    assert [helper.base(r) for r in ("%rd1", "%r1", "%r2", "%rd3", "%rd5")] == [
        Base(None, 1, 0), Base(None, None, None), Base(None, None, None), Base(None, None, None), Base(None, 1, None)]


def test_a_base_is_what_two_bases_have_in_common():
    assert Base("shared", "a", 0).join(Base("shared", "a", 4)) == Base("shared", "a", None)
    assert Base("shared", "a", 0).join(Base("shared", "b", 0)) == Base("shared", None, None)
    assert Base("local", "a", 0).join(Base(None, "a", 0)) == Base(None, "a", 0)


def what(text: str, setup: str = "", m=None, name: str = "k"):
    """The access of the last instruction of `setup` + `text`."""
    m = m or module(setup + f"\n  {text};")
    function = m.functions[name]
    found = access(function, function.instructions[-2 if name == "k" else -1], Bases(function))
    return None if found is None else (found.reads, found.writes, found.poll)


SHARED = "  mov.u32 %r1, smem;\n  cvta.shared.u64 %rd3, %r1;\n  mov.u64 %SPL, __local_depot0;\n" \
         "  cvta.local.u64 %SP, %SPL;\n  add.u64 %rd4, %SP, 8;"


@pytest.mark.parametrize("text, found", [
    ("ld.shared.u32 %r2, [%r1+4]", ((("shared", "smem", 1),), (), None)),
    ("ld.shared.u8 %r2, [%r1+7]", ((("shared", "smem", 1),), (), None)),
    ("ld.shared.v4.u32 {%r2, %r3, %r4, %r5}, [%r1+4]", (tuple(("shared", "smem", w) for w in (1, 2, 3, 4)), (), None)),
    ("ld.shared.b64 %rd2, [smem+12]", ((("shared", "smem", 3), ("shared", "smem", 4)), (), None)),
    ("ld.shared.f16x2 %r2, [%r1]", ((("shared", "smem", 0),), (), None)),
    ("ld.shared.v2.bf16x2 {%r2, %r3}, [%r1]", ((("shared", "smem", 0), ("shared", "smem", 1)), (), None)),
    ("ld.shared.pred %p2, [%r1]", ((("shared", "smem", None),), (), None)),  # no width: the whole variable
    ("ld.shared.u8 %r2, [%r1+4]", ((("shared", "smem", 1),), (), None)),
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r2, %r3, %r4, %r5}, [%r1+16]",
     (tuple(("shared", "smem", w) for w in (4, 5, 6, 7)), (), None)),
    ("ld.volatile.shared::cta.u32 %r2, [%r9]", ((("shared", None, None),), (), None)),
    ("ld.u32 %r2, [%rd3+4]", ((("shared", "smem", 1),), (), None)),  # generic, provably shared
    ("ld.volatile.u32 %r2, [%rd4]", ((("local", 2),), (), None)),
    ("ld.local.u32 %r2, [%SPL+4]", ((("local", 1),), (), None)),
    ("ld.local.u32 %r2, [%rd9]", ((ANY,), (), None)),
    ("ld.volatile.u32 %r2, [%rd9]", ((ANY,), (), "ordered")),  # generic of unknown origin
    ("ld.u32 %r2, [gvar]", ((ANY,), (), "plain")),
    ("ld.global.u32 %r2, [%rd9]", ((), (), "plain")),
    ("ld.relaxed.gpu.global.u32 %r2, [%rd9]", ((), (), "ordered")),
    ("ld.acquire.sys.u32 %r2, [%rd9]", ((ANY,), (), "ordered")),
    ("ld.global.cv.u32 %r2, [%rd9]", ((), (), "ordered")),
    ("ld.global.cg.u32 %r2, [%rd9]", ((), (), "plain")),
    ("multimem.ld_reduce.acquire.gpu.global.add.u32 %r2, [%rd9]", ((), (), "ordered")),
    ("multimem.ld_reduce.global.add.u32 %r2, [%rd9]", ((), (), "plain")),
    ("suld.b.1d.b32.trap {%r2}, [%rd9, {%r3}]", ((ANY,), (), "plain")),
    ("ld.global.nc.u32 %r2, [%rd9]", None),
    ("ld.const.u32 %r2, [%rd9]", None),
    ("ldu.global.u32 %r2, [%rd9]", None),
    ("ld.param.u32 %r2, [k_param_0]", None),
    ("prefetch.global.L2 [%rd9]", None),
    ("mov.u32 %r2, %r3", None),
    ("membar.gl", None),
    ("bar.sync 0", None),
    ("st.shared.u32 [%r1+8], %r2", ((), (("shared", "smem", 2),), None)),
    ("st.u32 [%rd3], %r2", ((), (("shared", "smem", 0),), None)),
    ("st.global.u32 [%rd9], %r2", ((), (), None)),
    ("st.u32 [%rd9], %r2", ((), (ANY,), None)),
    ("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2}", ((), (("shared", "smem", w) for w in range(4)), None)),
    ("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%r1], %r2, [%r3]",
     ((), (("shared", "smem", 0),), None)),
    ("red.shared.add.u32 [%r1], 1", ((("shared", "smem", 0),), (("shared", "smem", 0),), None)),
    ("red.global.add.u32 [%rd9], 1", ((), (), None)),
    ("atom.shared.add.u32 %r2, [%r1], 1", ((("shared", "smem", 0),), (("shared", "smem", 0),), None)),
    ("atom.global.cas.b32 %r2, [%rd9], 0, 1", ((), (), "plain")),
    ("atom.cas.b32 %r2, [%rd9], 0, 1", ((ANY,), (ANY,), "plain")),
    ("cp.async.ca.shared.global [%r1+16], [%rd9], 16", ((), (tuple(("shared", "smem", w) for w in range(4, 8))), "plain")),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd9], 64, [%r3]",
     ((), (("shared", "smem", None),), "plain")),
    ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r1], [other], 64, [%r3]",
     ((("shared", "other", None),), (("shared", "smem", None),), None)),
    ("cp.async.bulk.global.shared::cta.bulk_group [%rd9], [%r1], 64", None),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd9], [%r1], 64", None),
    ("cp.async.bulk.prefetch.L2.global [%rd9], 64", None),
    ("cp.async.wait_group 0", None),
])
def test_where_an_access_goes(text, found):
    expected = None if found is None else tuple(tuple(part) if not isinstance(part, (str, type(None))) else part
                                                for part in found)
    assert what(text, SHARED) == expected


def test_a_barrier_reduction_passes_its_operands_to_a_cell_of_its_own():
    m = module("""
  bar.red.or.pred %p2, 0, %p1;
  barrier.cta.red.and.aligned.pred %p3, 1, !%p1;
  barrier.red.popc.u32 %r1, %r5, %p1;
  bar.red.popc.u32 %r2;
""")
    function = m.functions["k"]
    found = [access(function, i, Bases(function)) for i in function.instructions[:4]]
    assert [(a.reads, a.writes, a.data) for a in found[:3]] == [
        ((("barrier", "k", 0),), (("barrier", "k", 0),), ("%p1",)),
        ((("barrier", "k", 1),), (("barrier", "k", 1),), ("%p1",)),
        ((("barrier", "k", "%r5"),), (("barrier", "k", "%r5"),), ("%r5", "%p1")),  # not aligned: by barrier
    ]
    assert found[3] is None


@pytest.mark.parametrize("text, advances", [
    ("atom.global.add.u32 %r2, [%rd9], 1", True),
    ("atom.global.inc.u32 %r2, [%rd9], %r3", True),
    ("atom.global.sub.u32 %r2, [%rd9], 2", True),
    ("atom.relaxed.gpu.global.dec.u32 %r2, [%rd9], 9", True),
    ("atom.global.add.u32 %r2, [%rd9], 0", False),
    ("atom.global.add.u32 %r2, [%rd9], 0x0", False),
    ("atom.global.add.f32 %f2, [%rd9], 0f00000000", False),
    ("atom.global.add.f32 %f2, [%rd9], 0f80000000", False),
    ("atom.global.add.f64 %fd2, [%rd9], 0d0000000000000000", False),
    ("atom.global.add.f32 %f2, [%rd9], 0f3F800000", True),
    ("atom.global.exch.b32 %r2, [%rd9], 1", False),
    ("atom.global.or.b32 %r2, [%rd9], 0", False),
    ("atom.shared.add.u32 %r2, [%r1], 1", False),  # shared memory: a cell of its own
    ("atom.global.add.u32 %r2", False),
])
def test_an_atomic_that_moves_the_memory_it_reads_advances(text, advances):
    m = module(SHARED + f"\n  {text};")
    function = m.functions["k"]
    found = access(function, function.instructions[-2], Bases(function))
    assert (found is not None and found.advances) == advances


def test_an_access_through_a_device_functions_parameter_is_the_callers_memory():
    m = device("""
  ld.param.u64 %rd1, [f_param_0];
  cvta.to.local.u64 %rd2, %rd1;
  cvta.to.global.u64 %rd3, %rd1;
  ld.param.u32 %r9, [f_param_1];
  ld.u32 %r1, [%rd1];
  st.local.u32 [%rd2+4], %r1;
  ld.global.u32 %r2, [%rd3];
  ld.shared.u32 %r3, [%r9];
""")
    function = m.functions["f"]
    found = [access(function, i, Bases(function)) for i in function.instructions[4:8]]
    assert [(a.reads, a.writes, a.poll) for a in found] == [
        ((("param", 0),), (), "plain"),  # generic: the caller's memory, or global
        ((), (("param", 0),), None),
        ((), (), "plain"),
        ((("param", 1),), (), None),
    ]
    assert [(a.address, a.data) for a in found[:2]] == [(("%rd1",), ()), (("%rd2",), ("%r1",))]
    generic_local = device("  ld.param.u64 %rd1, [f_param_0];\n  cvta.to.local.u64 %rd2, %rd1;\n"
                           "  ld.u32 %r1, [%rd2];")
    function = generic_local.functions["f"]
    load = access(function, function.instructions[2], Bases(function))
    assert (load.reads, load.poll) == ((("param", 0),), None)  # provably the caller's local memory
    hinted = module("  ld.global.L2::cache_hint.u32 %r1, [%rd9], %rd5;").functions["k"]
    assert access(hinted, hinted.instructions[0], Bases(hinted)).address == ("%rd9",)


# cfg.py


def test_a_loop_is_the_cycle_through_its_branch_back_and_nothing_outside_it():
    m = module("""
  mov.u32 %r1, 0;
$L_outer:
  add.s32 %r1, %r1, 1;
$L_inner:
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, 8;
  @%p1 bra $L_inner;
  setp.lt.s32 %p2, %r1, 8;
  @%p2 bra $L_outer;
$L_self:
  @%p3 bra $L_self;
  bra.uni $L_after;
$L_early:
  ret;
$L_after:
  @%p4 bra $L_early;
""")
    function = m.functions["k"]
    found = {(loop.header, loop.latch): sorted(loop.body) for loop in loops(function)}
    assert found == {(2, 4): [2, 3, 4], (1, 6): [1, 2, 3, 4, 5, 6], (7, 7): [7]}
    assert exits(function, loops(function)[0]) == (["%p1"], True)
    assert exits(function, loops(function)[2]) == (["%p3"], True)


# flow.py


HELPERS = """
.func (.param .b32 peek_retval0) peek(.param .b64 peek_param_0)
{
  .loc 1 20 1
  ld.param.u64 %rd1, [peek_param_0];
  ld.volatile.global.u32 %r1, [%rd1];
  st.param.b32 [peek_retval0], %r1;
  ret;
}
.func status(.param .b64 status_param_0, .param .b64 status_param_1)
{
  .loc 1 30 1
  ld.param.u64 %rd1, [status_param_0];
  ld.param.u64 %rd2, [status_param_1];
  cvta.to.local.u64 %rd3, %rd2;
  ld.global.u32 %r1, [%rd1];
  st.local.u32 [%rd3], %r1;
  mov.u64 %SPL, __local_depot1;
  st.local.u32 [%SPL], %r1;
  ret;
}
.func publish(.param .b64 publish_param_0)
{
  .loc 1 40 1
  ld.param.u64 %rd1, [publish_param_0];
  ld.relaxed.gpu.global.u32 %r1, [%rd1];
  st.shared.u32 [seen+4], %r1;
  ld.shared.u32 %r2, [other];
  st.shared.u32 [copied], %r2;
  ret;
}
"""


def flow(body: str, extra: str = HELPERS) -> ModuleFlow:
    return ModuleFlow(module(body, extra=extra))


def test_a_functions_facts_name_each_calls_arguments_results_and_parameters():
    m = device("""
  ld.param.u64 %rd1, [f_param_0];
  ld.param.u64 %rd2, [f_param_1];
  { .param .b64 param0;
  st.param.b64 [param0+0], %rd1;
  .param .b64 param1;
  st.param.v2.b32 [param1+0], {%r1, %r2};
  @%p1 st.param.b64 [param1+8], %rd2;
  .param .b32 retval0;
  call.uni (retval0), peek, (param0, param1, param2);
  ld.param.b32 %r3, [retval0];
  }
  call.uni done, ();
  st.param.b32 [f_retval0], %r3;
""", extra=HELPERS)
    facts = ModuleFlow(m).facts["f"]
    assert facts.arguments == {5: [("%rd1",), ("%r1", "%r2", "%rd2", "%p1"), ()], 7: []}
    assert facts.results == {6: 5} and facts.params == {0: 0, 1: 1} and facts.returns == {8}
    entry = ModuleFlow(module("  ld.param.u64 %rd1, [k_param_0];\n  ld.param.b32 %r1, [retval0];")).facts["k"]
    assert entry.params == {} and entry.results == {}  # a kernel's parameters are constants; no call yet


def test_a_summary_says_what_a_helpers_result_and_writes_depend_on():
    summaries = flow("").summaries
    assert summaries["peek"] == Summary(Effect(frozenset({0}), frozenset({"ordered"})), {})
    assert summaries["status"] == Summary(Effect(), {("param", 1): Effect(frozenset({0, 1}), frozenset({"plain"}))})
    assert summaries["publish"].writes == {
        ("shared", "seen", 1): Effect(frozenset({0}), frozenset({"ordered"})),
        ("shared", "copied", 0): Effect(cells=frozenset({("shared", "other", 0)})),
    }
    assert summaries["k"] == Summary()


def test_a_call_is_its_callees_summary_seen_from_the_call():
    calls = """
  ld.param.u64 %rd1, [k_param_0];
  mov.u64 %SPL, __local_depot0;
  cvta.local.u64 %SP, %SPL;
  add.u64 %rd2, %SP, 8;
  { .param .b64 param0; st.param.b64 [param0+0], %rd1;
  .param .b64 param1; st.param.b64 [param1+0], %rd2;
  call.uni status, (param0, param1); }
  { .param .b64 param0; st.param.b64 [param0+0], %rd1;
  call.uni publish, (param0); }
"""
    summary = flow(calls).summaries["k"]
    assert summary.writes == {  # the local frame stays inside; shared memory is everyone's
        ("shared", "seen", 1): Effect(polls=frozenset({"ordered"})),
        ("shared", "copied", 0): Effect(cells=frozenset({("shared", "other", 0)})),
    }


def test_a_call_that_cannot_be_followed_reads_and_writes_anything():
    extern = ".extern .func elsewhere(.param .b64 elsewhere_param_0);\n.extern .func vprintf();\n"
    anything = Effect(frozenset({0}), frozenset({"plain"}), frozenset({ANY}))
    called = flow("  { .param .b64 param0; st.param.b64 [param0+0], %rd1;\n  call.uni elsewhere, (param0); }\n"
                  "  call.uni vprintf, ();", extra=extern)
    function = called.module.functions["k"]
    assert called.call_summary(function.instructions[1], 1) == Summary(anything, {ANY: anything})
    assert called.call_summary(function.instructions[2], 0) == Summary()
    assert called.call_summary(function.instructions[0], 1) == Summary()  # no call at all
    table = ".global .align 8 .u64 table[2] = {peek, publish};\n"
    indirect = flow("  call (retval0), %rd5, (param0), prototype_1;", extra=HELPERS + table)
    found = indirect.call_summary(indirect.module.functions["k"].instructions[0], 1)
    assert found.result == Effect(frozenset({0}), frozenset({"ordered"}))
    assert set(found.writes) == {("shared", "seen", 1), ("shared", "copied", 0)}
    nothing = flow("  call (retval0), %rd5, (param0), prototype_1;", extra="")
    assert nothing.call_summary(nothing.module.functions["k"].instructions[0], 1).writes == {
        ANY: Effect(frozenset({0}), frozenset({"plain"}), frozenset({ANY}))}


def test_summaries_of_a_recursion_settle_whatever_it_passes_round():
    # rotate(a, b, c) writes a polled value through c, then calls rotate(b, c, a)
    rotate = """
.func rotate(.param .b64 rotate_param_0, .param .b64 rotate_param_1, .param .b64 rotate_param_2)
{
  ld.param.u64 %rd1, [rotate_param_0];
  ld.param.u64 %rd2, [rotate_param_1];
  ld.param.u64 %rd3, [rotate_param_2];
  ld.volatile.global.u32 %r1, [%rd9];
  st.u32 [%rd3], %r1;
  { .param .b64 param0; st.param.b64 [param0+0], %rd2;
  .param .b64 param1; st.param.b64 [param1+0], %rd3;
  .param .b64 param2; st.param.b64 [param2+0], %rd1;
  call.uni rotate, (param0, param1, param2); }
  ret;
}
"""
    summary = flow("", extra=rotate).summaries["rotate"]
    assert set(summary.writes) == {("param", 0), ("param", 1), ("param", 2)}
    assert all(effect.polls == {"ordered"} for effect in summary.writes.values())


@pytest.mark.parametrize("tainted, read, found", [
    ([("shared", "s", 1)], ("shared", "s", 1), True),
    ([("shared", "s", 1)], ("shared", "s", 2), False),
    ([("shared", "s", 1)], ("shared", "s", None), True),
    ([("shared", "s", 1)], ("shared", "t", 1), False),
    ([("shared", "s", 1)], ("shared", "t", None), False),
    ([("shared", "s", 1)], ("shared", None, None), True),
    ([("shared", "s", None)], ("shared", "s", 7), True),
    ([("shared", None, None)], ("shared", "t", 7), True),
    ([ANY], ("shared", "t", 7), True),
    ([("param", 0)], ("shared", "t", 7), True),
    ([("shared", "s", 1)], ANY, True),
    ([("shared", "s", 1)], ("param", 1), True),
    ([], ANY, False),
    ([("shared", "s", 1)], ("local", 1), False),
    ([ANY], ("local", None), False),  # a thread's own frame
    ([("barrier", "k", 3)], ("barrier", "k", 3), True),
    ([("barrier", "k", 3)], ("barrier", "k", 4), False),
    ([ANY], ("barrier", "k", 4), False),
])
def test_what_a_read_of_block_memory_may_find_that_others_polled(tainted, read, found):
    taint = BlockTaint()
    for cell in tainted:
        taint.add(cell)
    assert taint.reads(read) is found
    copy = BlockTaint()
    copy.update(taint)
    assert copy.reads(read) is found


def test_a_kernels_block_taint_follows_copies_and_reaches_every_function_it_calls():
    # publish polls into `seen`; the kernel copies `seen` into `relay` and `copied` is filled from
    # `other`, which nobody polls; `unused` is called by no kernel
    extra = HELPERS + ".func unused()\n{\n  st.shared.u32 [lonely], %r1;\n  ret;\n}\n"
    found = flow("""
  { .param .b64 param0; st.param.b64 [param0+0], %rd1;
  call.uni publish, (param0); }
  ld.shared.u32 %r1, [seen+4];
  st.shared.u32 [relay], %r1;
  ld.shared.u32 %r2, [relay];
  st.shared.u32 [relay2+8], %r2;
""", extra=extra).taint
    cells = {("shared", "seen", 1), ("shared", "relay", 0), ("shared", "relay2", 2)}
    assert found["k"].cells == cells and found["publish"].cells == cells
    assert found["peek"].cells == set() and found["unused"].cells == set()


# spin.py


def shared_copy(load: str, step: str = "", read: str = "ld.shared.u32 %r3, [seen]") -> str:
    """Thread 0 polls into `seen`; the block loops on what it reads back (and on %p2 after `step`)."""
    return f"""
  mov.u32 %r1, %tid.x;
  setp.ne.s32 %p1, %r1, 0;
$L_wait:
  @%p1 bra $L_read;
  .loc 1 5 1
  {load};
  st.shared.u32 [seen], %r2;
$L_read:
  bar.sync 0;
  .loc 1 7 1
  {read};
  {step}
  setp.eq.s32 %p2, %r3, 0;
  @%p2 bra $L_wait;
"""


@pytest.mark.parametrize("load, step, spins_at", [
    ("ld.volatile.global.u32 %r2, [%rd1]", "", "ld.volatile.global.u32 %r2, [%rd1]"),
    ("ld.global.u32 %r2, [%rd1]", "", "ld.global.u32 %r2, [%rd1]"),
    ("ld.volatile.global.u32 %r2, [%rd1]", "add.s32 %r4, %r4, 1;\n  setp.lt.s32 %p3, %r4, 9;\n  @%p3 bra $L_out;",
     "ld.volatile.global.u32 %r2, [%rd1]"),  # ordered: a timeout beside it is still a wait
    ("ld.global.u32 %r2, [%rd1]", "add.s32 %r4, %r4, 1;\n  setp.lt.s32 %p3, %r4, 9;\n  @%p3 bra $L_out;", None),
    ("ld.global.u32 %r2, [%rd1]", "mov.u32 %r2, 0;", "ld.global.u32 %r2, [%rd1]"),
    ("mov.u32 %r2, 1", "", None),  # a flag within the block
    ("ld.shared.u32 %r2, [other]", "", None),
])
def test_a_block_that_loops_on_what_one_thread_polled_into_shared_memory_waits(load, step, spins_at):
    m = module(shared_copy(load, step) + "$L_out:")
    assert spins(m) == ([spins_at] if spins_at else [])


def test_a_poll_into_another_word_or_variable_is_not_what_the_block_loops_on():
    disjoint = shared_copy("ld.volatile.global.u32 %r2, [%rd1]", read="ld.shared.u32 %r3, [seen+4]")
    assert spins(module(disjoint.replace("st.shared.u32 [seen]", "st.shared.u32 [other]"))) == []
    assert spins(module(disjoint)) == []
    overlapping = disjoint.replace("st.shared.u32 [seen], %r2", "st.shared.v2.u32 [seen], {%r2, %r2}")
    assert spins(module(overlapping)) == ["ld.volatile.global.u32 %r2, [%rd1]"]
    unknown = shared_copy("ld.volatile.global.u32 %r2, [%rd1]", read="ld.shared.u32 %r3, [%r9]")
    assert spins(module(unknown)) == ["ld.volatile.global.u32 %r2, [%rd1]"]


SHARED_COUNTER = """
  mov.u32 %r7, {symbol};
  ld.global.u32 %r11, [%rd2];
  add.s32 %r10, %r7, %r11;
$L_wait:
  @%p1 bra $L_read;
  ld.global.u32 %r2, [%rd1];
  st.shared.u32 [seen], %r2;
  ld.shared.u32 %r5, [{address}];
  add.s32 %r6, %r5, 1;
  st.shared.u32 [{address}], %r6;
$L_read:
  bar.sync 0;
  ld.shared.u32 %r3, [seen];
  ld.shared.u32 %r8, [{address}];
  setp.eq.s32 %p2, %r3, 0;
  setp.lt.s32 %p3, %r8, 9;
  and.pred %p4, %p2, %p3;
  @%p4 bra $L_wait;
"""


@pytest.mark.parametrize("symbol, address, bounded", [
    ("count", "count", True),  # one word of shared memory the loop advances: a counter
    ("count", "%r7+8", True),
    ("count", "%r10", False),  # an offset loaded before the loop: no one word
    ("count", "%r9", False),  # somewhere in shared memory: it may or may not be the counter
])
def test_a_counter_in_shared_memory_bounds_a_plain_poll_only_where_the_address_pins_it(symbol, address, bounded):
    m = module(SHARED_COUNTER.format(symbol=symbol, address=address))
    assert spins(m) == ([] if bounded else ["ld.global.u32 %r2, [%rd1]"])


@pytest.mark.parametrize("space, at", [("shared", "count"), ("local", "%SPL")])
def test_a_word_written_where_the_address_does_not_pin_it_is_no_counter(space, at):
    counted = f"""
  mov.u64 %SPL, __local_depot0;
  ld.global.u32 %r11, [%rd2];
  add.s32 %r10, %r11, {at};
$L_wait:
  ld.global.u32 %r2, [%rd1];
  ld.{space}.u32 %r5, [{at}];
  add.s32 %r6, %r5, 1;
  st.{space}.u32 [{{written}}], %r6;
  setp.eq.s32 %p2, %r2, %r5;
  @%p2 bra $L_wait;
"""
    assert spins(module(counted.format(written=at))) == []
    assert spins(module(counted.format(written="%r10"))) == ["ld.global.u32 %r2, [%rd1]"]


def test_a_value_another_warp_polled_outside_the_loop_is_shown_where_the_loop_reads_it():
    body = """
  @%p1 bra $L_consumer;
  ld.volatile.global.u32 %r2, [%rd1];
  st.shared.u32 [ready], %r2;
  bra.uni $L_done;
$L_consumer:
  .loc 1 8 1
  ld.volatile.shared.u32 %r3, [ready];
  {step}
  setp.eq.s32 %p2, %r3, 0;
  @%p2 bra $L_consumer;
$L_done:
"""
    assert spins(module(body.format(step=""))) == ["ld.volatile.shared.u32 %r3, [ready]"]
    counted = "add.s32 %r4, %r4, 1;\n  setp.gt.s32 %p3, %r4, 9;\n  @%p3 bra $L_done;"
    assert spins(module(body.format(step=counted))) == []  # a plain read: the counter bounds it
    assert spins(module(body.format(step="").replace("ld.volatile.global", "ld.global.nc"))) == []


def test_a_barrier_reduction_carries_what_each_thread_passes_to_its_result():
    body = """
$L_wait:
  @%p1 bra $L_vote;
  .loc 1 4 1
  ld.global.u32 %r8, [%rd1];
$L_vote:
  setp.eq.s32 %p2, %r8, 0;
  {{ .reg .pred %p1; .reg .pred %p2;
  setp.ne.u32 %p1, %r5, 0;
  .loc 1 6 1
  bar.red.or.pred %p2, 0, %p1; selp.u32 %r6, 1, 0, %p2; }}
  selp.u32 %r5, 1, 0, %p2;
  {extra}
  setp.ne.s32 %p3, {result}, 0;
  @%p3 bra $L_wait;
"""
    m = module(body.format(extra="", result="%r6"))
    assert spins(m) == ["ld.global.u32 %r8, [%rd1]"]
    # the others' loop, through the reduction alone, is a wait of its own
    others = body.format(extra="", result="%r6").replace("@%p3 bra $L_wait;", "@%p3 bra $L_vote;")
    assert spins(module(others)) == ["bar.red.or.pred %p2, 0, %p1"]
    # what a thread passes depends on the previous result: a value carried through the barrier
    carried = body.format(extra="", result="%r6").replace("selp.u32 %r5, 1, 0, %p2;", "mov.u32 %r5, %r6;")
    assert spins(module(carried)) == []
    # a second reduction of the first one's result is no cycle: each result is its own barrier's
    second = "{ .reg .pred %p5; setp.ne.u32 %p5, %r6, 0; bar.red.and.pred %p6, 1, %p5; }\n  selp.u32 %r7, 1, 0, %p6;"
    assert spins(module(body.format(extra=second, result="%r7"))) == ["ld.global.u32 %r8, [%rd1]"]


def test_a_status_returned_through_a_reference_is_the_poll_of_the_call():
    body = """
  ld.param.u64 %rd1, [k_param_0];
  mov.u64 %SPL, __local_depot0;
  cvta.local.u64 %SP, %SPL;
  add.u64 %rd2, %SP, 8;
  add.u64 %rd3, %SPL, 8;
$L_wait:
  .loc 1 9 1
  {{ .param .b64 param0; st.param.b64 [param0+0], %rd1;
  .param .b64 param1; st.param.b64 [param1+0], %rd2;
  call.uni status, (param0, param1); }}
  ld.local.u32 %r1, [{read}];
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_wait;
"""
    assert spins(module(body.format(read="%rd3"), extra=HELPERS)) == ["call.uni status, (param0, param1)"]
    assert spins(module(body.format(read="%SPL+8"), extra=HELPERS)) == ["call.uni status, (param0, param1)"]
    moved = body.format(read="%rd3").replace("$L_wait:", "$L_wait:\n  add.s64 %rd1, %rd1, 4;")
    assert spins(module(moved, extra=HELPERS)) == []  # each call reads the next word


def test_an_atomic_add_that_moves_the_counter_it_polls_ends_the_loop_itself():
    queue = """
$L_next:
  atom.global.add.u32 %r1, [%rd1], {step};
  setp.lt.s32 %p1, %r1, %r9;
  @%p1 bra $L_next;
"""
    assert spins(module(queue.format(step="1"))) == []
    assert spins(module(queue.format(step="0"))) == ["atom.global.add.u32 %r1, [%rd1], 0"]


def test_a_counter_is_carried_through_however_many_registers():
    assert spins(module("""
$L_wait:
  ld.global.u32 %r1, [%rd1];
  mov.u32 %r2, %r3;
  add.s32 %r3, %r2, 1;
  setp.eq.s32 %p1, %r1, %r3;
  @%p1 bra $L_wait;
""")) == []


def test_a_wait_is_shown_at_its_first_poll_with_a_line_else_where_it_branches_back():
    body = """
$L_wait:
  .loc 1 0 5
  ld.volatile.global.u32 %r1, [%rd1];
  .loc 1 {line} 5
  ld.volatile.global.u32 %r2, [%rd2];
  .loc 1 8 5
  add.s32 %r3, %r1, %r2;
  setp.eq.s32 %p1, %r3, 0;
  @%p1 bra $L_wait;
"""
    (lined,) = module(body.format(line=1)).findings("k")
    assert (lined.instruction, lined.location.line) == ("ld.volatile.global.u32 %r2, [%rd2]", 1)
    (made_up,) = module(body.format(line=0)).findings("k")
    assert (made_up.instruction, made_up.location.line) == ("ld.volatile.global.u32 %r1, [%rd1]", 8)
    (first,) = module(body.format(line=0).replace(".loc 1 0 5", ".loc 1 6 5", 1)).findings("k")
    assert (first.instruction, first.location.line) == ("ld.volatile.global.u32 %r1, [%rd1]", 6)


def test_an_atomic_read_at_an_address_a_counter_moves_is_bounded():
    assert spins(module("""
$L_scan:
  mul.wide.s32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  atom.global.add.u32 %r1, [%rd4], 0;
  add.s32 %r4, %r4, 1;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra $L_scan;
""")) == []


COPY = """
  mov.u32 %r7, tile;
$L_wait:
  .loc 1 3 1
  {copy};
  cp.async.wait_all;
  bar.sync 0;
  ld.shared.u32 %r3, [tile];
  {step}
  setp.eq.s32 %p2, %r3, 0;
  @%p2 bra $L_wait;
"""


@pytest.mark.parametrize("copy, step, waits", [
    ("cp.async.ca.shared.global [tile], [%rd1], 4", "", True),  # a global read lands in shared memory
    ("cp.async.ca.shared.global [tile], [%rd1], 4", "add.s64 %rd1, %rd1, 4;", False),  # the source moves
    ("cp.async.ca.shared.global [%r7], [%rd1], 4", "add.s32 %r7, %r7, 4;", False),  # so does the target
    ("cp.async.ca.shared.global [other], [%rd1], 4", "", False),
])
def test_a_copy_from_global_into_shared_memory_is_a_poll_of_what_it_copies(copy, step, waits):
    assert spins(module(COPY.format(copy=copy, step=step))) == ([copy] if waits else [])


def test_a_shared_atomic_that_moves_its_word_is_a_counter():
    counted = """
$L_wait:
  ld.global.u32 %r1, [%rd1];
  {update}
  ld.shared.u32 %r5, [count];
  setp.eq.s32 %p1, %r1, 0;
  setp.lt.s32 %p2, %r5, 9;
  and.pred %p3, %p1, %p2;
  @%p3 bra $L_wait;
"""
    assert spins(module(counted.format(update="red.shared.add.u32 [count], 1;"))) == []
    assert spins(module(counted.format(update="atom.shared.add.u32 %r6, [count], 1;"))) == []
    assert spins(module(counted.format(update="st.shared.u32 [count], 1;"))) == ["ld.global.u32 %r1, [%rd1]"]


ORDERED_BESIDE_A_COUNTER = """
  mov.u64 %SPL, __local_depot0;
  ld.global.u32 %r11, [%rd2];
  add.s32 %r10, %r11, {symbol};
$L_wait:
  .loc 1 4 1
  ld.volatile.global.u32 %r2, [%rd1];
  {store};
  {read};
  add.s32 %r4, %r4, 1;
  setp.eq.s32 %p2, %r3, 0;
  setp.lt.s32 %p3, %r4, 9;
  and.pred %p4, %p2, %p3;
  @%p4 bra $L_wait;
"""


@pytest.mark.parametrize("symbol, store, read, ordered", [
    ("seen", "st.shared.u32 [%r10], %r2", "ld.shared.u32 %r3, [seen]", True),  # an unknown word of it
    ("seen", "st.shared.u32 [seen], %r2", "ld.shared.u32 %r3, [%r10]", True),
    ("seen", "st.shared.u32 [%r10], %r2", "ld.shared.u32 %r3, [%r10]", True),
    ("seen", "st.shared.u32 [seen+4], %r2", "ld.shared.u32 %r3, [seen]", False),
    ("seen", "st.shared.u32 [other], %r2", "ld.shared.u32 %r3, [%r10]", False),
    ("%SPL", "st.local.u32 [%SPL], %r2", "ld.local.u32 %r3, [%r10]", True),
    ("%SPL", "st.local.u32 [%r10], %r2", "ld.local.u32 %r3, [%SPL+4]", True),
    ("%SPL", "st.local.u32 [%SPL+8], %r2", "ld.local.u32 %r3, [%SPL+4]", False),
    ("%SPL", "st.local.u32 [%SPL], %r2", "ld.u32 %r3, [%rd9]", True),  # a pointer of unknown origin
])
def test_a_read_sees_every_write_that_may_overlap_it(symbol, store, read, ordered):
    # the exit also counts: only a read that sees the volatile load in the loop makes it a wait
    found = spins(module(ORDERED_BESIDE_A_COUNTER.format(symbol=symbol, store=store, read=read)))
    assert found == (["ld.volatile.global.u32 %r2, [%rd1]"] if ordered else [])


def test_a_copy_between_shared_variables_carries_what_it_copies():
    copied = ORDERED_BESIDE_A_COUNTER.format(
        symbol="seen", store="st.shared.u32 [seen], %r2;\n  cp.async.bulk.shared::cluster.shared::cta."
        "mbarrier::complete_tx::bytes [copy], [seen], 4, [%r9]", read="ld.shared.u32 %r3, [copy]")
    assert spins(module(copied)) == ["ld.volatile.global.u32 %r2, [%rd1]"]


def helper_body(read: str) -> str:
    return f"""
  ld.param.u64 %rd1, [f_param_0];
  ld.param.u64 %rd5, [f_param_1];
  cvta.to.local.u64 %rd2, %rd5;
  mov.u64 %SPL, __local_depot0;
$L_wait:
  ld.volatile.global.u32 %r2, [%rd9];
  st.u32 [%rd1], %r2;
  st.local.u32 [%SPL], %r2;
  {read};
  add.s32 %r4, %r4, 1;
  setp.eq.s32 %p2, %r3, 0;
  setp.lt.s32 %p3, %r4, 9;
  and.pred %p4, %p2, %p3;
  @%p4 bra $L_wait;
"""


def test_a_device_function_reads_what_it_wrote_through_a_pointer_wherever_it_points():
    assert spins(device(helper_body("ld.shared.u32 %r3, [seen]")), "f") == ["ld.volatile.global.u32 %r2, [%rd9]"]
    # the caller's memory is not the function's own frame
    elsewhere = helper_body("ld.local.u32 %r3, [%rd2]").replace("st.u32 [%rd1]", "st.global.u32 [%rd9]")
    assert spins(device(elsewhere), "f") == []


def test_a_call_passing_fewer_arguments_than_its_callee_reads_loses_nothing():
    short = """
$L_wait:
  .loc 1 6 1
  { .param .b32 retval0;
  call.uni (retval0), peek, ();
  ld.param.b32 %r1, [retval0]; }
  { .param .b64 param0; st.param.b64 [param0+0], %rd1;
  call.uni status, (param0); }
  ld.local.u32 %r2, [%SPL];
  add.s32 %r3, %r1, %r2;
  setp.eq.s32 %p1, %r3, 0;
  @%p1 bra $L_wait;
"""
    assert spins(module(short, extra=HELPERS)) == ["call.uni (retval0), peek, ()"]
    assert spins(module(short.replace("add.s32 %r3, %r1, %r2", "mov.u32 %r3, %r2"), extra=HELPERS)) == [
        "call.uni status, (param0)"]  # its write through the missing pointer lands anywhere


def test_a_result_depends_only_on_the_labels_its_own_values_reach():
    # the loop's counter depends on itself; the parameter feeds only the write
    counted = device("""
  ld.param.u64 %rd1, [f_param_0];
  ld.volatile.global.u32 %r1, [%rd9];
  st.u32 [%rd1], %r1;
  mov.u32 %r2, 0;
$L_count:
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, 9;
  @%p1 bra $L_count;
  st.param.b32 [f_retval0], %r2;
""")
    summary = ModuleFlow(counted).summaries["f"]
    assert summary.result == Effect() and summary.writes == {("param", 0): Effect(frozenset({0}), frozenset({"ordered"}))}


def test_a_mutual_recursion_is_summarised_until_nothing_changes():
    # one(a, b, c) calls two(b, c, a); two(a, b, c) writes a polled value through c and calls one(b, c, a)
    pair = ""
    for name, other, writes in (("one", "two", ""), ("two", "one", "  ld.volatile.global.u32 %r1, [%rd9];\n"
                                                                     "  st.u32 [%rd3], %r1;\n")):
        pair += f"""
.func {name}(.param .b64 {name}_param_0, .param .b64 {name}_param_1, .param .b64 {name}_param_2)
{{
  ld.param.u64 %rd1, [{name}_param_0];
  ld.param.u64 %rd2, [{name}_param_1];
  ld.param.u64 %rd3, [{name}_param_2];
{writes}  {{ .param .b64 param0; st.param.b64 [param0+0], %rd2;
  .param .b64 param1; st.param.b64 [param1+0], %rd3;
  .param .b64 param2; st.param.b64 [param2+0], %rd1;
  call.uni {other}, (param0, param1, param2); }}
  ret;
}}
"""
    summaries = flow("", extra=pair).summaries
    assert set(summaries["one"].writes) == set(summaries["two"].writes) == {("param", i) for i in range(3)}


def test_a_kernels_block_taint_reaches_copies_made_before_the_poll_in_program_order():
    found = flow("""
  ld.shared.u32 %r2, [relay];
  st.shared.u32 [relay2], %r2;
  ld.shared.u32 %r1, [seen+4];
  st.shared.u32 [relay], %r1;
  { .param .b64 param0; st.param.b64 [param0+0], %rd1;
  call.uni publish, (param0); }
""").taint["k"]
    assert {("shared", "relay", 0), ("shared", "relay2", 0)} <= found.cells
