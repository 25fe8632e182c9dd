"""The runtime on CPU, through the fake CUDA driver (tests/fake_cuda.py): the exact nodes,
kernel arguments, memsets, child graphs and edges handed to the driver; eager launches;
buffer set-up; state save/load; verification's bookkeeping; launch limits (PC316)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from fake_cublaslt import FakeCublasLt
from fake_cuda import FunctionAttributes, Memcpy, Memset, fake_driver
from pipec.plan.schema import (
    ChildGraphNodeSpec, ConditionalNodeSpec, GemmNodeSpec, KernelNodeSpec, MemcpyNodeSpec, MemsetNodeSpec,
)
from pipec import load
from pipec.runtime import Backends, PipelineError
from pipec.runtime.memory import OutOfMemory

ROOT = Path(__file__).resolve().parents[1]
NODES = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
PIPES = [ROOT / "pipelines" / "rl_step.pipe", *sorted((ROOT / "pipelines" / "examples").glob("*.pipe")),
         NODES, ROOT / "tests" / "fixtures" / "runtime" / "copies.pipe"]
N = 1000


def _load(path: Path, **device):
    driver = fake_driver(path, **device)
    return load(path, backends=Backends(driver, FakeCublasLt(driver.cu))), driver.cu


@pytest.fixture
def nodes():
    pipeline, fake = _load(NODES)
    with pipeline:
        yield pipeline, fake
    assert fake.live() == dict.fromkeys(fake.live(), 0), "close leaves something allocated"


def _ptr(pipeline, name: str, offset: int = 0) -> bytes:
    return struct.pack("<Q", pipeline.buffer(name).device_ptr + offset)


def _index(graph):
    return {node.handle: i for i, node in enumerate(graph.nodes)}


def test_step_graph_nodes_edges_and_arguments(nodes):
    pipeline, fake = nodes
    root = fake.executables[pipeline.graph.exec]
    assert [n.kind for n in root.nodes] == ["kernel", "graph", "kernel", "graph", "kernel", "memcpy",
                                            "memset", "memset", "kernel", "memset", "kernel", "kernel"]
    index = _index(root)
    assert [sorted(index[d] for d in n.deps) for n in root.nodes] == \
        [[], [], [1], [2], [3], [2], [], [], [], [], [5], [0, 10]]
    i32, f32 = (lambda v: struct.pack("<i", v)), (lambda v: struct.pack("<f", v))
    kernels = {i: root.nodes[i].work for i in (0, 2, 4, 8, 10, 11)}
    assert kernels[0].function == "tick" and kernels[0].args == (_ptr(pipeline, "counter"),)
    assert (kernels[0].grid, kernels[0].block) == ((1, 1, 1), (1, 1, 1))
    assert kernels[2].function == "saxpy" and kernels[2].args == (
        _ptr(pipeline, "x"), _ptr(pipeline, "y"), _ptr(pipeline, "a"), i32(N))
    assert (kernels[2].grid, kernels[2].block, kernels[2].shared_bytes) == ((8, 1, 1), (128, 1, 1), 0)
    assert kernels[4].args == (_ptr(pipeline, "x"), _ptr(pipeline, "scaled_x"), f32(2.0), i32(N))
    # f64 1.25 has two different 32-bit halves: an 8-byte fill kernel, not a memset
    assert kernels[8].function == "pipec_fill_8" and kernels[8].args == (
        _ptr(pipeline, "wide"), struct.pack("<d", 1.25), struct.pack("<Q", 16))
    assert kernels[10].function == "sum" and kernels[10].block == (256, 1, 1)
    assert kernels[11].args == (_ptr(pipeline, "counter"), _ptr(pipeline, "total"), _ptr(pipeline, "diag"))
    copy = root.nodes[5].work
    assert (copy.src, copy.dst, copy.nbytes) == (pipeline.buffer("y").device_ptr,
                                                 pipeline.buffer("copy_of_y").device_ptr, 4 * N)
    memsets = [(m.dst, m.element_size, m.value, m.count) for m in (root.nodes[i].work for i in (6, 7, 9))]
    assert memsets == [
        (pipeline.buffer("halves").device_ptr, 2, 0x4100, 64),  # f16 2.5
        (pipeline.buffer("bytes").device_ptr + 10, 1, 3, 80),
        (pipeline.buffer("integers").device_ptr + 16, 4, 0xFFFFFFFF, 8),  # i64 -1: equal halves
    ]


def test_each_child_graph_instance_is_its_own_graph_with_its_own_function(nodes):
    pipeline, fake = nodes
    root = fake.executables[pipeline.graph.exec]
    first, second = (root.nodes[i].child for i in (1, 3))
    assert first is not second
    for child in (first, second):
        assert [n.kind for n in child.nodes] == ["kernel"] and child.nodes[0].deps == ()
        launch = child.nodes[0].work
        assert launch.function == "add_one" and launch.args == (_ptr(pipeline, "x"), struct.pack("<i", N))
        assert (launch.grid, launch.block) == ((8, 1, 1), (128, 1, 1))
    loads = fake.named("cuModuleGetFunction")
    add_one = [c.args[0] for c in loads if c.args[1] == b"add_one"]
    assert len(set(add_one)) == 3, "two child graph scopes and the eager scope, one module each"


def test_buffers_are_set_up_on_the_host_and_copied(nodes):
    pipeline, fake = nodes
    rng = np.random.Generator(np.random.PCG64(3))
    assert np.array_equal(pipeline.read("x"), rng.uniform(-1.0, 1.0, N).astype(np.float32))
    assert np.array_equal(pipeline.read("y"), np.random.Generator(np.random.PCG64(4)).normal(0.0, 2.0, N)
                          .astype(np.float32))
    setup = {(c.name, c.args[0]): c.args[1:] for c in fake.named("cuMemsetD8", "cuMemsetD16", "cuMemsetD32")}
    assert setup[("cuMemsetD32", pipeline.buffer("a").device_ptr)] == (0x3F000000, 1)  # fill(0.5)
    assert setup[("cuMemsetD16", pipeline.buffer("halves").device_ptr)] == (0x3C00, 64)  # f16 fill(1.0)
    assert setup[("cuMemsetD32", pipeline.buffer("scaled_x").device_ptr)] == (0x7FC0DEAD, N)  # uninit: poison
    assert setup[("cuMemsetD32", pipeline.buffer("counter").device_ptr)] == (0, 1)
    # i64 7 has unequal halves: no memset fits, the host prepares it and copies it over
    copied = {c.args[0] for c in fake.named("cuMemcpyHtoD")}
    assert pipeline.buffer("integers").device_ptr in copied
    assert np.array_equal(pipeline.read("integers"), np.full(8, 7, np.int64))
    assert pipeline.buffer("diag").host_ptr is not None and pipeline.readback() == {"step": 0.0, "total": 0.0}


def test_eager_launches_the_same_work_in_program_order(nodes):
    pipeline, fake = nodes
    fake.calls.clear()
    fake.launches.clear()
    pipeline.run_eager(1)
    assert [c.name for c in fake.calls] == [
        "cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel", "cuLaunchKernel",
        "cuMemcpyDtoDAsync", "cuMemsetD16Async", "cuMemsetD8Async", "cuLaunchKernel", "cuMemsetD32Async",
        "cuLaunchKernel", "cuLaunchKernel"]
    assert [k.function for k in fake.launches] == ["tick", "add_one", "saxpy", "add_one", "scaled",
                                                   "pipec_fill_8", "sum", "report"]
    graph_kernels = []
    for node in fake.executables[pipeline.graph.exec].nodes:
        if node.kind == "graph":
            graph_kernels += [n.work for n in node.child.nodes]
        elif node.kind == "kernel":
            graph_kernels.append(node.work)
    assert fake.launches == graph_kernels
    assert (pipeline.read("halves") == np.float16(2.5)).all()
    assert np.array_equal(pipeline.read("integers"), np.array([7, 7, -1, -1, -1, -1, 7, 7], np.int64))


def test_a_replay_is_one_driver_call(nodes):
    pipeline, fake = nodes
    fake.calls.clear()
    pipeline.step(5)
    assert [c.name for c in fake.calls] == ["cuGraphLaunch"] * 5
    assert {c.args for c in fake.calls} == {(pipeline.graph.exec, pipeline.stream)}


def test_state_saves_and_loads_every_buffer(nodes, tmp_path):
    pipeline, _ = nodes
    pipeline.step(1)
    pipeline.write("counter", np.array([41], np.uint32))
    expected = pipeline.snapshot()
    pipeline.save_state(tmp_path, steps=1)
    again, fake = _load(NODES)
    with again:
        assert again.load_state(tmp_path)["steps"] == "1"
        resumed = again.snapshot()
    assert all(np.array_equal(expected[k].view(np.uint8), resumed[k].view(np.uint8)) for k in expected)


def test_verify_poisons_outputs_and_names_the_writers_of_a_difference():
    pipeline, _ = _load(NODES)
    with pipeline:
        report = pipeline.verify(2)
        assert report.ok and report.steps == 2
        assert set(report.poisoned) == {"scaled_x", "copy_of_y", "halves", "bytes", "wide", "integers",
                                        "total", "diag"}
    dropped = load(NODES, backends=Backends(fake_driver(NODES), drop_nodes=frozenset({"step/fill:bytes"})))
    with dropped:
        assert [n.kind for n in dropped.driver.cu.executables[dropped.graph.exec].nodes][7] == "empty"
        report = dropped.verify(1)
    first = report.mismatches[0]
    assert (first.buffer, first.index, first.sides, first.expected) == ("bytes", (10,), ("eager", "graph"), 3)
    assert [(w.name, w.location.line) for w in first.writers] == [("step/fill:bytes", 33)]


@pytest.mark.parametrize("path", PIPES, ids=lambda p: p.stem)
def test_every_plan_node_reaches_the_driver_as_planned(path):
    """Kinds, edges, child graphs, argument bytes, memsets and copies of the built graph,
    against the plan; argument sizes come from the kernels' sources, not from the plan."""
    pipeline, fake = _load(path)
    with pipeline:
        plan = pipeline.plan
        formats = {"f32": "<f", "f64": "<d", "i32": "<i", "u32": "<I", "i64": "<q", "u64": "<Q",
                   "u8": "<B", "i8": "<b", "i16": "<h", "u16": "<H", "bool": "<?", "f16": "<e"}

        def argument(a) -> bytes:
            if a.kind == "pointer":
                return _ptr(pipeline, a.buffer, a.byte_offset)
            if a.kind == "handle":  # the conditional handle made for the handle's index
                return struct.pack("<Q", int(pipeline.graph.handles[a.value]))
            return struct.pack(formats[a.ctype], 1 if a.kind == "in_graph" else a.value)

        def compare(spec_index: int, graph) -> None:
            spec = plan.graphs[spec_index]
            assert len(graph.nodes) == len(spec.nodes)
            index = _index(graph)
            for node, built in zip(spec.nodes, graph.nodes):
                expected_deps = sorted(a for a, b in spec.edges if b == node.id)
                assert sorted(index[d] for d in built.deps) == expected_deps, node.name
                if isinstance(node, ChildGraphNodeSpec):
                    assert built.kind == "graph"
                    compare(node.graph, built.child)
                elif isinstance(node, ConditionalNodeSpec):
                    assert built.kind == "conditional" and len(built.work.bodies) == len(node.bodies)
                    for body, built_body in zip(node.bodies, built.work.bodies):
                        compare(body, built_body)
                elif isinstance(node, KernelNodeSpec):
                    assert built.kind == "kernel" and built.work.function == node.function
                    assert (built.work.grid, built.work.block, built.work.shared_bytes) == \
                        (node.grid, node.block, node.shared_bytes)
                    assert built.work.args == tuple(argument(a) for a in node.args), node.name
                elif isinstance(node, MemsetNodeSpec):
                    assert built.kind == "memset"
                    assert built.work == Memset(pipeline.buffer(node.buffer).device_ptr + node.byte_offset,
                                                node.element_size, node.value, node.count)
                elif isinstance(node, GemmNodeSpec):  # the one library call's recording, as a child graph
                    assert built.kind == "graph" and built.child.nodes
                    assert {n.kind for n in built.child.nodes} <= {"kernel", "memset"}
                else:
                    assert isinstance(node, MemcpyNodeSpec) and built.kind == "memcpy"
                    assert built.work == Memcpy(pipeline.buffer(node.dst).device_ptr + node.dst_offset,
                                                pipeline.buffer(node.src).device_ptr + node.src_offset,
                                                node.nbytes)

        compare(plan.step, fake.executables[pipeline.graph.exec])
        assert pipeline.verify(1).ok
    assert fake.live() == dict.fromkeys(fake.live(), 0)


def test_launches_over_the_device_limits_are_pc316_diagnostics():
    small = dict(max_threads_per_block=128, max_registers_per_block=16384,
                 function_attributes={"saxpy": FunctionAttributes(registers=255, max_threads=64),
                                      "scaled": FunctionAttributes(static_shared=70000)},
                 max_shared_per_block=65536)
    driver = fake_driver(NODES, **small)
    with pytest.raises(PipelineError) as caught:
        load(NODES, backends=Backends(driver))
    found = [(d.code, d.span.line, d.message.split(";")[0]) for d in caught.value.diagnostics]
    assert found == [
        ("PC316", 28, "`saxpy` uses 255 registers per thread: 128 threads need 32640, Fake H200 (sm_90) has "
                      "16384 per block (at most 64 threads of this kernel)"),
        ("PC316", 30, "`scaled` needs 70000 bytes of static and 0 of dynamic shared memory"),
        ("PC316", 34, "`pipec_fill_8` is launched with 256 threads per block"),
        ("PC316", 36, "`sum` is launched with 256 threads per block"),
    ]
    assert "error[PC316]" in caught.value.render() and "nodes.pipe:28:5" in caught.value.render()
    assert driver.cu.live() == dict.fromkeys(driver.cu.live(), 0), "a refused load leaves nothing behind"


def test_out_of_memory_names_the_buffer_and_frees_the_rest():
    driver = fake_driver(NODES, memory_bytes=6000)
    with pytest.raises(OutOfMemory, match="allocating `y` .* declared at .*nodes.pipe:9"):
        load(NODES, backends=Backends(driver))
    assert driver.cu.live() == dict.fromkeys(driver.cu.live(), 0)


def test_kernels_that_do_not_compile_for_the_device_stop_the_load_with_one_error():
    driver = fake_driver(NODES, name="Fake future GPU", capability=(1, 0))  # NVRTC knows no sm_10
    with pytest.raises(PipelineError, match="the kernels do not compile for Fake future GPU \\(sm_10"):
        load(NODES, backends=Backends(driver))
    assert driver.cu.named("cuDevicePrimaryCtxRelease")


def test_piperun_renders_load_diagnostics_as_pipec_does(capsys):
    from pipec.runtime import cli

    dirty = ROOT / "compiler" / "explanations" / "examples" / "PC302_baked_per_step_value.pipe"
    assert cli.main([str(dirty), "--steps", "1"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "PC302_baked_per_step_value.pipe:" in err and "error[PC302]" in err
    assert "try `pipec --explain PC302`" in err


def test_a_flattened_build_has_the_leaf_dag_of_the_plan(nodes):
    """The profiler's build: child graphs' nodes added to the parent, with the same ordering."""
    from pipec.runtime.graph import BuiltGraph
    from pipec.runtime.profile_analysis import leaf_dag

    pipeline, fake = nodes
    flat = BuiltGraph(pipeline.plan, pipeline.plan.step, pipeline._buffers, pipeline.modules,
                      pipeline.device, pipeline.stream, flatten=True)
    try:
        graph = fake.executables[flat.exec]
        assert "graph" not in [n.kind for n in graph.nodes]
        name = {handle: node for node, handle in flat.leaf_nodes.items()}
        edges = {(name[d], name[n.handle]) for n in graph.nodes for d in n.deps}
        dag = leaf_dag(pipeline.plan, pipeline.plan.step)
        assert set(name.values()) == set(dag.nodes) and edges == set(dag.edges)
    finally:
        flat.close()


def test_a_block_past_48_kib_of_shared_memory_in_all_opts_in():
    """The dynamic limit is raised when static and dynamic shared memory together pass 48 KiB
    (mlp_act_push: 34 KiB static, 18 KiB dynamic), not only when the dynamic part does: the
    launch failed with CUDA_ERROR_INVALID_VALUE on an H200."""
    from types import SimpleNamespace

    from pipec.runtime.modules import Modules

    driver = fake_driver(NODES, function_attributes={"mixed": FunctionAttributes(static_shared=34 * 1024)})
    modules = Modules([b"module"], SimpleNamespace(driver=driver))
    modules.function("step", 0, "mixed", 18 * 1024)
    modules.function("step", 0, "plain", 18 * 1024)
    modules.function("step", 0, "big", 60 * 1024)
    modules.function("step", 0, "mixed", 0)
    opted = [(c.args[0].name, c.args[2]) for c in driver.cu.named("cuFuncSetAttribute")]
    assert opted == [("mixed", 18 * 1024), ("big", 60 * 1024)]
