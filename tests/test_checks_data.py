"""The data rules per element range and from the kernels' PTX: PC403 (written only inside a
branch, read after it), PC401 (an `uninit` buffer read first, as the kernel's loads say), PC404
(`out` read before written), and the rules of tables of addresses and of loads and stores pipec
cannot follow (PC318, PC324, PC325)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from stage_helpers import KERNELS, check_text
from pipec.compiler.codes import EXAMPLES

CORPUS = Path(__file__).parent / "corpus" / "soundness"
# four kernels of the soundness corpus, where the programs may import them (a temporary folder)
BORROWED = Path(tempfile.mkdtemp(prefix="pipec-data-rules-")) / "borrowed.cu"
BORROWED.write_text("".join((CORPUS / name).read_text() for name in (
    "out_read_accumulate.cu", "write_const_raw_addresses.cu", "write_const_loaded_pointer.cu",
    "read_device_table.cu")) + """
extern "C" __global__ void table_and_raw(const float* const* tensors, const unsigned long long* raw) {
    reinterpret_cast<float*>(raw[0])[threadIdx.x] = tensors[0][threadIdx.x];
}
""")
ACCESS_KERNELS = KERNELS.parent / "access_kernels.cu"
HEADER = (f'from "{KERNELS}" import writer, copier, reader\n'
          f'from "{ACCESS_KERNELS}" import scalar_then_cast, second_cast, zero_all, table_unused, keep, add_two, '
          'copy_then_double, write_then_cast\n'
          f'from "{EXAMPLES / "table_kernels.cu"}" import sum_squares, sum_squares_raw, scale_all, accumulate, '
          'retarget\n'
          f'from "{BORROWED}" import accumulate_out, scatter_raw, through_table, table_and_raw, '
          'gather_from_device_table\n')


def _check(body: str):
    return check_text(body, header=HEADER)


def _found(result) -> list[tuple[str, int, str]]:
    return sorted((d.code, d.span.line, d.message) for d in result.diagnostics)


def _line(result, text: str) -> int:
    """The line of the program that holds `text` first."""
    source = next(s for s in result.program.sources if s.path.name == "t.pipe")
    return next(n for n in range(1, source.line_count + 1) if text in source.line_text(n))


def _cuda_line(path: Path, text: str, nth: int = 1) -> int:
    """The line of a CUDA source holding `text` the nth time."""
    return [n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line][nth - 1]


def _stale(body: str) -> list[tuple[int, str]]:
    result = _check(f"""
        buffer p: f32[256]
        buffer q: f32[256]
        buffer flag: i32[1] = fill(1)
        buffer sink: f32[256]
        graph part {{ launch writer<<<1, 64>>>(p[192:256], 64) }}
        step {{
{body}
        }}
    """)
    step = _line(result, "step {")
    return [(d.span.line - step, d.message.split(" is written")[0]) for d in result.diagnostics if d.code == "PC403"]


@pytest.mark.parametrize("body, stale", [
    ("if flag[0] { launch writer<<<1, 128>>>(p[0:128], 128) }\n copy p[128:256] -> sink[0:128]", []),
    ("if flag[0] { launch writer<<<1, 128>>>(p[0:128], 128) }\n copy p[64:192] -> sink[0:128]",
     [(2, "`p[64:128]`")]),
    ("if flag[0] { launch writer<<<1, 256>>>(p, 256) }\n copy p -> sink", [(2, "`p`")]),
    # elements written outside every branch anywhere in the step are no stale ones
    ("launch writer<<<1, 64>>>(p[0:64], 64)\n if flag[0] { launch writer<<<1, 128>>>(p[0:128], 128) }\n"
     " copy p[0:64] -> sink[0:64]", []),
    ("launch writer<<<1, 64>>>(p[0:64], 64)\n if flag[0] { launch writer<<<1, 128>>>(p[0:128], 128) }\n"
     " copy p[0:128] -> sink[0:128]", [(3, "`p[64:128]`")]),
    ("if flag[0] { launch writer<<<1, 128>>>(p[0:128], 128) }\n copy p[0:64] -> sink[0:64]\n"
     " launch writer<<<1, 64>>>(p[0:64], 64)", []),
    # both bodies of an if/else: the elements both write
    ("if flag[0] { launch writer<<<1, 64>>>(p[0:64], 64) } else { launch writer<<<1, 128>>>(p[0:128], 128) }\n"
     " copy p[0:64] -> sink[0:64]", []),
    ("if flag[0] { launch writer<<<1, 64>>>(p[0:64], 64) } else { launch writer<<<1, 128>>>(p[0:128], 128) }\n"
     " copy p[32:128] -> sink[0:96]", [(2, "`p[64:128]`")]),
    ("launch writer<<<1, 64>>>(p[64:96], 32)\n if flag[0] { launch writer<<<1, 128>>>(p[0:128], 128) }\n"
     " copy p[32:256] -> sink[0:224]", [(3, "`p[32:64]`")]),
    ("if flag[0] { launch writer<<<1, 64>>>(q[0:64], 64) } else { launch writer<<<1, 128>>>(p[0:128], 128) }\n"
     " copy p[0:64] -> sink[0:64]", [(2, "`p[0:64]`")]),
    # a child graph inside the branch writes too; one report per buffer; the write named is the
    # one holding the first stale element
    ("if flag[0] { part }\n copy p[128:256] -> sink[0:128]", [(2, "`p[192:256]`")]),
    ("if flag[0] { launch writer<<<1, 64>>>(p[0:64], 64) }\n if flag[0] { launch writer<<<1, 64>>>(p[64:128], 64) }\n"
     " copy p[64:128] -> sink[0:64]\n copy p[0:64] -> sink[0:64]", [(3, "`p[64:128]`")]),
    ("if flag[0] { launch writer<<<1, 128>>>(p[0:128], 128)\n copy p[0:128] -> sink[0:128] }", []),
    ("repeat 3 { launch writer<<<1, 128>>>(p[0:128], 128) }\n copy p[0:128] -> sink[0:128]", []),
    ("every 2 { launch writer<<<1, 128>>>(p[0:128], 128) }\n copy q -> sink\n copy p[0:128] -> sink[0:128]",
     [(3, "`p[0:128]`")]),
])
def test_stale_after_branch_is_decided_per_element(body, stale):
    assert _stale(body) == stale


def test_stale_after_branch_labels_the_write():
    result = _check("""
        buffer p: f32[256]
        buffer flag: i32[1] = fill(1)
        buffer sink: f32[256]
        step {
            if flag[0] { launch writer<<<1, 64>>>(p[0:64], 64) }
            if flag[0] { launch writer<<<1, 64>>>(p[64:128], 64) }
            copy p -> sink
            launch writer<<<1, 64>>>(p[0:64], 64)
        }
    """)
    (diagnostic,) = [d for d in result.diagnostics if d.code == "PC403"]
    assert diagnostic.message.startswith("`p[64:128]` is written only inside the if")
    assert [label.span.line for label in diagnostic.labels] == [_line(result, "p[64:128], 64")]


def test_an_uninit_buffer_is_read_first_only_where_the_kernels_load_say_so():
    result = _check("""
        buffer x: f32[256] = uniform(-1.0, 1.0, seed=1)
        buffer never_loaded: f32[64] = uninit
        buffer added_to: f32[256] = uninit
        step {
            launch reader<<<1, 64>>>(never_loaded, 64)
            launch accumulate<<<1, 256>>>(added_to, in x, 256)
        }
    """)
    (diagnostic,) = result.diagnostics
    assert (diagnostic.code, diagnostic.span.line) == ("PC401", _line(result, "launch accumulate"))
    assert [(label.span.source.path.name, label.span.line) for label in diagnostic.labels] == [
        ("table_kernels.cu", _cuda_line(EXAMPLES / "table_kernels.cu", "y[i] += x[i]"))]


def test_an_out_binding_read_first_says_where_the_out_comes_from():
    result = _check("""
        buffer x: f32[256] = uniform(-1.0, 1.0, seed=1)
        buffer y: f32[256]
        buffer z: f32[256]
        step {
            launch accumulate<<<1, 256>>>(out y, in x, 256)
            launch accumulate_out<<<1, 256>>>(z, in x, 256)
            launch accumulate_out<<<1, 256>>>(inout z, in x, 256)
            launch copier<<<1, 64>>>(in x, z, 64)
        }
    """)
    assert [(code, line) for code, line, _ in _found(result)] == [
        ("PC404", _line(result, "(out y")), ("PC404", _line(result, "(z, in x"))]
    assert "yet it is bound `out`" in result.diagnostics[0].message
    assert "yet it is annotated `/// pipec: out`" in result.diagnostics[1].message
    assert [label.span.line for label in result.diagnostics[1].labels] == [_cuda_line(BORROWED, "y[i] += x[i]")]


def test_stores_pipec_cannot_follow_make_every_read_only_binding_unsure():
    result = _check("""
        buffer x: f32[256] = uniform(-1.0, 1.0, seed=1)
        buffer raw: u64[4]
        step {
            launch scatter_raw<<<1, 32>>>(x, in raw)
            launch through_table<<<1, 32>>>(in x, 1)
        }
    """)
    found = [(d.code, d.span.line, [label.span.line for label in d.labels]) for d in result.diagnostics]
    raw, table = _cuda_line(BORROWED, "reinterpret_cast<float*>"), _cuda_line(BORROWED, "scratch_table[slot")
    assert found == [("PC318", _line(result, "launch scatter_raw"), [raw])] * 2 + [("PC318", _line(result, "launch through_table"),
                                                                             [table])]
    assert all("stores through a pointer it loaded from memory" in d.message for d in result.diagnostics)


def test_a_table_bound_to_a_pointer_to_pointers_makes_its_stores_known():
    result = _check("""
        buffer w: f32[64]
        buffer t: ptr[1] = addresses(w)
        buffer sizes: i32[1] = fill(64)
        buffer norms: f32[1]
        step {
            launch scale_all<<<1, 32>>>(t, in sizes, 2.0)
            launch sum_squares<<<1, 32>>>(t, in sizes, out norms)
        }
    """)
    assert result.diagnostics == []


def test_a_kernel_writing_a_table_is_reported_with_its_store():
    result = _check("""
        buffer w: f32[64]
        buffer t: ptr[2] = addresses(w, w)
        buffer sizes: i32[2] = fill(64)
        buffer raw: u64[1]
        step {
            launch retarget<<<1, 32>>>(t, w, 2)
            launch scatter_raw<<<1, 32>>>(in w, in raw)
            launch sum_squares<<<1, 32>>>(t, in sizes, out w[0:1])
        }
    """)
    written = [(d.span.line, [label.message for label in d.labels]) for d in result.diagnostics if d.code == "PC325"]
    assert written == [(_line(result, "launch retarget"), ["declared here", "the store"])]
    assert [d.code for d in result.diagnostics] == ["PC325", "PC318", "PC318"]


def test_a_store_pipec_cannot_follow_may_write_a_bound_table_and_the_buffers_it_names():
    result = _check("""
        buffer w: f32[64]
        buffer t: ptr[1] = addresses(w)
        buffer raw: u64[1]
        step { launch table_and_raw<<<1, 32>>>(t, in raw) }
    """)
    assert [(d.code, [label.message for label in d.labels]) for d in result.diagnostics] == [
        ("PC325", ["declared here", "the store"]), ("PC318", ["the store pipec cannot follow"])]
    (node,) = result.program.step.items
    assert [(a.buffer.name, a.mode.name) for a in node.accesses] == [
        ("t", "READ"), ("w", "READ_WRITE"), ("raw", "READ")]


def test_loads_pipec_cannot_follow_are_reported_at_the_launch_with_the_load():
    result = _check("""
        buffer raw: u64[1]
        buffer sizes: i32[1] = fill(64)
        buffer norms: f32[1]
        step { launch sum_squares_raw<<<1, 32>>>(in raw, in sizes, out norms) }
    """)
    (diagnostic,) = result.diagnostics
    assert diagnostic.code == "PC324" and diagnostic.span.line == _line(result, "launch sum_squares_raw")
    assert [(label.message, label.span.line) for label in diagnostic.labels] == [
        ("the load pipec cannot follow", _cuda_line(EXAMPLES / "table_kernels.cu", "s += t[i] * t[i]", nth=2))]


def test_a_load_of_unknown_origin_is_reported_though_no_parameter_is_loaded_through():
    # the pointer comes from a __device__ variable: no parameter's memory, so no table could tell
    result = _check("""
        buffer y: f32[32]
        step { launch gather_from_device_table<<<1, 32>>>(out y, 0) }
    """)
    (diagnostic,) = result.diagnostics
    assert diagnostic.code == "PC324" and diagnostic.span.line == _line(result, "launch gather_from_device_table")
    assert [(label.message, label.span.line) for label in diagnostic.labels] == [
        ("the load pipec cannot follow", _cuda_line(BORROWED, "sources[slot & 3][threadIdx.x]"))]


def test_buffers_named_by_a_bound_table_are_used_even_when_the_kernel_never_loads_through_it():
    result = _check("""
        buffer w: f32[64]
        buffer unused: f32[64]
        buffer named: f32[64]
        buffer t: ptr[1] = addresses(named)
        buffer u: ptr[1] = addresses(unused)
        step { launch table_unused<<<1, 32>>>(t, w) }
    """)
    assert [(d.code, d.message) for d in result.diagnostics if d.code == "PC402"] == [
        ("PC402", "buffer `unused` is never used"), ("PC402", "buffer `u` is never used")]


def test_pc403_keeps_looking_after_a_buffer_it_reported_or_a_read_that_is_fresh():
    result = _check("""
        buffer p: f32[64]
        buffer q: f32[64]
        buffer r: f32[64]
        buffer fresh: f32[64]
        buffer flag: i32[1] = fill(1)
        buffer sink: f32[64]
        step {
            if flag[0] { launch writer<<<1, 64>>>(p, 64) }
            if flag[0] { launch writer<<<1, 64>>>(q, 64) }
            if flag[0] { launch writer<<<1, 64>>>(r, 64) }
            if flag[0] { launch writer<<<1, 64>>>(fresh, 64) }
            copy p -> sink
            launch add_two<<<1, 64>>>(in p, in q, out sink)
            launch writer<<<1, 64>>>(fresh, 64)
            launch add_two<<<1, 64>>>(in fresh, in r, out sink)
        }
    """)
    assert [(d.code, d.span.line) for d in result.diagnostics] == [
        ("PC403", _line(result, "copy p")), ("PC403", _line(result, "(in p, in q")),
        ("PC403", _line(result, "(in fresh, in r"))]


def test_pc403_takes_a_read_inside_a_branch_for_no_write():
    result = _check("""
        buffer p: f32[64]
        buffer flag: i32[1] = fill(1)
        buffer sink: f32[64]
        step {
            if flag[0] { copy p -> sink }
            copy p -> sink
            if flag[0] { launch writer<<<1, 64>>>(p, 64) } else { copy p -> sink }
            copy p -> sink
        }
    """)
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("PC403", _line(result, "copy p -> sink") + 3)]


def test_pc321_is_reported_once_per_branch_and_for_every_branch():
    result = _check("""
        buffer flag: i32[1] = fill(1)
        buffer again: i32[1] = fill(1)
        step {
            while again[0] { fill again = 0 }
            if flag[0] {
                fill flag = 0
                fill flag = 1
            }
        }
    """)
    assert [(d.code, d.span.line) for d in result.diagnostics] == [("PC321", _line(result, "fill flag = 0"))]


def test_pc401_keeps_looking_past_buffers_that_are_not_uninit_and_reads_that_load_nothing():
    result = _check("""
        buffer x: f32[256] = uniform(-1.0, 1.0, seed=1)
        buffer z: f32[256]
        buffer u: f32[256] = uninit
        buffer never: f32[64] = uninit
        buffer first: f32[64] = uninit
        buffer second: f32[64] = uninit
        step {
            launch reader<<<1, 64>>>(in never, 64)
            launch reader<<<1, 64>>>(in never, 64)
            launch accumulate<<<1, 256>>>(inout z, u, 256)
            launch add_two<<<1, 64>>>(in x, in never, out z[0:64])
            launch copy_then_double<<<1, 64>>>(first, in second)
        }
    """)
    assert [(d.code, d.span.line) for d in result.diagnostics] == [
        ("PC401", _line(result, "(inout z, u")), ("PC401", _line(result, "(in x, in never")),
        ("PC401", _line(result, "(first, in second"))]


def test_pc203_compares_the_types_of_the_tables_buffers_in_the_bound_slice_only():
    result = _check("""
        buffer halves: f16[64]
        buffer w: f32[64]
        buffer t: ptr[3] = addresses(halves, w, halves)
        buffer sizes: i32[3] = fill(64)
        buffer norms: f32[3]
        step {
            launch sum_squares<<<1, 32>>>(t[1:2], in sizes, out norms)
            launch sum_squares<<<1, 32>>>(t[0:1], in sizes, out norms)
            launch keep<<<1, 1>>>(t)
        }
    """)
    found = [(d.code, d.span.line, [label.message for label in d.labels]) for d in result.diagnostics]
    assert found == [("PC203", _line(result, "t[0:1]"), ["named here", "kernel declared here"]),
                     ("PC203", _line(result, "keep<<<"), ["declared here", "kernel declared here"])]
    assert "but parameter 1 `p` (void*) of `keep` points to `void`" in result.diagnostics[1].message


def test_pc318_names_the_binding_and_checks_every_parameter_of_a_launch():
    result = _check("""
        buffer a: f32[64]
        buffer b: f32[64]
        step {
            launch scalar_then_cast<<<1, 64>>>(64, a)
            launch second_cast<<<1, 64>>>(a, b)
            launch writer<<<1, 64>>>(in b, 64)
            launch write_then_cast<<<1, 64>>>(b, a)
        }
    """)
    assert [(d.code, d.span.line) for d in result.diagnostics] == [
        ("PC318", _line(result, "(64, a)")), ("PC318", _line(result, "(a, b)")), ("PC318", _line(result, "(in b")),
        ("PC318", _line(result, "(b, a)"))]
    assert "declared `const float*`" in result.diagnostics[0].message
    assert "bound `in`" in result.diagnostics[2].message


def test_pc325_shows_the_store_and_reports_a_fill_inside_a_branch_once():
    result = _check("""
        buffer w: f32[64]
        buffer t: ptr[2] = addresses(w, w)
        buffer flag: i32[1] = fill(1)
        step {
            launch retarget<<<1, 32>>>(t, w, 2)
            if flag[0] { fill t = 0 }
        }
    """)
    found = [(d.code, d.span.line, [(label.span.source.path.name, label.span.line) for label in d.labels])
             for d in result.diagnostics]
    store = _cuda_line(EXAMPLES / "table_kernels.cu", "tensors[threadIdx.x] = to")
    assert found == [("PC325", _line(result, "launch retarget"), [("t.pipe", _line(result, "buffer t:")),
                                                                   ("table_kernels.cu", store)]),
                     ("PC325", _line(result, "fill t"), [("t.pipe", _line(result, "buffer t:"))])]


def test_a_table_the_kernel_only_writes_through_is_written_and_one_it_never_loads_through_is_not_accessed():
    result = _check("""
        buffer w: f32[64] = uninit
        buffer v: f32[64]
        buffer t: ptr[3] = addresses(w, v, w)
        buffer sink: f32[64]
        buffer sizes: i32[1] = fill(64)
        step {
            launch zero_all<<<2, 64>>>(t[0:2], 64)
            launch table_unused<<<1, 64>>>(t, sink)
            launch sum_squares<<<1, 32>>>(t[0:1], in sizes, out sink[1:2])
        }
    """)
    assert result.diagnostics == []
    zero, unused, _ = result.program.step.items
    assert [(a.buffer.name, a.start, a.stop, a.mode.name) for a in zero.accesses] == [
        ("t", 0, 2, "READ"), ("w", 0, 64, "WRITE"), ("v", 0, 64, "WRITE")]
    assert [(a.buffer.name, a.mode.name) for a in unused.accesses] == [("t", "READ"), ("sink", "READ_WRITE")]


@pytest.mark.parametrize("launch, code", [
    ("launch sum_squares_raw<<<1, 32>>>(in raw, in sizes, out norms)", "PC324"),
    ("launch retarget<<<1, 32>>>(out t, w, 1)", "PC325"),
    ("launch retarget<<<1, 32>>>(t, w, 1)", "PC325"),
    ("launch writer<<<1, 64>>>(in w, 64)", "PC318"),
])
def test_a_launch_touching_what_its_accesses_do_not_say_silences_the_data_rules(launch, code):
    result = _check(f"""
        buffer w: f32[64]
        buffer y: f32[64] = uninit
        buffer z: f32[64]
        buffer raw: u64[1]
        buffer t: ptr[1] = addresses(w)
        buffer sizes: i32[1] = fill(64)
        buffer norms: f32[1]
        step {{
            {launch}
            launch copier<<<1, 64>>>(in y, out z, 64)
        }}
    """)
    assert [d.code for d in result.diagnostics] == [code]  # no PC401 for y, no PC402
