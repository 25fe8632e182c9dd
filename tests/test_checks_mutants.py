"""The graph-safety checks at their limits: one launch or copy just inside each bound and one
just past it, so that a comparison moved by one changes the findings. (Written to kill the
surviving mutants of scripts/mutate.py over compiler/checks/.)"""

from __future__ import annotations

import pytest
from pipec.compiler import Settings
from pipec.compiler.codes import EXAMPLES
from pipec.compiler.config import CompileOptions
from stage_helpers import check_text

KERNELS = "add_one, square_bounded, block_sums, copy_floats, scale_by_pointer"
HEADER = (f'from "{EXAMPLES / "kernels.cu"}" import {KERNELS}\n'
          "const N = 256\n"
          "buffer x: f32[N] = uniform(-1.0, 1.0, seed=1)\n"
          "buffer y: f32[N]\n")
FIRST_LINE = HEADER.count("\n") + 1


def diagnostics(code: str, step: str, *, declarations: str = "", arch: str | None = None):
    """The `code` findings for a program whose step is `step`, with lines counted within it."""
    body = declarations + "step {\n" + step + "}\n"
    settings = Settings(compile=CompileOptions(arch=arch)) if arch else None
    result = check_text(body, header=HEADER, settings=settings)
    offset = FIRST_LINE + declarations.count("\n")
    return [(d.span.line - offset, d) for d in result.diagnostics if d.code == code]


def findings(code: str, step: str, **kwargs) -> list[tuple[int, str]]:
    """(line within `step`, message) of each `code` finding."""
    return [(line, d.message) for line, d in diagnostics(code, step, **kwargs)]


def lines(code: str, step: str, **kwargs) -> list[int]:
    return [line for line, _ in findings(code, step, **kwargs)]


def test_block_limits():
    found = findings("PC311", """\
    launch add_one<<<1, (0, 1, 65)>>>(x, N)
    launch add_one<<<1, 1024>>>(x, N)
    launch add_one<<<1, 1025>>>(x, N)
    launch add_one<<<1, (1, 1, 64)>>>(x, N)
    launch add_one<<<1, (1, 1, 65)>>>(x, N)
    launch add_one<<<1, (2, 1, 64)>>>(x, N)
    launch square_bounded<<<1, 128>>>(in x, out y, N)
    launch square_bounded<<<1, 129>>>(in x, out y, N)
    launch add_one<<<1, 0>>>(x, N)
""")
    assert [line for line, _ in found] == [3, 5, 8]  # not 1: an empty block is PC313's
    assert found[0][1].startswith("a block with 1025 threads; a block holds at most 1024 threads "
                                  "and 1024 x 1024 x 64")
    assert found[1][1].startswith("a block with block.z = 65;")
    assert found[2][1].startswith("a block of 129 threads, but `square_bounded` is compiled for at most 128")


def test_grid_limits():
    found = findings("PC313", """\
    launch add_one<<<1, 1>>>(x, N)
    launch add_one<<<0, 1>>>(x, N)
    launch add_one<<<1, 0>>>(x, N)
    launch add_one<<<(1, 65535), 1>>>(x, N)
    launch add_one<<<(1, 65536), 1>>>(x, N)
    launch add_one<<<(1, 1, 65535), 1>>>(x, N)
    launch add_one<<<(1, 1, 65536), 1>>>(x, N)
    launch add_one<<<2147483647, 1>>>(x, N)
    launch add_one<<<2147483648, 1>>>(x, N)
    launch add_one<<<(1, 0), (0, 1)>>>(x, N)
""")
    assert [line for line, _ in found] == [2, 3, 5, 7, 9, 10]
    messages = [message for _, message in found]
    assert messages[0].startswith("the grid ") and "is empty" in messages[0]
    assert messages[1].startswith("the block ") and "is empty" in messages[1]
    assert messages[2] == "grid.y = 65536 exceeds the limit 65535"
    assert messages[3] == "grid.z = 65536 exceeds the limit 65535"
    assert messages[4] == "grid.x = 2147483648 exceeds the limit 2147483647"
    assert messages[5].startswith("the grid ")  # one finding per launch, the grid first


CLUSTER_KERNELS = """\
extern "C" __global__ __cluster_dims__(4, 2, 1) void in_clusters(float* x) { x[blockIdx.x] = 1.0f; }
extern "C" __global__ void __cluster_dims__(16, 1, 1) in_large_clusters(float* x) { x[0] = 1.0f; }
"""


def test_grids_divide_into_the_declared_clusters(tmp_path):
    """A kernel declared with `__cluster_dims__` is found (either place of the attribute), and
    its grid must be a whole number of clusters of at most 8 blocks."""
    (tmp_path / "clusters.cu").write_text(CLUSTER_KERNELS)
    header = (f'from "{tmp_path / "clusters.cu"}" import in_clusters, in_large_clusters\n'
              "buffer x: f32[4096]\n")
    result = check_text("""\
step {
    launch in_clusters<<<(8, 2), 32>>>(x)
    launch in_clusters<<<(8, 3), 32>>>(x)
    launch in_clusters<<<(6, 2), 32>>>(x)
    launch in_large_clusters<<<16, 32>>>(x)
}
""", header=header, settings=Settings(CompileOptions(allow_paths=(tmp_path,))))
    found = [(d.code, d.span.line - 3, d.message) for d in result.diagnostics]  # lines of launches: 1 ..
    assert found == [
        ("PC313", 2, "grid.y = 3 is not a multiple of the 2 blocks of `in_clusters`'s clusters along y "
                     "(`__cluster_dims__`)"),
        ("PC313", 3, "grid.x = 6 is not a multiple of the 4 blocks of `in_clusters`'s clusters along x "
                     "(`__cluster_dims__`)"),
        ("PC313", 4, "`in_large_clusters` declares clusters of 16 blocks; the launch needs a non-portable "
                     "opt-in beyond 8, which pipec does not make"),
    ]


@pytest.mark.parametrize("arch, limit", [("sm_90", 232448), ("sm_90a", 232448), ("sm_75", 65536),
                                         ("sm_61", 49152)])
def test_shared_memory_limit_by_architecture(arch, limit):
    found = findings("PC312", f"""\
    launch block_sums<<<1, 256, {limit}>>>(in x, out y, N)
    launch block_sums<<<1, 256, {limit + 1}>>>(in x, out y, N)
    launch block_sums<<<1, 256, 0>>>(in x, out y, N)
    launch block_sums<<<1, 256, -1>>>(in x, out y, N)
""", arch=arch)
    over = f"{limit + 1} bytes of dynamic shared memory; a block on {arch} has at most {limit}"
    assert found == [(2, over), (4, "-1 bytes of dynamic shared memory")]


def test_copies_of_adjacent_ranges_do_not_overlap():
    found = findings("PC303", """\
    copy x[0:64] -> x[64:128]
    copy x[64:128] -> x[0:64]
    copy x[0:65] -> x[64:129]
    copy x[64:129] -> x[0:65]
    copy x[0:8] -> x[0:8]
    copy x[0:8] -> y[0:4]
    copy x[0:8] -> y[8:16]
""")
    overlap = "copy between overlapping ranges of `x`"
    assert found == [(3, overlap), (4, overlap), (5, overlap), (6, "copy of 8 elements into 4")]


def test_a_read_is_covered_by_any_combination_of_earlier_writes():
    declarations = "".join(f"buffer {name}: f32[64] = uninit\n" for name in "abcdef")
    found = lines("PC401", """\
    launch copy_floats<<<1, 32>>>(in x, out a[32:64], 32)
    launch copy_floats<<<1, 32>>>(in x, out a[0:32], 32)
    launch copy_floats<<<1, 64>>>(in a, out y, 64)
    launch copy_floats<<<1, 16>>>(in x, out b[0:16], 16)
    launch copy_floats<<<1, 32>>>(in x, out b[32:64], 32)
    launch copy_floats<<<1, 64>>>(in b, out y, 64)
    launch copy_floats<<<1, 32>>>(in x, out c[0:32], 32)
    launch copy_floats<<<1, 32>>>(in c[0:32], out y, 32)
    launch copy_floats<<<1, 33>>>(in c[0:33], out y, 33)
    launch copy_floats<<<1, 48>>>(in x, out d[16:64], 48)
    launch copy_floats<<<1, 64>>>(in d, out y, 64)
    launch copy_floats<<<1, 32>>>(in x, out e[0:32], 32)
    launch copy_floats<<<1, 16>>>(in e[8:24], out y, 16)
    launch copy_floats<<<1, 32>>>(in e[32:64], out y, 32)
    launch copy_floats<<<1, 32>>>(in e[32:64], out y, 32)
    launch copy_floats<<<1, 64>>>(in x, out f, 64)
    launch copy_floats<<<1, 32>>>(in f[32:64], out y, 32)
""", declarations=declarations)
    assert found == [6, 9, 11, 14]


def test_an_unrepresentable_scalar_is_reported_once_and_blocks_the_extent_check():
    found = findings("PC204", """\
    launch add_one<<<1, 1>>>(x, 2147483647)
    launch add_one<<<1, 1>>>(x, 2147483648)
    launch add_one<<<1, 1>>>(x, -2147483649)
""")
    assert [line for line, _ in found] == [2, 3]
    assert lines("PC310", "    launch add_one<<<1, 1>>>(x, 2147483648)\n") == []
    assert lines("PC310", "    launch add_one<<<1, 1>>>(x, 2147483647)\n") == [1]


def test_fills_within_and_past_the_element_type():
    declarations = "buffer mask: u8[4] = uninit\n"
    found = findings("PC204", "    fill mask = 255\n    fill mask = 256\n    fill mask = -1\n",
                     declarations=declarations)
    assert [line for line, _ in found] == [2, 3]
    assert found[0][1].startswith("fill of `mask`: 256 is outside the range of `u8`")


def test_an_extent_is_compared_with_the_elements_bound():
    found = findings("PC310", """\
    launch add_one<<<1, 16>>>(x[0:16], 16)
    launch add_one<<<1, 17>>>(x[0:16], 17)
    launch add_one<<<1, 1>>>(x, 256)
    launch add_one<<<1, 1>>>(x, 257)
    launch add_one<<<1, 1>>>(x[250:], 6)
    launch add_one<<<1, 1>>>(x[250:], 7)
""")
    assert [line for line, _ in found] == [2, 4, 6]
    assert "touches 17 elements through" in found[0][1] and found[0][1].endswith("but `x[0:16]` holds 16")
    assert found[1][1].endswith("but `x` holds 256")
    assert found[2][1].endswith("but `x[250:256]` holds 6")


def test_argument_count_names_the_missing_parameters_and_spans_the_extra_arguments():
    found = diagnostics("PC201", """\
    launch add_one<<<1, 1>>>(x, N)
    launch copy_floats<<<1, 1>>>(in x)
    launch add_one<<<1, 1>>>(x, N, 1, 2)
    launch add_one<<<1, 1>>>(x, N, 7)
""")
    assert [line for line, _ in found] == [2, 3, 4]
    missing, extra, one_extra = (d for _, d in found)
    assert missing.message == "`copy_floats` takes 3 arguments, found 1"
    assert missing.hint.startswith("bind `y`, `n` too; the kernel is `copy_floats(")
    assert missing.span.text == "launch copy_floats<<<1, 1>>>(in x)"
    assert extra.message == "`add_one` takes 2 arguments, found 4"
    assert extra.hint.startswith("remove the extra arguments;")
    assert extra.span.text == "1, 2"
    assert one_extra.span.text == "7"


def test_a_pointer_bound_to_an_element_is_a_kind_error_not_a_baked_value():
    declarations = "buffer lr: f32[2] = fill(0.01)\n"
    step = "    launch scale_by_pointer<<<1, N>>>(in x, out y, lr[1], N)\n"
    assert lines("PC202", step, declarations=declarations) == [1]
    assert lines("PC302", step, declarations=declarations) == []


def test_the_extent_check_goes_on_past_a_launch_it_skips():
    found = lines("PC310", """\
    launch add_one<<<1, 1>>>(x, N, 3)
    launch add_one<<<1, 1>>>(x, 2147483648)
    launch add_one<<<1, 1>>>(x, 257)
""")
    assert found == [3]


def test_unordered_conflicts_name_the_overlap_and_count_repeated_pairs():
    found = diagnostics("PC314", """\
    parallel {
        launch add_one<<<1, 1>>>(x[0:64], 64)
        launch add_one<<<1, 1>>>(x[32:96], 64)
    }
    parallel for e in 0 .. 3 {
        launch add_one<<<1, 1>>>(y, N)
    }
    parallel for e in 0 .. 2 {
        launch add_one<<<1, 1>>>(y[0:8], 8)
    }
""")
    assert [line for line, _ in found] == [3, 6, 9]
    (_, slices), (_, three), (_, two) = found
    assert "touch `x[32:64]` with no ordering between them" in slices.message
    assert (slices.label, slices.notes) == ("writes", ())
    assert "touch `y[0:256]`" in three.message
    assert three.notes == ("2 more pairs of nodes from these lines conflict the same way",)
    assert two.notes == ()


def test_an_extent_after_a_null_argument_is_still_checked():
    assert lines("PC310", "    launch copy_floats<<<1, 1>>>(null, y[0:4], 8)\n") == [1]


def test_a_copy_between_element_types_is_one_finding():
    found = findings("PC303", "    copy x[0:8] -> h[0:4]\n", declarations="buffer h: f16[4]\n")
    assert found == [(1, "copy from `f32` to `f16`")]


def test_a_copy_between_two_mapped_buffers_is_one_finding():
    declarations = "buffer a: f32[4] mapped\nbuffer b: f32[4] mapped\n"
    found = findings("PC304", "    copy a -> b\n", declarations=declarations)
    assert [(line, message.split(" inside")[0]) for line, message in found] == [
        (1, "copy from mapped host buffer `a`")]


def test_no_read_before_write_after_a_statement_with_an_error():
    declarations = "buffer u: f32[64] = uninit\n"
    read = "    launch copy_floats<<<1, 64>>>(in u, out y, 64)\n"
    assert lines("PC401", read, declarations=declarations) == [1]
    step = "    launch missing_kernel<<<1, 1>>>(out u)\n" + read
    result = check_text(declarations + "step {\n" + step + "}\n", header=HEADER)
    assert "PC103" in {d.code for d in result.diagnostics}
    assert "PC401" not in {d.code for d in result.diagnostics}


ATOMIC = f'from "{EXAMPLES / "kernels.cu"}" import count_positive_atomic, add_one\n'
ATOMIC_BUFFERS = ("const N = 256\nbuffer x: f32[N] = uniform(-1.0, 1.0, seed=1)\n"
                  "buffer positives: i32[1]\n")


def _codes_and_messages(body: str, header: str = ATOMIC):
    result = check_text(ATOMIC_BUFFERS + body, header=header)
    wanted = ("PC003", "PC305", "PC307")
    return [(d.code, d.message, d.labels) for d in result.diagnostics if d.code in wanted]


def test_forbidden_instructions_are_only_looked_for_in_the_step():
    init = "init {\n    launch count_positive_atomic<<<1, N>>>(in x, positives, N)\n}\n"
    assert _codes_and_messages(init) == []


def test_an_atomic_names_the_launch_and_the_instruction_itself():
    ((code, message, labels),) = _codes_and_messages(
        "step {\n    launch count_positive_atomic<<<1, N>>>(in x, positives, N)\n}\n")
    assert code == "PC305"
    assert message.startswith("kernel `count_positive_atomic` performs an atomic operation")
    assert [label.message for label in labels][0] == "launched in the step here"
    assert labels[1].message.startswith("`atom.global.add") and labels[1].message.endswith("itself, in `kernels.cu`")


def test_an_unused_waiver_says_why_it_is_unused():
    found = _codes_and_messages(
        'waive atomics for add_one: "r"\nwaive atomics for count_positive_atomic: "r"\n'
        "step {\n    launch add_one<<<1, N>>>(x, N)\n}\n")
    assert [(code, message) for code, message, _ in found] == [
        ("PC003", "nothing to waive: the step's `add_one` has no atomics finding"),
        ("PC003", "nothing to waive: the step never launches `count_positive_atomic`")]


@pytest.mark.parametrize("waived, reported", [("atomics", "PC307"), ("fence_barrier", "PC305")])
def test_a_waiver_exempts_one_finding_of_a_kernel_and_not_the_others(tmp_path, waived, reported):
    kernels = tmp_path / "two.cu"
    kernels.write_text('/// pipec: extent x = 1\nextern "C" __global__ void atomic_then_fence(int* x) {\n'
                       "    atomicAdd(x, 1);\n    __threadfence();\n}\n")
    found = _codes_and_messages(f'waive {waived} for atomic_then_fence: "r"\n'
                                "step {\n    launch atomic_then_fence<<<1, 1>>>(positives)\n}\n",
                                header=f'from "{kernels}" import atomic_then_fence\n')
    assert [code for code, _, _ in found] == [reported]


def test_reads_after_a_child_graph_are_still_checked():
    declarations = ("buffer u: f32[64] = uninit\n"
                    "graph bump {\n    launch add_one<<<1, 1>>>(x, N)\n}\n")
    found = lines("PC401", "    bump\n    launch copy_floats<<<1, 64>>>(in u, out y, 64)\n",
                  declarations=declarations)
    assert found == [2]


def test_every_access_of_a_launch_is_checked():
    declarations = "buffer u: f32[1] = uninit\n"
    found = lines("PC401", "    launch scale_by_pointer<<<1, N>>>(in x, out y, in u, N)\n",
                  declarations=declarations)
    assert found == [1]


def test_a_launch_that_reads_a_reported_buffer_still_has_its_other_reads_checked():
    declarations = "buffer u: f32[N] = uninit\nbuffer v: f32[1] = uninit\n"
    found = lines("PC401", "    launch copy_floats<<<1, N>>>(in u, out y, N)\n"
                  "    launch scale_by_pointer<<<1, N>>>(in u, out y, in v, N)\n", declarations=declarations)
    assert found == [1, 2]  # u once, then v, read after u by the same launch


@pytest.mark.parametrize("arch, limit", [
    ("sm_70", 98304), ("sm_72", 98304), ("sm_80", 166912), ("sm_86", 101376), ("sm_87", 166912),
    ("sm_89", 101376), ("sm_100", 232448), ("sm_120", 101376),
])
def test_shared_memory_limit_of_each_architecture(arch, limit):
    step = f"    launch block_sums<<<1, 256, {limit}>>>(in x, out y, N)\n" \
           f"    launch block_sums<<<1, 256, {limit + 1}>>>(in x, out y, N)\n"
    assert lines("PC312", step, arch=arch) == [2]


def test_a_boolean_parameter_takes_booleans_zero_and_one(tmp_path):
    kernels = tmp_path / "flag.cu"
    kernels.write_text('extern "C" __global__ void flagged(bool on) { (void)on; }\n')
    step = "".join(f"    launch flagged<<<1, 1>>>({v})\n" for v in ("true", "false", "0", "1", "2", "-1"))
    result = check_text("step {\n" + step + "}\n", header=f'from "{kernels}" import flagged\n')
    found = [(d.span.line - 2, d.message.split(": ")[-1]) for d in result.diagnostics if d.code == "PC204"]
    assert found == [(5, "`2` is not a boolean"), (6, "`-1` is not a boolean")]


SHARED = (f'from "{EXAMPLES / "kernels.cu"}" import add_one\n'
          "const N = 256\nbuffer x: f32[N] = uniform(-1.0, 1.0, seed=1)\nbuffer z: f32[N]\n"
          "graph actor {\n    launch add_one<<<1, N>>>(x, N)\n}\n"
          "graph learner {\n    launch add_one<<<1, N>>>(x, N)\n    launch add_one<<<1, N>>>(z, N)\n}\n")


def _shared(option: str):
    result = check_text(option + "step {\n    actor\n    learner\n}\n", header=SHARED)
    return [d for d in result.diagnostics if d.code == "PC308"]


def test_a_kernel_of_two_graphs_shares_a_cufunction_only_with_shared_modules():
    assert _shared("") == []
    (shared,) = _shared("option share_modules = true\n")
    assert shared.message == ("kernel `add_one` would share one CUfunction between `step/actor` "
                              "and `step/learner`")
    assert shared.span.line == 9
    assert [label.message for label in shared.labels] == ["used by `step/actor` here", "modules shared here"]


def test_a_kernel_launched_in_one_place_shares_nothing():
    header = (f'from "{EXAMPLES / "kernels.cu"}" import add_one\n'
              "option share_modules = true\nconst N = 256\nbuffer x: f32[N] = uniform(-1.0, 1.0, seed=1)\n")
    result = check_text("step {\n    launch add_one<<<1, N>>>(x, N)\n}\n", header=header)
    assert [d.code for d in result.diagnostics if d.code == "PC308"] == []


UNUSED = (f'from "{EXAMPLES / "kernels.cu"}" import scale_by_value\n'
          "const N = 256\nbuffer x: f32[N] = uniform(-1.0, 1.0, seed=1)\nbuffer y: f32[N]\n"
          "buffer lr: f32[1] = fill(0.01)\nbuffer spare: f32[4]\n")


def _unused(body: str) -> list[str]:
    return [d.message for d in check_text(body, header=UNUSED).diagnostics if d.code == "PC402"]


def test_unused_buffers():
    assert _unused("step {\n    launch scale_by_value<<<1, N>>>(in x, out y, lr[0], N)\n}\n") == [
        "buffer `spare` is never used"]  # lr is bound, by value


def test_no_unused_buffer_in_a_file_of_declarations_or_after_an_error():
    assert _unused("") == []
    assert _unused("init {\n    launch scale_by_value<<<1, N>>>(in x, out y, 1.0, N)\n}\n") == [
        "buffer `lr` is never used", "buffer `spare` is never used"]
    assert _unused("step {\n    launch missing_kernel<<<1, 1>>>(x, y, lr, spare)\n}\n") == []


def test_an_empty_read_needs_no_write():
    declarations = "buffer u: f32[64] = uninit\n"
    empty = "    launch copy_floats<<<1, 1>>>(in u[4:4], out y, 0)\n"
    assert lines("PC401", empty, declarations=declarations) == []


def test_an_extent_after_one_the_check_cannot_evaluate_is_still_checked(tmp_path):
    kernels = tmp_path / "two.cu"
    kernels.write_text("/// pipec: extent a = threadIdx.x\n/// pipec: extent b = n\n"
                       'extern "C" __global__ void two(float* a, float* b, int n) { }\n')
    result = check_text("const N = 8\nbuffer x: f32[N] = uniform(-1.0, 1.0, seed=1)\n"
                        "step {\n    launch two<<<1, 1>>>(x, x[0:4], 8)\n}\n",
                        header=f'from "{kernels}" import two\n')
    assert sorted(d.code for d in result.diagnostics) == ["PC106", "PC310"]


def test_a_launch_missing_arguments_gets_no_extent_finding():
    found = check_text("step {\n    launch copy_floats<<<1, 1>>>(in x)\n}\n", header=HEADER).diagnostics
    assert [d.code for d in found if d.code in ("PC106", "PC201", "PC310")] == ["PC201"]


def test_a_child_graph_that_writes_before_it_reads_is_clean():
    declarations = ("buffer u: f32[64] = uninit\n"
                    "graph produce_then_consume {\n"
                    "    launch copy_floats<<<1, 64>>>(in x, out u, 64)\n"
                    "    launch copy_floats<<<1, 64>>>(in u, out y, 64)\n}\n")
    assert lines("PC401", "    produce_then_consume\n", declarations=declarations) == []


def test_a_block_of_exactly_the_thread_limit_is_named_by_its_dimension():
    ((_, message),) = findings("PC311", "    launch add_one<<<1, (8, 1, 128)>>>(x, N)\n")
    assert message.startswith("a block with block.z = 128;")


def test_a_kernel_launched_in_one_graph_does_not_hide_a_shared_one():
    header = SHARED.replace("import add_one", "import add_one, copy_floats").replace(
        "graph actor {\n", "graph actor {\n    launch copy_floats<<<1, N>>>(in x, out z, N)\n")
    result = check_text("option share_modules = true\nstep {\n    actor\n    learner\n}\n", header=header)
    assert [d.message.split(" would")[0] for d in result.diagnostics if d.code == "PC308"] == [
        "kernel `add_one`"]


def test_extent_values_kept_while_unrolling_follow_what_each_extent_reads():
    """The unrolling keeps extent values by the names each extent reads: a scalar that changes
    from launch to launch but is not read (`a`) finds the kept value, one that is read (`n`)
    or the configuration (`gridDim`) gets a value of its own."""
    header = (f'from "{EXAMPLES / "kernels.cu"}" import scale_by_value, write_thread_index\n'
              "buffer x: f32[64]\nbuffer y: f32[64]\nbuffer index: i32[256]\n")
    result = check_text("""step {
    for k in 0 .. 3 {
        launch scale_by_value<<<1, 32>>>(in x, out y, k, 8)
        launch scale_by_value<<<1, 32>>>(in x, out y, 2, k + 1)
        launch write_thread_index<<<k + 1, 32>>>(out index)
    }
}
""", header=header)
    assert [d.code for d in result.diagnostics if d.severity.name == "ERROR"] == []
    stops = [tuple(a.stop for a in node.accesses) for node in result.program.step.items]
    assert stops == [(8, 64), (1, 64), (32,), (8, 64), (2, 64), (64,), (8, 64), (3, 64), (96,)]
