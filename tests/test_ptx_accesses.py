"""What a kernel reads and writes through its parameters, through the pointers it loads from
their memory (a table of addresses) and through pointers of unknown origin
(compiler/ptx/writes.py), on hand-written PTX."""

from __future__ import annotations

import pytest

from pipec.compiler import ptx
from pipec.compiler.ptx.writes import LOADED, READ, WRITE, Summary, Via, dereferenced, read_address
from ptx_kernel import kernel_module

SETUP = """
  ld.param.u64 %rd1, [k_param_0];
  ld.param.u64 %rd2, [k_param_1];
  ld.param.u32 %r1, [k_param_2];
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
"""


def module(body: str, extra: str = "") -> ptx.AnalysedModule:
    return kernel_module(SETUP, f"  .loc 1 5 1\n{body}", ("u64", "u64", "u32"), extra)


def accesses(body: str, extra: str = "") -> dict[str, object]:
    """What the kernel touches: `direct`/`through` as {parameter: modes}, `unknown` as its modes."""
    summary = module(body, extra).accesses("k")
    found: dict[str, object] = {}
    for kind in ("direct", "through"):
        table: dict[int, str] = {}
        for mode, params in getattr(summary, kind).items():
            for param in params:
                table[param] = "".join(sorted(table.get(param, "") + mode))
        found[kind] = table
    found["unknown"] = "".join(sorted(summary.unknown))
    return found


@pytest.mark.parametrize("body, direct, through, unknown", [
    ("ld.global.f32 %f1, [%rd3];", {0: "r"}, {}, ""),
    ("ld.global.u64 %rd9, [%rd3]; ld.global.f32 %f1, [%rd9];", {0: "r"}, {0: "r"}, ""),
    ("ld.global.u64 %rd9, [%rd3]; st.global.f32 [%rd9], %f1;", {0: "r"}, {0: "w"}, ""),
    ("ld.global.u64 %rd9, [%rd3]; atom.global.add.f32 %f1, [%rd9], %f2;", {0: "r"}, {0: "rw"}, ""),
    ("ld.global.u64 %rd9, [%rd3]; ld.global.u64 %rd8, [%rd9]; ld.global.f32 %f1, [%rd8];",
     {0: "r"}, {0: "r"}, "r"),  # a table of tables: the second load is of unknown origin
    ("ld.global.u64 %rd9, [table]; ld.global.f32 %f1, [%rd9];", {}, {}, "r"),  # a __device__ variable
    ("ld.local.u64 %rd9, [%rd3]; st.global.f32 [%rd9], %f1;", {}, {}, "w"),
    ("ld.global.u32 %r9, [%rd3]; cvt.u64.u32 %rd9, %r9; ld.global.f32 %f1, [%rd9];", {0: "r"}, {}, ""),
    ("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd9, {%r1}];", {}, {}, "r"),  # wherever the handle points
    ("prefetch.global.L2 [%rd3];", {}, {}, ""),  # no data the kernel sees
    ("cp.async.bulk.prefetch.L2.global [%rd3], 64;", {}, {}, ""),
    ("cp.async.ca.shared.global [%r2], [%rd3], 16;", {0: "r"}, {}, ""),
    ("ld.shared.f32 %f1, [%r2];", {}, {}, ""),
])
def test_what_a_kernel_reads_and_writes_through_each_parameter(body, direct, through, unknown):
    assert accesses(body, extra=".global .u64 table[1];") == {"direct": direct, "through": through,
                                                                "unknown": unknown}


@pytest.mark.parametrize("offset, through", [
    ("mul.wide.s32 %rd8, %r1, 4;", {0: "r"}),     # a scaled index: the table's pointer is the base
    ("shl.b64 %rd8, %rd5, 2;", {0: "r"}),
    ("cvt.u64.u32 %rd8, %r1;", {0: "r"}),         # a widened 32-bit value is no pointer
    ("mov.b64 %rd8, %rd5;", {}),                  # an unscaled 64-bit parameter: taken for the base
])
def test_an_index_added_to_a_loaded_pointer_is_no_base(offset, through):
    found = accesses(f"""
  ld.param.u64 %rd5, [k_param_1];
  ld.global.u64 %rd9, [%rd3];
  {offset}
  add.s64 %rd7, %rd9, %rd8;
  ld.global.f32 %f1, [%rd7];
""")
    assert found["through"] == through


def test_mad_takes_its_addend_as_the_base():
    found = accesses("""
  ld.global.u64 %rd9, [%rd3];
  mad.wide.s32 %rd7, %r1, 4, %rd9;
  ld.global.f32 %f1, [%rd7];
  ld.global.u64 %rd8, [%rd4];
  mad.lo.s64 %rd6, %rd8, 4, %rd3;
  st.global.f32 [%rd6], %f1;
""")
    assert found == {"direct": {0: "rw", 1: "r"}, "through": {0: "r"}, "unknown": ""}


def test_a_32_bit_parameter_is_no_pointer():
    found = accesses("""
  cvt.u64.u32 %rd9, %r1;
  mov.u64 %rd8, table;
  add.s64 %rd7, %rd8, %rd9;
  ld.global.u64 %rd6, [%rd7];
  st.global.f32 [%rd6], %f1;
""", extra=".global .u64 table[4];")
    assert found == {"direct": {}, "through": {}, "unknown": "w"}


CALLEES = """
.func (.param .b32 load_through_retval0) load_through(.param .b64 load_through_param_0)
{
  ld.param.u64 %rd1, [load_through_param_0];
  ld.global.u64 %rd2, [%rd1];
  .loc 1 20 1
  ld.global.f32 %f1, [%rd2];
  st.param.f32 [load_through_retval0], %f1;
  ret;
}
.func store_unknown()
{
  ld.global.u64 %rd2, [table];
  .loc 1 30 1
  st.global.f32 [%rd2], %f1;
  ret;
}
.global .u64 table[1];
"""


@pytest.mark.parametrize("argument, through, unknown", [
    ("%rd3", {0: "r"}, ""),   # passed the table: it loads through what it reads from it
    ("%rd9", {0: "r"}, "r"),  # passed a pointer read from the table: a table of tables
])
def test_a_callee_loading_through_its_argument_loads_through_the_callers(argument, through, unknown):
    found = accesses(f"""
  ld.global.u64 %rd9, [%rd3];
  {{ .param .b64 param0; st.param.b64 [param0+0], {argument};
  .param .b32 retval0;
  call.uni (retval0), load_through, (param0); }}
""", extra=CALLEES)
    assert found["through"] == through and found["unknown"] == unknown


def test_a_callees_unknown_store_is_its_callers_located_through_the_call():
    m = module("""
  .loc 1 9 1
  call.uni store_unknown, ();
""", extra=CALLEES)
    summary = m.accesses("k")
    assert set(summary.unknown) == {WRITE}
    location = summary.unknown[WRITE]
    assert (location.line, location.caller.line, location.called) == (30, 9, True)
    assert m.writes("k")[0][0] is ptx.Written.UNKNOWN


def test_a_call_leaving_the_module_writes_anywhere_but_reads_nothing_pipec_reports():
    found = accesses("""
  { .param .b64 param0; st.param.b64 [param0+0], %rd3; call.uni outside, (param0); }
  { .param .b64 param0; st.param.b64 [param0+0], %rd3; call.uni vprintf, (param0); }
""", extra=".extern .func outside(.param .b64 outside_param_0);\n.extern .func vprintf(.param .b64 vprintf_param_0);")
    assert found == {"direct": {}, "through": {}, "unknown": "w"}  # the call itself is PC317


def test_a_pointer_loaded_through_a_table_pointer_or_from_no_parameter_is_of_unknown_origin():
    assert dereferenced({0}) == {Via(0)}
    assert dereferenced({0, 2}) == {Via(0), Via(2)}
    assert dereferenced({Via(0)}) == {LOADED}
    assert dereferenced({0, LOADED}) == {LOADED}
    assert dereferenced(set()) == {LOADED}


def test_a_summary_changes_its_key_with_every_kind_of_access():
    keys = set()
    for origin, mode in [(0, READ), (0, WRITE), (Via(0), READ), (Via(0), WRITE), (LOADED, READ), (LOADED, WRITE)]:
        summary = Summary()
        summary.record({origin}, mode, None)
        keys.add(summary.key())
    assert len(keys) == 6 and Summary().key() not in keys


@pytest.mark.parametrize("text, address", [
    ("ld.global.f32 %f1, [%rd1]", "[%rd1]"),
    ("ld.f32 %f1, [%rd1]", "[%rd1]"),  # generic
    ("ldu.global.f32 %f1, [%rd1]", "[%rd1]"),
    ("ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16]", "[%rd1+16]"),
    ("ld.shared.f32 %f1, [%r1]", None),
    ("ld.local.f32 %f1, [%rd1]", None),
    ("ld.param.u64 %rd1, [k_param_0]", None),
    ("ld.const.f32 %f1, [%rd1]", None),
    ("ld.global.f32 %f1", None),
    ("ld.global.f32", None),
    ("atom.global.add.u32 %r1, [%rd1], 1", "[%rd1]"),
    ("atom.shared.add.u32 %r1, [%r2], 1", None),
    ("multimem.ld_reduce.global.add.f32 %f1, [%rd1]", "[%rd1]"),
    ("st.global.f32 [%rd1], %f1", None),
    ("red.global.add.f32 [%rd1], %f1", None),
    ("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r1}]", "?"),
    ("tld4.r.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f5, %f6}]", "?"),
    ("suld.b.1d.b32.trap {%r1}, [%rd1, {%r2}]", "?"),
    ("cp.async.ca.shared.global [%r1], [%rd1], 16", "[%rd1]"),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 64, [%r2]", "[%rd1]"),
    ("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2}], [%r3]",
     "?"),
    ("cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], 64", None),  # reads shared memory
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u32 [%rd1], [%r1], 64", None),
    ("cp.async.bulk.prefetch.L2.global [%rd1], 64", "[%rd1]"),
    ("cp.async.bulk.prefetch.tensor.1d.L2.global [%rd1, {%r1}]", "?"),
    ("cp.async.bulk.commit_group", None),
    ("prefetch.global.L2 [%rd1]", "[%rd1]"),
    ("prefetchu.L1 [%rd1]", "[%rd1]"),
    ("prefetch.local.L1 [%rd1]", None),
    ("prefetch.tensormap [%rd1]", None),  # a tensor map's descriptor, no data
    ("tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd2", None),  # a write, not a read
    ("mov.u64 %rd1, %rd2", None),
])
def test_which_instructions_read_global_memory_and_at_which_operand(text, address):
    m = module(f"  {text};")
    (instruction,) = [i for i in m.functions["k"].instructions if i.text.startswith(text.split(" ")[0])][-1:]
    assert read_address(instruction) == address


@pytest.mark.parametrize("defined, through, direct", [
    # mad adds its last operand to a product: the product is an index, whatever it holds
    ("mad.lo.s64 %rd7, %rd8, %rd4, %rd9;", {0: "r"}, {0: "r"}),
    # a register defined twice is both: the pointer from the table and the parameter
    ("mov.b64 %rd7, %rd4;\n  add.s64 %rd7, %rd9, %rd8;", {0: "r"}, {0: "r", 1: "r"}),
])
def test_the_terms_of_a_sum_decide_its_origins(defined, through, direct):
    found = accesses(f"""
  ld.global.u64 %rd9, [%rd3];
  mul.wide.s32 %rd8, %r1, 4;
  {defined}
  ld.global.f32 %f1, [%rd7];
""")
    assert found["through"] == through and found["direct"] == direct


def test_a_value_narrowed_then_widened_is_an_index():
    found = accesses("""
  ld.global.u64 %rd9, [%rd3];
  cvt.u32.u64 %r9, %rd4;
  cvt.u64.u32 %rd8, %r9;
  add.s64 %rd7, %rd9, %rd8;
  ld.global.f32 %f1, [%rd7];
""")
    assert found == {"direct": {0: "r"}, "through": {0: "r"}, "unknown": ""}


def test_a_32_bit_parameter_loaded_into_a_64_bit_register_is_no_pointer():
    found = accesses("""
  ld.param.u32 %rd5, [k_param_2];
  and.b64 %rd6, %rd5, 24;
  mov.u64 %rd8, table;
  add.s64 %rd9, %rd8, %rd6;
  ld.global.u64 %rd7, [%rd9];
  st.global.f32 [%rd7], %f1;
""", extra=".global .u64 table[4];")
    assert found == {"direct": {}, "through": {}, "unknown": "w"}
