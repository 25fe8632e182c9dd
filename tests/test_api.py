"""The Python API on CPU, through the fake CUDA driver: live updates (`Pipeline.update`,
`piperun --set`), buffer views and their liveness, streams from other frameworks."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import pipec
from fake_cuda import fake_driver
from pipec import load
from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.runtime import Backends, PipelineError
from pipec.runtime.update import UpdateRefused
from pipec.runtime.views import BufferView, ClosedError

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "tests" / "fixtures" / "runtime" / "live.pipe"
NODES = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"


@pytest.fixture
def live():
    pipeline = load(LIVE, backends=Backends(fake_driver(LIVE)))
    with pipeline:
        yield pipeline, pipeline.driver.cu
    fake = pipeline.driver.cu
    assert fake.live() == dict.fromkeys(fake.live(), 0)


def _kernels(graph) -> list:
    """(function, grid, block, args) of every kernel node, child graphs included, in order."""
    out = []
    for node in graph.nodes:
        if node.kind == "graph":
            out += _kernels(node.child)
        elif node.kind == "kernel":
            out.append((node.work.function, node.work.grid, node.work.block, node.work.args))
    return out


def test_an_update_changes_scalars_and_launch_shapes_in_the_executable_graph(live):
    pipeline, fake = live
    before = _kernels(fake.executables[pipeline.graph.exec])
    assert before[1][3][2] == struct.pack("<f", 2.0) and before[0][1:3] == ((8, 1, 1), (128, 1, 1))
    exec_handle = pipeline.graph.exec
    fake.calls.clear()
    changed = pipeline.update(FACTOR=3.5, BLOCK=256)
    assert changed == ["step/scaled", "step/bump/add_one"]
    graph_calls = [c.name for c in fake.calls if "Graph" in c.name]
    assert graph_calls == ["cuGraphExecKernelNodeSetParams",  # step/scaled, then the child graph's node:
                           "cuGraphChildGraphNodeGetGraph", "cuGraphNodeFindInClone",  # its clone there
                           "cuGraphExecKernelNodeSetParams"], "no new graph"
    assert pipeline.graph.exec == exec_handle
    after = _kernels(fake.executables[pipeline.graph.exec])
    assert after[0][1:3] == ((4, 1, 1), (256, 1, 1)), "the child graph's kernel has the new launch shape"
    assert after[1][1:3] == ((4, 1, 1), (256, 1, 1)) and after[1][3][2] == struct.pack("<f", 3.5)
    assert after[1][3][:2] == before[1][3][:2], "pointers stay"
    fake.launches.clear()
    pipeline.run_eager(1)
    assert [(k.function, k.grid, k.block, k.args) for k in fake.launches] == after, "eager launches updated too"
    assert pipeline.plan.graphs[pipeline.plan.step].nodes[1].args[2].value == 3.5
    assert pipeline.verify(1).ok


def test_updates_accumulate_on_the_values_before(live):
    pipeline, fake = live
    pipeline.update(FACTOR=3.0)
    assert pipeline.update(BLOCK=64) == ["step/scaled", "step/bump/add_one"]
    args = _kernels(fake.executables[pipeline.graph.exec])[1][3]
    assert args[2] == struct.pack("<f", 3.0), "the earlier update stays"
    assert pipeline.update(BLOCK=64) == [], "nothing changes, nothing is updated"


def test_an_update_that_changes_buffers_is_refused_naming_the_first_difference(live):
    pipeline, fake = live
    fake.calls.clear()
    with pytest.raises(UpdateRefused, match=r"^N changes the buffer `x` from f32\[1000\] device = uniform"
                                             r"\(-1.0, 1.0\) to f32\[500\]"):
        pipeline.update(N=500)
    assert not fake.named("cuGraphExecKernelNodeSetParams")
    assert pipeline.plan.buffer("x").shape == (1000,), "a refused update changes nothing"


def test_an_update_that_no_longer_checks_is_a_pipeline_error(live):
    pipeline, _ = live
    with pytest.raises(PipelineError):
        pipeline.update(BLOCK=2048)  # more threads per block than any GPU has: PC3xx


@pytest.mark.parametrize("name,value,refusal", [
    ("UPDATES", 2, "UPDATES changes the buffer `b_idx` from i32[1, 256]"),
    ("LR", 5e-4, "LR changes the `init` block, which already ran"),
])
def test_rl_step_updates_and_refusals(name, value, refusal):
    with load(RL_STEP, backends=Backends(fake_driver(RL_STEP))) as pipeline:
        assert pipeline.update(GAMMA=0.95) == ["step/act/mlp_act_push"]
        # one fused node (clip + AdamW)
        assert pipeline.update(TAU=0.02, MAX_GRAD_NORM=5.0) == ["step/optimize[0]/adamw_step"]
        with pytest.raises(UpdateRefused, match=refusal.replace("[", r"\[").replace("]", r"\]")):
            pipeline.update(**{name: value})


def test_a_pipeline_built_from_a_plan_alone_updates_through_its_live_record(live):
    pipeline, fake = live
    pipeline._recompile = None  # as a bundle's: no compiler
    assert pipeline.update(FACTOR=3.0, BLOCK=64) == ["step/scaled", "step/bump/add_one"]
    assert pipeline.plan == compile_file(LIVE, override(load_settings(LIVE), defines=(
        ("FACTOR", "3.0"), ("BLOCK", "64")))).plan
    with pytest.raises(UpdateRefused, match=r"^`N` cannot change in place: it reaches a buffer's dimension at "):
        pipeline.update(N=500)


def test_piperun_set_applies_updates_between_launches(monkeypatch, capsys):
    from pipec.runtime import cli, driver

    monkeypatch.setattr(driver, "cuda_driver", lambda: fake_driver(LIVE))
    assert cli.main([str(LIVE), "--steps", "6", "--log-every", "4", "--json", "--set", "FACTOR=4.0@2",
                     "--set", "BLOCK=256@2", "--set", "FACTOR=0.5@4"]) == cli.EXIT_OK
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["event"], e["step"]) for e in events if e["event"] != "summary"] == [
        ("set", 2), ("set", 2), ("log", 4), ("set", 4), ("log", 6)]
    assert [(e["name"], e["value"], e["nodes"]) for e in events if e["event"] == "set"] == [
        ("FACTOR", "4.0", ["step/scaled"]), ("BLOCK", "256", ["step/scaled", "step/bump/add_one"]),
        ("FACTOR", "0.5", ["step/scaled"])]


def test_piperun_set_refused_is_one_line(monkeypatch, capsys):
    from pipec.runtime import cli, driver

    monkeypatch.setattr(driver, "cuda_driver", lambda: fake_driver(LIVE))
    assert cli.main([str(LIVE), "--steps", "4", "--set", "N=10@2", "--no-progress"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "N changes the buffer `x`" in err


@pytest.mark.parametrize("argument", ["FACTOR=2", "FACTOR=2@x", "=2@3", "FACTOR=2@-1"])
def test_piperun_set_needs_name_value_and_step(argument, capsys):
    from pipec.runtime import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main([str(LIVE), "--set", argument])
    assert stopped.value.code == cli.EXIT_USAGE and "NAME=VALUE@STEP" in capsys.readouterr().err


# --- views -------------------------------------------------------------------------------------

def test_buffers_are_views_with_the_cuda_array_interface(live):
    pipeline, _ = live
    view = pipeline.buffers["x"]
    assert isinstance(view, BufferView) and pipeline.buffers["x"] is view
    assert (view.shape, view.dtype, view.strides, view.nbytes) == ((1000,), np.float32, (4,), 4000)
    interface = view.__cuda_array_interface__
    assert interface == {"shape": (1000,), "typestr": "<f4", "data": (pipeline.buffer("x").device_ptr, False),
                         "version": 3, "strides": None, "stream": int(pipeline.stream)}
    assert view.__dlpack_device__() == (2, 0)
    assert np.array_equal(view.numpy(), pipeline.read("x"))
    assert set(pipeline.buffers) == {"x", "scaled_x"} and len(pipeline.buffers) == 2


def test_a_view_taken_before_close_raises_after_it(live):
    pipeline, _ = live
    view = pipeline.buffers["x"]
    pipeline.close()
    for use in (lambda: view.ptr, lambda: view.__cuda_array_interface__, lambda: view.__dlpack__(),
                view.numpy, lambda: pipeline.buffers["scaled_x"], lambda: pipeline.step(1),
                lambda: pipeline.read("x")):
        with pytest.raises(ClosedError, match="closed"):
            use()
    assert "closed" in repr(view)


# --- streams -----------------------------------------------------------------------------------

class TorchLikeStream:
    """A stream object with the `__cuda_stream__` protocol."""

    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


@pytest.mark.parametrize("stream", [TorchLikeStream(0x5000), 0x5000], ids=["protocol", "raw handle"])
@pytest.mark.parametrize("run", ["step", "run_eager"])
def test_work_is_ordered_against_a_foreign_stream_on_the_device(live, stream, run):
    pipeline, fake = live
    fake.calls.clear()
    getattr(pipeline, run)(2, stream=stream)
    names = [c.name for c in fake.calls]
    assert "cuStreamSynchronize" not in names and "cuCtxSynchronize" not in names
    waits = [(c.args[0], c.args[1]) for c in fake.named("cuStreamWaitEvent")]
    records = [c.args for c in fake.named("cuEventRecord")]
    foreign = fake.CUstream(0x5000)
    # the pipeline's stream waits for the foreign stream's work, then the foreign one for it
    assert [w[0] for w in waits] == [pipeline.stream, foreign]
    assert [r[1] for r in records] == [foreign, pipeline.stream]
    first_launch = next(i for i, n in enumerate(names) if n in ("cuGraphLaunch", "cuLaunchKernel"))
    assert names.index("cuStreamWaitEvent") < first_launch < len(names) - 1 - names[::-1].index("cuStreamWaitEvent")


def test_a_stream_must_be_a_stream(live):
    pipeline, _ = live
    with pytest.raises(TypeError, match="__cuda_stream__"):
        pipeline.step(1, stream="default")


def test_every_error_is_a_pipec_error():
    assert issubclass(UpdateRefused, pipec.Error) and issubclass(ClosedError, pipec.Error)
    assert pipec.UpdateRefused is UpdateRefused and pipec.PipelineError is PipelineError
