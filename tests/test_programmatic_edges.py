"""Which edges are programmatic (compiler/programmatic_edges.py), per node kind, with the reason
the plan records for every other; what `--emit dot` shows; and what the runtime hands the
driver: edges with edge data on sm_90 (cuda-bindings 12 and 13), launches with programmatic
stream serialization in eager execution, neither below sm_90."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import pipec
from fake_cublaslt import FakeCublasLt
from fake_cuda import FakeCuda, FakeCuda13, fake_driver
from pipec.compiler.emit import plan_dot
from pipec.compiler.programmatic_edges import _Ranges
from pipec import load
from pipec.runtime import Backends

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "compiler" / "explanations" / "examples" / "pdl_kernels.cu"
HEADER = """from "pdl_kernels.cu" import add_one, add_one_early
const N = 256
buffer x: f32[N] = uniform(-1.0, 1.0, seed=1)
buffer y: f32[N]
buffer z: f32[N]
buffer u: f32[N]
buffer v: f32[16, 16] = uniform(-1.0, 1.0, seed=2)
buffer m: f32[16, 16]
buffer flag: i32[1]
"""
KINDS = HEADER + """
graph pair {
    launch add_one<<<1, N>>>(in u, out z, N)
    launch add_one<<<1, N>>>(in z, out u, N)
}
step {
    fill y = 0.0
    launch add_one<<<1, N>>>(in x, out y, N)
    copy y -> z
    launch add_one<<<1, N>>>(in z, out u, N)
    pair
    launch add_one_early<<<1, N>>>(in u, out y, N)
    launch add_one<<<1, N>>>(in y, out z, N)
    gemm m = v @ v
    launch add_one<<<1, N>>>(in m[0:16], out x[0:16], 16)
    if flag[0] {
        launch add_one<<<1, N>>>(in x, out y, N)
        launch add_one<<<1, N>>>(in y, out z, N)
    }
}
"""


def _write(tmp_path: Path, text: str, name: str = "p") -> Path:
    shutil.copy(KERNELS, tmp_path / KERNELS.name)
    path = tmp_path / f"{name}.pipe"
    path.write_text(text)
    return path


def _plan_for(path: Path, arch: str):
    from pipec.compiler import compile_file, load_settings
    from pipec.compiler.config import override

    return compile_file(path, override(load_settings(path), arch=arch)).plan


def _edges(plan) -> dict[tuple[str, str], tuple[bool, str]]:
    """Every edge by (source name, destination name): (programmatic, reason)."""
    found = {}
    for graph in plan.graphs:
        for kind in graph.edge_kinds:
            found[graph.nodes[kind.src].name, graph.nodes[kind.dst].name] = (kind.programmatic, kind.reason)
    return found


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    path = _write(tmp_path_factory.mktemp("kinds"), KINDS)
    return path, pipec.check(path).plan


def test_each_node_kind_keeps_or_gets_its_edges(kinds):
    _, plan = kinds
    edges = _edges(plan)
    assert edges["step/fill:y", "step/add_one"] == (False, "from a memset node")
    assert edges["step/add_one", "step/copy:y->z"] == (False, "to a memcpy node")
    assert edges["step/copy:y->z", "step/add_one#2"] == (False, "from a memcpy node")
    # a child graph is opened: the kernels at its ends join the nodes around it
    assert edges["step/add_one#2", "step/pair"] == (True, "")
    assert edges["step/pair/add_one", "step/pair/add_one#2"] == (True, "")
    assert edges["step/pair", "step/add_one_early"] == (
        False, "`add_one_early` reads `u` before its wait, and an earlier node writes it")
    assert edges["step/add_one_early", "step/add_one#3"] == (True, "")
    assert edges["step/gemm:m", "step/add_one#4"] == (False, "from a GEMM node (a library call's graph)")
    # the kernel pipec generates to decide the node: programmatic edges may leave it, not enter
    assert edges["step/decide:if", "step/if"] == (False, "to a conditional node")
    body = [value for (a, b), value in edges.items() if a.startswith("step/if/")]
    assert body and all(value == (False, "in a conditional node's body") for value in body)


def test_edge_kinds_follow_the_edges_and_survive_json(kinds):
    from pipec.plan import schema

    _, plan = kinds
    for graph in plan.graphs:
        assert [(k.src, k.dst) for k in graph.edge_kinds] == list(graph.edges)
    assert schema.from_json(schema.to_json(plan)) == plan


def test_dot_marks_programmatic_edges_and_gives_the_others_their_reason(kinds):
    _, plan = kinds
    dot = plan_dot(plan)
    assert "(programmatic)" in dot and "penwidth=2, color=blue" in dot
    assert 'tooltip="ordinary: from a memset node"' in dot


def test_a_generated_kernel_gets_no_edge_in_and_may_give_one_out(tmp_path):
    path = _write(tmp_path, HEADER + 'option copy = "kernel"\nstep {\n'
                  "    launch add_one<<<1, N>>>(in x, out y, N)\n    copy y -> z\n"
                  "    launch add_one<<<1, N>>>(in z, out u, N)\n}\n")
    edges = _edges(pipec.check(path).plan)
    (into,) = [v for (a, b), v in edges.items() if b.startswith("step/copy")]
    (out,) = [v for (a, b), v in edges.items() if a.startswith("step/copy")]
    assert into == (False, "to `pipec_copy_16`, a kernel pipec generates without a wait") and out == (True, "")


CHAIN = HEADER + """step {
    launch add_one<<<1, N>>>(in x, out y, N)
    launch add_one<<<1, N>>>(in y, out z, N)
    launch add_one<<<1, N>>>(in z, out u, N)
}
"""


def test_the_option_and_the_target_keep_every_edge_ordinary(tmp_path):
    off = _write(tmp_path, 'option pdl = "off"\n' + CHAIN, "off")
    assert set(_edges(pipec.check(off).plan).values()) == {(False, 'option pdl = "off"')}
    auto = _write(tmp_path, CHAIN, "auto")
    assert set(_edges(pipec.check(auto).plan).values()) == {(True, "")}
    old = _plan_for(auto, "sm_80")
    assert set(_edges(old).values()) == {(False, "sm_80 has no programmatic launch (sm_90 or newer)")}


def test_an_option_pdl_of_another_value_is_reported(tmp_path):
    path = _write(tmp_path, 'option pdl = "on"\n' + CHAIN)
    (diagnostic,) = [d for d in pipec.check(path).diagnostics if d.code != "PC402"]  # unused buffers
    assert diagnostic.code == "PC108" and '"auto" or "off"' in diagnostic.hint


@pytest.mark.parametrize("fake", [FakeCuda, FakeCuda13], ids=["cuda12", "cuda13"])
def test_the_runtime_adds_programmatic_edges_with_edge_data_and_launches_eagerly_alike(kinds, fake):
    path, plan = kinds
    driver = fake_driver(path, fake=fake)
    pipeline = load(path, backends=Backends(driver, FakeCublasLt(driver.cu)))
    with pipeline:
        cu = driver.cu
        added = cu.named("cuGraphAddDependencies_v2" if fake is FakeCuda else "cuGraphAddDependencies")
        # add_one#2 -> pair's first, pair's two, add_one_early -> add_one#3, add_one -> add_one#4
        assert len(added) == pipeline.graph.programmatic_edges == 4
        assert pipeline.graph.open_children and not pipeline.graph.flatten  # an edge into `pair` is programmatic
        cu.calls.clear()
        pipeline.run_eager(1)
        launched = [c.name for c in cu.calls if c.name.startswith("cuLaunchKernel")]
        assert launched.count("cuLaunchKernelEx") == 4
        assert pipeline.verify(1).ok


def test_below_sm_90_the_runtime_adds_no_programmatic_edge(kinds):
    path, _ = kinds
    driver = fake_driver(path, capability=(8, 0))
    with load(path, backends=Backends(driver, FakeCublasLt(driver.cu))) as pipeline:
        assert pipeline.graph.programmatic_edges == 0 and not pipeline.graph.open_children
        assert not driver.cu.named("cuGraphAddDependencies_v2")
        pipeline.run_eager(1)
        assert not driver.cu.named("cuLaunchKernelEx")


def test_a_step_repeated_on_the_device_keeps_ordinary_edges():
    """--steps-per-launch K without --unroll: the step becomes a WHILE node's body."""
    rl_step = ROOT / "pipelines" / "rl_step.pipe"
    driver = fake_driver(rl_step)
    with load(rl_step, steps_per_launch=4, backends=Backends(driver)) as pipeline:
        plan = pipeline.plan
        kinds = [k for g in plan.graph_tree(plan.step) for k in g.edge_kinds]
        assert kinds and not any(k.programmatic for k in kinds)
        assert pipeline.graph.programmatic_edges == 0 and not driver.cu.named("cuGraphAddDependencies_v2")


@given(st.lists(st.tuples(st.integers(0, 20), st.integers(1, 6)), max_size=8), st.integers(0, 20), st.integers(1, 6))
@example([(0, 2), (4, 2), (1, 4)], 5, 1)   # one range joins two, ending in the second
@example([(4, 2)], 2, 3)                    # starts before the only range and ends inside it
@example([(4, 2)], 2, 2)                    # ends where the range starts
@example([(4, 2)], 6, 2)                    # starts where the range ends
@example([(0, 2), (4, 4)], 9, 1)            # after the last of two
@example([(0, 2), (2, 2), (1, 2)], 3, 1)    # touching ranges join; a range held already
def test_ranges_overlap_a_range_exactly_where_the_elements_added_do(added, start, length):
    """The ranges early_hazards keeps of what earlier nodes touch, against sets of integers
    (callers add and ask only non-empty ranges)."""
    ranges, elements = _Ranges(), set()
    for first, count in added:
        ranges.add(first, first + count)
        elements |= set(range(first, first + count))
    starts, stops = ranges.starts, ranges.stops
    assert {e for a, b in zip(starts, stops) for e in range(a, b)} == elements
    assert all(a < b for a, b in zip(starts, stops)) and all(b < a for b, a in zip(stops, starts[1:]))
    assert ranges.overlaps(start, start + length) == bool(elements & set(range(start, start + length)))


# Kernels whose early accesses and waits the PC323 examples' kernels do not cover.
MORE_KERNELS = """#include "pdl.cuh"

/// y = 0, then y = x after the wait: a write before the wait.
/// pipec: extent x = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void write_early(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.0f;
    pipec_wait_for_producer();
    if (i < n) y[i] = x[i];
}

/// y = x, returning before the wait in threads past n: waits on some paths only.
/// pipec: extent x = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void wait_unless_past(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    pipec_wait_for_producer();
    y[i] = x[i];
}

/// y = x, letting dependents start but never waiting.
/// pipec: extent x = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void trigger_only(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    pipec_let_dependents_start();
    if (i < n) y[i] = x[i];
}

/// y = a or b (by n), read before the wait: an early read from either parameter.
/// pipec: extent a = n
/// pipec: extent b = n
/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void pick_early(const float* a, const float* b, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float v = i < n ? (n > 128 ? a : b)[i] : 0.0f;
    pipec_wait_for_producer();
    if (i < n) y[i] = v;
}
"""
MORE = HEADER.replace('import add_one, add_one_early', 'import add_one, add_one_early, scale_by_weight') + \
    'from "more_kernels.cu" import write_early, wait_unless_past, trigger_only, pick_early\nbuffer w: f32[1]\n'


def _more(tmp_path: Path, text: str) -> Path:
    (tmp_path / "more_kernels.cu").write_text(MORE_KERNELS)
    return _write(tmp_path, MORE + text)


def _early_reports(compilation) -> list[str]:
    return sorted(d.message for d in compilation.diagnostics if d.code == "PC323")


def test_an_early_access_goes_through_its_own_pointer_only(tmp_path):
    """scale_by_weight reads only `w` before its wait: that the launch before writes its `x`
    binding is no hazard."""
    path = _more(tmp_path, "step {\n    launch add_one<<<1, N>>>(in x, out y, N)\n"
                 "    launch scale_by_weight<<<1, N>>>(in y, in w, out z, N)\n}\n")
    assert _edges(pipec.check(path).plan)["step/add_one", "step/scale_by_weight"] == (True, "")


def test_an_early_access_is_bound_past_a_pointer_given_a_value(tmp_path):
    """`x` given 0 (PC202; the checks still run) has no binding: `w`'s is the launch's
    first, which the launch before writes."""
    path = _more(tmp_path, "step {\n    launch add_one<<<1, N>>>(in x, out y, N)\n"
                 "    launch scale_by_weight<<<1, N>>>(0, in y, out z, N)\n}\n")
    compilation = pipec.check(path)
    assert [d.code for d in compilation.diagnostics if d.code != "PC402"] == ["PC202", "PC323"]
    (report,) = _early_reports(compilation)
    assert "reads `y`" in report


def test_an_earlier_access_to_another_range_of_the_buffer_is_no_hazard(tmp_path):
    """An early read of y[16:32] after a write of y[0:16]; an early write of u[16:32] after a
    read of u[0:16]. Each pair is ordered by another buffer, read after the wait."""
    path = _more(tmp_path, "step {\n"
                 "    launch add_one<<<1, 16>>>(in x[0:16], out y[0:16], 16)\n"
                 "    launch add_one_early<<<1, 16>>>(in y[16:32], out x[0:16], 16)\n"
                 "    launch add_one<<<1, 16>>>(in u[0:16], out z[0:16], 16)\n"
                 "    launch write_early<<<1, 16>>>(in z[0:16], out u[16:32], 16)\n}\n")
    compilation = pipec.check(path)
    edges = _edges(compilation.plan)
    assert edges["step/add_one", "step/add_one_early"] == (True, "")
    assert edges["step/add_one#2", "step/write_early"] == (True, "")
    assert _early_reports(compilation) == []


def test_an_early_write_over_what_an_earlier_node_reads_is_a_hazard(tmp_path):
    path = _more(tmp_path, "step {\n    launch add_one<<<1, N>>>(in u, out z, N)\n"
                 "    launch write_early<<<1, N>>>(in z, out u, N)\n}\n")
    compilation = pipec.check(path)
    assert _edges(compilation.plan)["step/add_one", "step/write_early"] == (
        False, "`write_early` writes `u` before its wait, and an earlier node reads it")
    (report,) = _early_reports(compilation)
    assert "writes `u`" in report and "`step/add_one` reads earlier" in report


def test_a_conditional_node_s_bodies_are_checked_down_to_the_innermost(tmp_path):
    path = _more(tmp_path, "step {\n    if flag[0] {\n"
                 "        launch add_one<<<1, N>>>(in x, out y, N)\n"
                 "        launch add_one_early<<<1, N>>>(in y, out z, N)\n"
                 "        if flag[0] {\n"
                 "            launch add_one<<<1, N>>>(in z, out u, N)\n"
                 "            launch add_one_early<<<1, N>>>(in u, out x, N)\n"
                 "        }\n    }\n}\n")
    reports = _early_reports(pipec.check(path))
    assert len(reports) == 2
    assert "reads `y`" in reports[0] + reports[1] and "reads `u`" in reports[0] + reports[1]


def test_a_kernel_that_may_not_wait_gets_no_programmatic_edge_in(tmp_path):
    path = _more(tmp_path, "step {\n    launch add_one<<<1, N>>>(in x, out y, N)\n"
                 "    launch wait_unless_past<<<1, N>>>(in y, out z, N)\n"
                 "    launch trigger_only<<<1, N>>>(in z, out u, N)\n}\n")
    edges = _edges(pipec.check(path).plan)
    assert edges["step/add_one", "step/wait_unless_past"] == (
        False, "`wait_unless_past` does not wait for its predecessor (griddepcontrol.wait) on every path")
    assert edges["step/wait_unless_past", "step/trigger_only"] == (
        False, "`trigger_only` does not wait for its predecessor (griddepcontrol.wait) at all")


def test_edges_through_empty_child_graphs_stay_ordinary_and_nested_ones_open(tmp_path):
    """One lane orders every node, so edges run into and out of child graphs without accesses:
    one empty, one holding only an empty one. A child graph holding one with kernels opens to
    those kernels."""
    path = _more(tmp_path, 'option lanes = 1\n'
                 "graph empty {\n}\ngraph holds_empty {\n    empty\n}\n"
                 "graph pair {\n    launch add_one<<<1, N>>>(in y, out z, N)\n"
                 "    launch add_one<<<1, N>>>(in z, out u, N)\n}\n"
                 "graph wraps_pair {\n    pair\n}\n"
                 "step {\n    launch add_one<<<1, N>>>(in x, out y, N)\n    empty\n"
                 "    launch add_one<<<1, N>>>(in x, out y, N)\n    holds_empty\n"
                 "    launch add_one<<<1, N>>>(in x, out y, N)\n    wraps_pair\n"
                 "    launch add_one<<<1, N>>>(in u, out x, N)\n}\n")
    edges = _edges(pipec.check(path).plan)
    empty = (False, "through an empty child graph")
    assert edges["step/add_one", "step/empty"] == edges["step/empty", "step/add_one#2"] == empty
    assert edges["step/add_one#2", "step/holds_empty"] == edges["step/holds_empty", "step/add_one#3"] == empty
    assert edges["step/add_one#3", "step/wraps_pair"] == edges["step/wraps_pair", "step/add_one#4"] == (True, "")
