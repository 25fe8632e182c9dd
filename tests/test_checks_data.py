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
# three kernels of the soundness corpus, where the programs may import them (a temporary folder)
BORROWED = Path(tempfile.mkdtemp(prefix="pipec-data-rules-")) / "borrowed.cu"
BORROWED.write_text("".join((CORPUS / name).read_text() for name in (
    "out_read_accumulate.cu", "write_const_raw_addresses.cu", "write_const_loaded_pointer.cu")) + """
extern "C" __global__ void table_and_raw(const float* const* tensors, const unsigned long long* raw) {
    reinterpret_cast<float*>(raw[0])[threadIdx.x] = tensors[0][threadIdx.x];
}
""")
HEADER = (f'from "{KERNELS}" import writer, copier, reader\n'
          f'from "{EXAMPLES / "table_kernels.cu"}" import sum_squares, sum_squares_raw, scale_all, accumulate, '
          'retarget\n'
          f'from "{BORROWED}" import accumulate_out, scatter_raw, through_table, table_and_raw\n')


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
    return [(d.span.line - 10, d.message.split(" is written")[0]) for d in result.diagnostics if d.code == "PC403"]


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
    assert [label.span.line for label in diagnostic.labels] == [10]


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


def test_buffers_named_by_a_bound_table_are_used_even_when_the_kernel_never_loads_through_it():
    result = _check("""
        buffer w: f32[64]
        buffer unused: f32[64]
        buffer t: ptr[1] = addresses(w)
        buffer u: ptr[1] = addresses(unused)
        step { launch retarget<<<1, 32>>>(in t, w, 0) }
    """)
    assert [(d.code, d.message) for d in result.diagnostics if d.code == "PC402"] == [
        ("PC402", "buffer `unused` is never used"), ("PC402", "buffer `u` is never used")]
