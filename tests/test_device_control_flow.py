"""Device control flow on CPU: parsing, the plan and its JSON and DOT forms, and what reaches the
(fake) driver: conditional handles, conditional nodes, their bodies and the generated kernels
that decide them; eager execution against the graph through every branch."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import pipec
from fake_cuda import Conditional, FakeCuda, FakeCuda13, fake_driver
from harness import compile_fixture, expected_diagnostics, explain
from pipec.compiler import codegen
from pipec.compiler.emit import plan_dot, plan_json
from pipec.compiler.steps_per_launch import CONTROL
from pipec.plan.schema import ConditionalNodeSpec, KernelNodeSpec, from_json
from pipec.dsl import SourceFile, ast, parse
from pipec import load
from pipec.runtime import Backends
from pipec.runtime.driver import Driver, NoDevice, open_device

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "runtime" / "conditionals.pipe"
IF, WHILE, SWITCH = 0, 1, 2  # CUgraphConditionalNodeType


def _parse(text: str) -> ast.Module:
    return parse(SourceFile(Path("t.pipe"), text))


def test_parsing_every_construct():
    (step,) = _parse("""step {
        if on[0] { } else { }
        switch mode[0] { case 0 { } case 3 { } }
        every 10 { }
        while busy[0] { }
        repeat 4 { }
    }""").decls
    if_, switch, every, while_, repeat = step.body.stmts
    assert isinstance(if_, ast.If) and isinstance(if_.cond, ast.Index) and if_.orelse is not None
    assert isinstance(switch, ast.Switch) and [c.value.value for c in switch.cases] == [0, 3]
    assert [(s.kind, type(s.operand).__name__) for s in (every, while_, repeat)] == [
        ("every", "IntLit"), ("while", "Index"), ("repeat", "IntLit")]


@pytest.fixture(scope="module")
def plan():
    compilation = pipec.check(FIXTURE)
    assert compilation.diagnostics == []
    return compilation.plan


def test_plan_lowers_each_construct_to_a_decided_conditional_node(plan):
    step = plan.graphs[plan.step]
    conditionals = [n for n in step.nodes if isinstance(n, ConditionalNodeSpec)]
    assert [(c.construct, c.type, c.handle, c.flag, c.flag_element, len(c.bodies)) for c in conditionals] == [
        ("if", "if", 0, "learn_on", 0, 2), ("switch", "switch", 1, "mode", 0, 3),
        ("every", "if", 2, None, None, 1), ("while", "while", 3, "busy", 0, 1),
        ("repeat", "while", 5, None, None, 1)]
    # the node before each conditional is its deciding kernel, and an edge joins them
    for node in conditionals:
        decide = step.nodes[node.id - 1]
        assert isinstance(decide, KernelNodeSpec) and decide.function.startswith("pipec_condition_")
        assert (decide.id, node.id) in step.edges
        assert decide.args[0].kind == "handle" and decide.args[0].value == node.handle
    functions = [step.nodes[c.id - 1].function for c in conditionals]
    assert functions == ["pipec_condition_i32", "pipec_condition_u8", "pipec_condition_every",
                         "pipec_condition_i32", "pipec_condition_repeat"]
    # a loop decides again at the end of its body
    for loop in (conditionals[3], conditionals[4]):
        last = plan.graphs[loop.bodies[0]].nodes[-1]
        assert last.function == functions[conditionals.index(loop)]
    # an empty switch case is an empty body; nesting makes its own handle
    assert plan.graphs[conditionals[1].bodies[1]].nodes == ()
    nested = plan.graphs[conditionals[3].bodies[0]].nodes
    assert [type(n).__name__ for n in nested] == ["MemsetNodeSpec", "KernelNodeSpec", "ConditionalNodeSpec",
                                                  "KernelNodeSpec"]
    assert nested[2].handle == 4
    module = plan.modules[step.nodes[0].module]
    assert module.name == codegen.CONDITIONS_MODULE_NAME and "cudaGraphSetConditional" in module.source


def test_plan_json_round_trip_and_dot(plan):
    data = json.loads(plan_json(plan))
    assert from_json(data) == plan
    kinds = [n["kind"] for n in data["graphs"][plan.step]["nodes"]]
    assert kinds.count("conditional") == 5
    dot = plan_dot(plan)
    assert 'shape=diamond, label="switch mode[0]\\nSWITCH node, handle 1"' in dot
    assert '[style=dotted, label="case 2"]' in dot and '[style=dotted, label="else"]' in dot


def _loaded(fake=FakeCuda):
    driver = fake_driver(FIXTURE, fake=fake)
    return load(FIXTURE, backends=Backends(driver)), driver.cu


@pytest.mark.parametrize("fake", [FakeCuda, FakeCuda13])
def test_driver_receives_handles_conditional_nodes_and_bodies(fake):
    pipeline, cu = _loaded(fake)
    with pipeline:
        creates = cu.named("cuGraphConditionalHandleCreate")
        root = cu.executables[pipeline.graph.exec]
        assert [c.args[1:] for c in creates] == [(pipeline.device.context, 0, 1)] * 6
        # handles are made on the graph that holds their node: the nested `if` in the loop body
        conditional_nodes = [n for n in root.nodes if n.kind == "conditional"]
        assert [c.args[0] for c in creates].count(root.handle) == 5
        works = [n.work for n in conditional_nodes]
        assert [(w.type, len(w.bodies)) for w in works] == [(IF, 2), (SWITCH, 3), (IF, 1), (WHILE, 1), (WHILE, 1)]
        assert all(isinstance(w, Conditional) and w.context == pipeline.device.context for w in works)
        added = cu.named("cuGraphAddNode")
        assert len(added) == 6 and len(added[0].args) == (5 if fake is FakeCuda13 else 4)
        # the deciding kernel gets the handle's value and "in graph" = 1
        decide = root.nodes[root.nodes.index(conditional_nodes[0]) - 1].work
        handle = works[0].handle
        assert decide.function == "pipec_condition_i32"
        assert decide.args[:2] == (struct.pack("<Q", int(handle)), struct.pack("<I", 1))
        assert decide.args[2] == struct.pack("<Q", pipeline.buffer("learn_on").device_ptr)
        assert decide.args[3] == struct.pack("<Q", pipeline.buffer("pipec.control.0").device_ptr)
        loop_body = works[3].bodies[0]
        assert [n.kind for n in loop_body.nodes] == ["memset", "kernel", "conditional", "kernel"]
        # `repeat 3`: the kernel before the node loads the counter, the body's last counts down
        u32 = lambda v: struct.pack("<I", v)
        control = struct.pack("<Q", pipeline.buffer("pipec.control.5").device_ptr)
        start = root.nodes[root.nodes.index(conditional_nodes[4]) - 1].work
        again = works[4].bodies[0].nodes[-1].work
        assert (start.function, again.function) == ("pipec_condition_repeat",) * 2
        assert start.args == (struct.pack("<Q", int(works[4].handle)), u32(1), control, u32(3), u32(1))
        assert again.args == start.args[:4] + (u32(0),)


def test_eager_and_graph_take_the_same_branches():
    pipeline, cu = _loaded()
    with pipeline:
        report = pipeline.verify(4)
        assert report.ok, [m.describe() for m in report.mismatches]
        assert report.branches == {"step/if": {0: 4}, "step/switch": {2: 4}, "step/every": {0: 2},
                                   "step/while": {0: 4}, "step/while/body/if": {0: 4},
                                   "step/repeat": {0: 12}}
        pipeline.step(2)
        assert pipeline.read("a")[0] == 1.0 and pipeline.read("b")[0] == 2.0
        assert pipeline.read("d")[0] == 4.0 and pipeline.read("busy")[0] == 0
        # not taken: the else body, and no switch case for a value without one
        pipeline.write("learn_on", np.array([0], np.int32))
        pipeline.write("mode", np.array([5], np.uint8))
        pipeline.write("b", np.full(32, 7.0, np.float32))
        pipeline.step(1)
        assert pipeline.read("a")[0] == 2.0 and pipeline.read("b")[0] == 7.0
        assert pipeline.read("pipec.control.1")[0] == 5  # the switch's decision
        report = pipeline.verify(3)
        assert report.ok and report.branches["step/if"] == {1: 3} and report.branches["step/switch"] == {}
        assert "`step/switch`: no body run" in report.describe_branches()


def test_else_and_switch_need_driver_12_8():
    class Driver127(FakeCuda):
        def cuDriverGetVersion(self):
            return (0, 12070)

    with pytest.raises(NoDevice, match=r"^the CUDA driver supports API 12\.7; `if` with `else` on the device "
                                       r"\(.*conditionals\.pipe:16:5\) needs 12\.8 or newer$"):
        _loaded(Driver127)


def test_an_old_driver_gets_one_line_naming_the_version_needed():
    class OldDriver(FakeCuda):
        def cuDriverGetVersion(self):
            return (0, 12030)

    with pytest.raises(NoDevice, match=r"API 12\.3; pipec needs 12\.4 or newer"):
        open_device(0, Driver(OldDriver(param_sizes={})))


def test_steps_per_launch_wraps_the_step_in_a_device_loop():
    driver = fake_driver(FIXTURE)
    cu = driver.cu
    with load(FIXTURE, backends=Backends(driver), steps_per_launch=4) as pipeline:
        plan = pipeline.plan
        root = plan.graphs[plan.step]
        decide, loop = root.nodes
        assert (decide.function, [a.value for a in decide.args[3:]]) == ("pipec_condition_repeat", [4, 1])
        assert loop.type == "while" and loop.handle == 6 and root.edges == ((0, 1),)
        body = plan.graphs[loop.bodies[0]]
        assert body.name == "step" and body.nodes[-1].name == "step/decide:launch"
        graph = cu.executables[pipeline.graph.exec]
        assert [n.kind for n in graph.nodes] == ["kernel", "conditional"]
        before = len(cu.launches)
        pipeline.step(1)  # one launch: four steps, each with `repeat 3`, and `every 2` twice
        assert [l.function for l in cu.launches[before:]].count("add_value") == 4 * 3 + 2
        assert pipeline.read(CONTROL)[1] == 0  # the counter ran down
        report = pipeline.verify(2)
        assert report.ok and report.branches["launch/repeat"] == {0: 8} and report.branches["step/every"] == {0: 4}


def test_unrolled_steps_per_launch_copy_the_step_into_one_graph():
    rl_step = ROOT / "pipelines" / "rl_step.pipe"
    driver = fake_driver(rl_step)
    cu = driver.cu
    with load(rl_step, backends=Backends(driver), steps_per_launch=3, unroll=True) as pipeline:
        plan = pipeline.plan
        step = plan.graphs[plan.step]
        assert CONTROL not in {b.name for b in plan.buffers}  # no device-side loop
        names = [n.name for n in step.nodes]
        assert len(names) == 3 * len({n.split("#")[0] for n in names})
        assert {n.split("#")[1] for n in names if "#" in n} == {"2", "3"}
        scopes = [g.scope for g in plan.graphs if g.name.startswith("step/act")]
        assert len(scopes) == len(set(scopes)) == 3  # each copy its own module instances
        before = len(cu.launches)
        pipeline.step(1)  # one launch: three steps
        assert [l.function for l in cu.launches[before:]].count("mlp_act_push") == 3
        # a live update reaches every copy
        assert pipeline.update(GAMMA=0.95) == ["step/act/mlp_act_push", "step/act#2/mlp_act_push",
                                               "step/act#3/mlp_act_push"]


def test_unrolled_steps_refuse_an_every_block(capsys):
    """`every N` counts the replays of its graph: unrolled, each copy would count launches.
    piperun says so in one line (before it looks for a GPU) and exits with 2."""
    from pipec.runtime.cli import main

    with pytest.raises(pipec.PipelineError, match="the step has an `every` block"):
        load(FIXTURE, backends=Backends(fake_driver(FIXTURE)), steps_per_launch=4, unroll=True)
    assert main([str(FIXTURE), "--steps", "8", "--log-every", "4", "--steps-per-launch", "4", "--unroll"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the step has an `every` block, which counts replays" in err[0]


def test_piperun_steps_per_launch_must_divide_the_steps(capsys):
    from pipec.runtime.cli import main

    with pytest.raises(SystemExit):
        main([str(FIXTURE), "--steps", "10", "--steps-per-launch", "4"])
    assert "--steps-per-launch must be >= 1 and divide --steps and --log-every" in capsys.readouterr().err


def test_each_invalid_construct_is_reported_where_it_is():
    fixture = ROOT / "tests" / "fixtures" / "control_flow_errors.pipe"
    actual, result = compile_fixture(fixture)
    assert actual == expected_diagnostics(fixture), explain(actual, expected_diagnostics(fixture), result)
    hints = {d.code: d.hint for d in result.diagnostics}
    assert "`if flag[0] { }`" in hints["PC301"]


def test_compile_time_if_stays_compile_time(tmp_path):
    program = tmp_path / "t.pipe"
    program.write_text(f'from "{ROOT}/kernels/examples.cu" import add_value\n'
                       "const ON = true\nbuffer x: f32[4] = fill(0.0)\n"
                       "step { if ON { launch add_value<<<1, 4>>>(x, 1.0, 4) } else { fill x = 0.0 } }\n")
    plan = pipec.check(program).plan
    assert [type(n).__name__ for n in plan.graphs[plan.step].nodes] == ["KernelNodeSpec"]
    assert not any(m.name == codegen.CONDITIONS_MODULE_NAME for m in plan.modules)


def test_a_condition_nothing_writes_first_is_read_before_write(tmp_path):
    program = tmp_path / "t.pipe"
    program.write_text(f'from "{ROOT}/kernels/examples.cu" import add_value\n'
                       "buffer on: i32[1] = uninit\nbuffer x: f32[4] = fill(0.0)\n"
                       "step { if on[0] { launch add_value<<<1, 4>>>(x, 1.0, 4) } }\n")
    assert [(d.code, d.span.text) for d in pipec.check(program).diagnostics] == [("PC401", "on[0]")]
