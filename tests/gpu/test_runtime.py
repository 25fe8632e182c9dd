"""The runtime on a real GPU: every node kind, child graphs, mapped readback, eager against
graph replay, planted faults that verification must catch, save and resume, bindings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).parent.parent / "fixtures" / "runtime"
RULES = Path(__file__).parent.parent.parent / "compiler" / "explanations" / "examples"


@pytest.fixture
def nodes():
    import pipec

    with pipec.load(FIXTURES / "nodes.pipe") as pipeline:
        yield pipeline


def _f16(value: float) -> int:
    return int(np.array([value], np.float16).view(np.uint16)[0])


def test_every_node_kind_does_its_work(nodes):
    x0, y0 = nodes.read("x"), nodes.read("y")
    rng = np.random.Generator(np.random.PCG64(3))
    assert np.array_equal(x0, rng.uniform(-1.0, 1.0, 1000).astype(np.float32)), "seeded init differs from NumPy"
    for name in ("scaled_x", "copy_of_y", "total"):  # uninit buffers start poisoned: NaN
        assert np.isnan(nodes.read(name)).all()
    nodes.step(1)
    x1 = x0 + np.float32(1) + np.float32(1)  # two instances of the child graph `bump`
    y1 = (np.float32(0.5) * (x0 + np.float32(1)) + y0).astype(np.float32)
    assert np.array_equal(nodes.read("x"), x1)
    assert np.array_equal(nodes.read("y"), y1)
    assert np.array_equal(nodes.read("scaled_x"), x1 * np.float32(2.0))
    assert np.array_equal(nodes.read("copy_of_y"), y1)
    assert (nodes.read("halves") == np.float16(2.5)).all()
    expected_bytes = np.zeros(100, np.uint8)
    expected_bytes[10:90] = 3
    assert np.array_equal(nodes.read("bytes"), expected_bytes)
    assert (nodes.read("wide") == 1.25).all()
    assert np.array_equal(nodes.read("integers"), np.array([7, 7, -1, -1, -1, -1, 7, 7], np.int64))
    assert nodes.read("counter")[0] == 1
    np.testing.assert_allclose(nodes.read("total")[0], y1.sum(dtype=np.float64), rtol=1e-5)


def test_mapped_readback_is_written_by_the_device(nodes):
    nodes.step(7)
    nodes.synchronize()
    readback = nodes.readback()
    assert readback["step"] == 7.0
    assert readback["total"] == nodes.read("total")[0]


def test_each_child_graph_has_its_own_module_instance(nodes):
    scopes = {g.scope for g in nodes.plan.graph_tree(nodes.plan.step)}
    assert scopes == {"step", "step/bump", "step/bump#2"}
    # every graph scope loads its own instances, and eager launches yet another
    assert nodes.modules.scopes == scopes | {"eager"}
    bump = [nodes.modules.function(s, 0, "add_one") for s in ("step/bump", "step/bump#2", "eager")]
    assert len({int(f) for f in bump}) == 3, "a CUfunction is shared"


def test_graph_and_eager_agree_bit_for_bit(nodes):
    report = nodes.verify(5)
    assert report.ok, [m.describe() for m in report.mismatches]
    assert set(report.poisoned) >= {"scaled_x", "copy_of_y", "total", "diag"}


def test_verify_leaves_the_state_unchanged(nodes):
    nodes.step(2)
    before = nodes.snapshot()
    nodes.verify(3)
    after = nodes.snapshot()
    assert all(np.array_equal(before[k].view(np.uint8), after[k].view(np.uint8)) for k in before)


def test_a_node_dropped_from_the_graph_is_reported():
    import pipec
    from pipec.runtime import Backends

    with pipec.load(FIXTURES / "nodes.pipe", backends=Backends(drop_nodes=frozenset({"step/scaled"}))) as pipeline:
        report = pipeline.verify(1)
    assert not report.ok
    first = report.mismatches[0]
    assert first.buffer == "scaled_x" and first.sides == ("eager", "graph")
    assert np.isnan(first.found), "the graph side must still hold the poison"
    assert [w.name for w in first.writers] == ["step/scaled"]
    assert first.writers[0].location.line == 30


def test_a_baked_scalar_is_reported(nodes):
    call = nodes.driver.call
    # Freeze the `factor` argument of one node of the instantiated graph at another value, as
    # stream capture would have frozen a per-step value: only verification can notice.
    handle = nodes.graph.root_nodes["step/scaled"]
    params = call("cuGraphKernelNodeGetParams", handle)
    storage = list(nodes.graph.arguments["step/scaled"].storage)
    storage[2] = np.array([3.0], np.float32)
    pointers = np.array([s.ctypes.data for s in storage], dtype=np.uint64)
    params.kernelParams = int(pointers.ctypes.data)
    call("cuGraphExecKernelNodeSetParams", nodes.graph.exec, handle, params)
    report = nodes.verify(1)
    assert [m.buffer for m in report.mismatches if m.sides == ("eager", "graph")] == ["scaled_x"]


def test_copies_lowered_to_the_copy_kernel():
    import pipec

    with pipec.load(FIXTURES / "copies.pipe") as pipeline:
        functions = {n.function for n in pipeline.plan.leaves(pipeline.plan.step) if hasattr(n, "function")}
        assert {"pipec_copy_4", "pipec_copy_16"} & functions
        pipeline.step(1)
        x = pipeline.read("x")
        assert np.array_equal(pipeline.read("y"), x)
        assert np.array_equal(pipeline.read("z")[:1000], x[1:])
        assert np.array_equal(pipeline.read("tail"), x[3:11])
        assert pipeline.verify(2).ok


def test_save_and_resume_match_an_uninterrupted_run(tmp_path):
    import pipec

    with pipec.load(FIXTURES / "nodes.pipe") as straight:
        straight.step(10)
        expected = straight.snapshot()
    with pipec.load(FIXTURES / "nodes.pipe") as first:
        first.step(4)
        first.save_state(tmp_path, steps=4)
    with pipec.load(FIXTURES / "nodes.pipe") as second:
        metadata = second.load_state(tmp_path)
        assert metadata["steps"] == "4"
        second.step(6)
        resumed = second.snapshot()
    for name in expected:
        assert np.array_equal(expected[name].view(np.uint8), resumed[name].view(np.uint8)), name


def test_buffers_are_cupy_arrays_over_the_same_memory(nodes):
    cupy = pytest.importorskip("cupy")
    nodes.step(1)
    nodes.synchronize()
    x = nodes.buffers["x"].cupy()
    assert x.data.ptr == nodes.buffer("x").device_ptr
    assert np.array_equal(cupy.asnumpy(x), nodes.read("x"))
    x += 1  # on CuPy's stream; the pipeline sees it after a device synchronize
    cupy.cuda.Device().synchronize()
    assert np.array_equal(nodes.read("x"), cupy.asnumpy(x))


def test_an_existing_cupy_array_can_be_bound():
    cupy = pytest.importorskip("cupy")
    import pipec

    y = cupy.arange(1000, dtype=cupy.float32)
    with pipec.load(FIXTURES / "nodes.pipe", bind={"y": y}) as pipeline:
        assert pipeline.buffer("y").device_ptr == y.data.ptr
        x0 = pipeline.read("x")
        pipeline.step(1)
        pipeline.synchronize()
        expected = np.float32(0.5) * (x0 + np.float32(1)) + np.arange(1000, dtype=np.float32)
        assert np.array_equal(cupy.asnumpy(y), expected)


def test_binding_checks_type_and_size():
    cupy = pytest.importorskip("cupy")
    import pipec
    from pipec.runtime.memory import BindError

    with pytest.raises(BindError, match="holds float64"):
        pipec.load(FIXTURES / "nodes.pipe", bind={"y": cupy.zeros(1000, cupy.float64)})
    with pytest.raises(BindError, match="elements"):
        pipec.load(FIXTURES / "nodes.pipe", bind={"y": cupy.zeros(999, cupy.float32)})


def test_a_kernel_reads_through_a_table_of_the_buffers_addresses_even_bound_or_restored(tmp_path):
    cupy = pytest.importorskip("cupy")
    import pipec

    n = 256
    with pipec.load(FIXTURES / "tables.pipe") as pipeline:
        a, b = pipeline.read("a"), pipeline.read("b")
        assert pipeline.read("tensors").tolist() == [pipeline.buffer("a").device_ptr,
                                                     pipeline.buffer("b").device_ptr + n * 4]
        pipeline.step(1)
        assert np.array_equal(pipeline.read("sums"), a + b[n:])
        assert pipeline.verify(2).ok
        pipeline.save_state(tmp_path, steps=1)
        pipeline.write("a", np.ones(n, np.float32))
        pipeline.load_state(tmp_path)  # its table keeps this pipeline's addresses
        pipeline.step(1)
        assert np.array_equal(pipeline.read("sums"), a + b[n:])
    bound = cupy.full(2 * n, 2.0, dtype=cupy.float32)
    with pipec.load(FIXTURES / "tables.pipe", bind={"b": bound}) as pipeline:
        assert pipeline.read("tensors")[1] == bound.data.ptr + n * 4
        pipeline.step(1)
        assert np.array_equal(pipeline.read("sums"), pipeline.read("a") + np.float32(2.0))


def test_a_multi_tensor_norm_waits_for_the_scale_of_every_tensor_its_table_names():
    import pipec

    with pipec.load(RULES / "PC324_read_through_unknown_pointer_ok.pipe") as pipeline:
        w1, w2 = pipeline.read("w1"), pipeline.read("w2")
        pipeline.step(1)
        expected = [np.sum((w1[:64] * np.float32(0.5)) ** 2), np.sum((w2[:64] * np.float32(0.5)) ** 2)]
        assert np.allclose(pipeline.read("norms"), expected, rtol=1e-5)
        assert pipeline.verify(2).ok


def test_launch_limits_come_from_the_device_and_the_compiled_kernel():
    import dataclasses

    import pipec
    from pipec.runtime.modules import Modules
    from pipec.runtime.resources import check_launch_resources

    # 96 KiB of dynamic shared memory per block: within an H200's limit, over a T4's.
    with pipec.load(RULES / "PC316_launch_over_device_limit.pipe") as pipeline:
        device = pipeline.device
        assert device.max_threads_per_block == 1024 and device.max_shared_per_block >= 96 * 1024
        assert device.max_registers_per_block >= 64 * 1024
        t4_shared = dataclasses.replace(device, max_shared_per_block=64 * 1024)
        smaller = Modules(pipeline.modules.binaries, t4_shared)
        try:
            findings = check_launch_resources(pipeline.plan, smaller)
        finally:
            smaller.close()
    assert [f.location.line for f in findings] == [13]
    assert "98304 of dynamic shared memory" in findings[0].message


def _piperun(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipec.runtime.cli", *args],
                          capture_output=True, text=True, timeout=300)


def test_piperun_json_progress_and_summary():
    result = _piperun(str(FIXTURES / "nodes.pipe"), "--steps", "30", "--log-every", "10", "--json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [p["step"] for p in lines if p["event"] == "log"] == [10, 20, 30]
    assert [p["readback"]["step"] for p in lines if p["event"] == "log"] == [10.0, 20.0, 30.0]
    summary = lines[-1]
    assert summary["event"] == "summary" and summary["steps"] == 30 and summary["steps_per_s"] > 0


def test_piperun_verify():
    verify = _piperun(str(FIXTURES / "nodes.pipe"), "--verify", "3")
    assert verify.returncode == 0 and "agree bit for bit" in verify.stdout, verify.stdout + verify.stderr


def test_piperun_runs_and_verifies_collectives_on_one_rank_without_a_launcher(tmp_path):
    """Without a launcher a plan with collectives runs on a communicator of one rank, where NCCL
    copies instead of communicating: the recordings of its out-of-place calls hold device-to-device
    copies (runtime/library.py admits them), and graph and eager agree bit for bit."""
    from pipec.runtime.state import _read

    run = _piperun(str(FIXTURES / "collectives.pipe"), "--steps", "5", "--no-progress", "--save-state",
                   str(tmp_path / "state"))
    assert run.returncode == 0, run.stdout + run.stderr
    _, tensors = _read(tmp_path / "state" / "state.safetensors")
    assert all((tensors[name] == 1).all() for name in ("x", "mean", "top", "gathered", "piece", "group_sum"))
    verify = _piperun(str(FIXTURES / "collectives.pipe"), "--verify", "3")
    assert verify.returncode == 0 and "agree bit for bit" in verify.stdout, verify.stdout + verify.stderr


def test_a_faulting_kernel_is_pinned_on_its_node():
    result = _piperun(str(FIXTURES / "fault.pipe"), "--eager", "--sync-each", "--steps", "1")
    assert result.returncode == 1
    assert "step/write_out_of_bounds" in result.stderr and "fault.pipe:8" in result.stderr
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in result.stderr
