"""The lowering (compiler/lower.py) on small programs: what each node becomes in the plan, with
its module, arguments, accesses and edges, for what scripts/mutate.py found unchecked. The
equivalent survivors are listed in CONTRIBUTING.md ("Mutation testing")."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pipec
from pipec.plan.schema import (
    AccessSpec, ArgSpec, ChildGraphNodeSpec, HazardEdge, KernelNodeSpec, MemcpyNodeSpec, MemsetNodeSpec,
)

from stage_helpers import check_text

CONDITIONALS = Path(__file__).parent / "fixtures" / "runtime" / "conditionals.pipe"

PROGRAM = """
{options}
buffer a: f32[64]
buffer b: f32[64]
buffer d: f64[8]
buffer unused: u8[4]
graph produce {{ launch writer<<<1, 64>>>(out a, 64) }}
init {{
    fill d = 1.5
}}
step {{
    produce
    launch copier<<<1, 64>>>(in a, out b, 64)
    fill a[8:32] = 0
    copy b[4:20] -> a[8:24]
    launch reader<<<1, 64>>>(in b[16:64], 48)
    launch writer<<<2, 32>>>(inout a, 64)
}}
"""


def plan(options: str = "", program: str = PROGRAM):
    result = check_text(program.format(options=options))
    assert [d.code for d in result.diagnostics] == ["PC402"]  # `unused`: a warning
    return result.plan


def test_each_node_kind_lowers_with_its_module_arguments_and_accesses():
    p = plan('option copy = "kernel"')
    glue, kernels = p.modules
    assert (glue.index, glue.name, glue.path) == (0, "pipec_glue.cu", None) and "pipec_fill_8" in glue.source
    assert (kernels.index, kernels.name, kernels.source) == (1, "stage_kernels.cu", None)
    assert kernels.path.endswith("tests/fixtures/stage_kernels.cu")
    init, step, child = p.graphs
    assert (p.init, p.step) == (0, 1) and (init.scope, step.scope, child.scope) == ("eager", "step", "step/produce")
    (fill_d,) = init.nodes
    assert isinstance(fill_d, KernelNodeSpec) and (fill_d.module, fill_d.function) == (0, "pipec_fill_8")
    assert (fill_d.grid, fill_d.block, fill_d.shared_bytes) == ((1, 1, 1), (256, 1, 1), 0)
    assert fill_d.args == (ArgSpec("pointer", "ptr", "d", 0), ArgSpec("scalar", "u64", value=0x3FF8000000000000),
                           ArgSpec("scalar", "u64", value=8))
    produce, copier, fill_a, copy, reader, inout = step.nodes
    assert isinstance(produce, ChildGraphNodeSpec) and produce.graph == 2
    assert (copier.module, copier.function, copier.grid, copier.block) == (1, "copier", (1, 1, 1), (64, 1, 1))
    assert copier.args == (ArgSpec("pointer", "ptr", "a", 0), ArgSpec("pointer", "ptr", "b", 0),
                           ArgSpec("scalar", "i32", value=64))
    assert copier.accesses == (AccessSpec("a", 0, 64, "r"), AccessSpec("b", 0, 64, "w"))
    assert reader.args == (ArgSpec("pointer", "ptr", "b", 64), ArgSpec("scalar", "i32", value=48))
    assert inout.accesses == (AccessSpec("a", 0, 64, "rw"),) and (inout.grid, inout.block) == ((2, 1, 1), (32, 1, 1))
    assert fill_a == MemsetNodeSpec(2, "step/fill:a", fill_a.location, (AccessSpec("a", 8, 32, "w"),), "a", 32, 4, 0, 24)
    assert (copy.module, copy.function, copy.grid, copy.block, copy.shared_bytes) == (
        0, "pipec_copy_16", (1, 1, 1), (256, 1, 1), 0)
    assert copy.args == (ArgSpec("pointer", "ptr", "b", 16), ArgSpec("pointer", "ptr", "a", 32),
                         ArgSpec("scalar", "u64", value=4))
    assert (copy.location.line, copy.location.column) == (16, 5)
    assert step.hazards == (HazardEdge(0, 1, "RAW", "a"), HazardEdge(1, 2, "WAR", "a"), HazardEdge(1, 4, "RAW", "b"),
                            HazardEdge(2, 3, "WAW", "a"), HazardEdge(3, 5, "RAW", "a"))
    assert step.edges == tuple((h.src, h.dst) for h in step.hazards)
    assert {b.name: b.step_first_access for b in p.buffers} == {"a": "write", "b": "write", "d": None, "unused": None}


def test_copies_lower_to_memcpy_nodes_by_default_and_lanes_order_a_wide_graph():
    p = plan("option lanes = 1")
    copy = p.graphs[1].nodes[3]
    assert copy == MemcpyNodeSpec(3, "step/copy:b->a", copy.location, copy.accesses, "b", 16, "a", 32, 64)
    assert p.lanes == 1 and p.graphs[1].edges == ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5))


def test_shared_modules_keep_one_scope_for_every_child_graph():
    p = plan("option share_modules = true", PROGRAM.replace("launch writer<<<2, 32>>>(inout a, 64)", ""))
    assert [g.scope for g in p.graphs] == ["eager", "shared", "shared"]


def test_scalars_take_the_type_of_their_parameter(tmp_path):
    kernels = tmp_path / "scale.cu"
    kernels.write_text('extern "C" __global__ void scale(float* x, float s, int n) { x[threadIdx.x] *= s; }\n')
    result = check_text("buffer x: f32[32]\nstep {\n    launch scale<<<1, 32>>>(inout x, 2, 3)\n}\n",
                        header=f'from "{kernels}" import scale\n')
    (launch,) = result.plan.graphs[0].nodes
    _, factor, count = launch.args
    assert (factor.ctype, type(factor.value), factor.value) == ("f32", float, 2.0)
    assert (count.ctype, type(count.value), count.value) == ("i32", int, 3)


def test_deciding_kernels_are_one_thread_and_a_repeat_knows_where_it_starts():
    p = pipec.check(CONDITIONALS).plan
    decides = [n for g in p.graphs for n in g.nodes
               if isinstance(n, KernelNodeSpec) and n.function.startswith("pipec_condition_")]
    assert {(n.grid, n.block, n.shared_bytes) for n in decides} == {((1, 1, 1), (1, 1, 1), 0)}
    assert [(a.kind, a.ctype) for a in decides[0].args] == [
        ("handle", "u64"), ("in_graph", "u32"), ("pointer", "ptr"), ("pointer", "ptr"), ("scalar", "u32")]
    repeats = [n.args[-1].value for n in decides if n.function == "pipec_condition_repeat"]
    assert repeats == [1, 0]  # before the loop, then again at the end of its body


def test_a_flag_is_read_at_its_elements_byte_offset():
    result = check_text("buffer f: i32[4] = fill(1)\nbuffer a: f32[8]\nstep {\n"
                        "    if f[2] { fill a = 0 }\n    launch reader<<<1, 8>>>(in a, 8)\n}\n")
    decide = result.plan.graphs[result.plan.step].nodes[0]
    assert decide.args[2:] == (ArgSpec("pointer", "ptr", "f", 8), ArgSpec("pointer", "ptr", "pipec.control.0", 0),
                               ArgSpec("scalar", "u32", value=0))


def test_the_plan_names_the_pipe_and_its_digest():
    result = check_text("buffer x: f32[8]\ngraph g {\n    launch writer<<<1, 8>>>(out x, 8)\n"
                        "    launch reader<<<1, 8>>>(in x, 8)\n}\nstep {\n    g\n}\n")
    p = result.plan
    assert p.pipe == str(result.path) and p.pipe_sha256 == hashlib.sha256(result.path.read_bytes()).hexdigest()
