"""GEMM nodes on the fake driver and the fake cuBLASLt (tests/fake_cublaslt.py): the row-major
plan mapped to cuBLASLt's column-major call field by field, the numbers that mapping computes,
the recording added as a child graph node, refused recordings, the algorithm chosen once and
kept, and live updates refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fake_cuda import FakeCuda
from fake_cublaslt import Epilogue, FakeCublasLt
from gemm_plans import WORKSPACE_BYTES, buffer, gemm, gemm_plan, matrix
from pipec.plan.schema import from_json, to_json
from pipec.runtime.driver import Driver, open_device
from pipec.runtime.cublaslt import GemmError, GemmSettings
from pipec.runtime.library import LibraryRecordingError
from pipec.runtime.pipeline import Pipeline
from pipec.runtime.update import UpdateRefused

F32, F16, BF16 = 0, 2, 14  # cudaDataType
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77


def pipeline(plan, cuda=None, recompile=None, **library_options) -> tuple[Pipeline, FakeCuda, FakeCublasLt]:
    cuda = cuda or FakeCuda(param_sizes={})
    settings = {k: library_options.pop(k) for k in ("cache", "tune") if k in library_options}
    library = FakeCublasLt(cuda, **library_options)
    built = Pipeline(plan, [], open_device(0, Driver(cuda)), recompile=recompile,
                     gemm=GemmSettings(library, **settings))
    return built, cuda, library


def dense(trans_a=False, trans_b=True, epilogue="relu_bias", **options):
    """y = relu(x @ w^T + b) (the layout of a linear layer), 8 x 32 from 16."""
    x = matrix("x", 16, 8) if trans_a else matrix("x", 8, 16)
    w = matrix("w", 32, 16) if trans_b else matrix("w", 16, 32)
    node = gemm(0, "gemm:y", a=x, b=w, c=matrix("y", 8, 32), trans_a=trans_a, trans_b=trans_b, epilogue=epilogue,
                bias=matrix("b", 1, 32) if "bias" in epilogue else None, **options)
    buffers = [buffer("x", "f32", (x.rows, x.cols)), buffer("w", "f32", (w.rows, w.cols)), buffer("b", "f32", (32,)),
               buffer("y", "f32", (8, 32), first="write")]
    return gemm_plan(buffers, [node])


def test_the_plan_json_round_trip_keeps_gemm_nodes():
    plan = dense()
    assert from_json(to_json(plan)) == plan


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_row_major_maps_to_column_major_field_by_field(trans_a, trans_b):
    p, cuda, lt = pipeline(dense(trans_a, trans_b))
    with p:
        call = lt.matmuls[0]
        a_layout, b_layout, c_layout, d_layout = call.layouts
        x, w = (16, 8) if trans_a else (8, 16), (32, 16) if trans_b else (16, 32)
        # cuBLASLt's A is the program's b (w), its B the program's a (x): rows and cols swap
        assert a_layout == {"TYPE": F32, "ROWS": w[1], "COLS": w[0], "LD": w[1]}
        assert b_layout == {"TYPE": F32, "ROWS": x[1], "COLS": x[0], "LD": x[1]}
        assert c_layout == d_layout == {"TYPE": F32, "ROWS": 32, "COLS": 8, "LD": 32}
        assert call.desc == {"COMPUTE_TYPE": COMPUTE_32F, "SCALE_TYPE": F32, "TRANSA": int(trans_b),
                             "TRANSB": int(trans_a), "EPILOGUE": Epilogue.RELU_BIAS,
                             "BIAS_POINTER": p.buffer("b").device_ptr, "BIAS_DATA_TYPE": F32, "BIAS_BATCH_STRIDE": 0}
        assert call.pointers == (p.buffer("w").device_ptr, p.buffer("x").device_ptr, p.buffer("y").device_ptr,
                                 p.buffer("y").device_ptr)
        assert (call.workspace, call.workspace_bytes) == (p.buffer("gemm:y.workspace").device_ptr, WORKSPACE_BYTES)
        assert (call.alpha, call.beta) == (1.0, 0.0)


@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_the_mapping_computes_the_row_major_product(trans_a, trans_b):
    p, cuda, lt = pipeline(dense(trans_a, trans_b))
    with p:
        x, w, b = (p.read(n).astype(np.float64) for n in ("x", "w", "b"))
        expected = np.maximum((x.T if trans_a else x) @ (w.T if trans_b else w) + b, 0)
        p.step()
        np.testing.assert_allclose(p.read("y"), expected, rtol=1e-5, atol=1e-6)
        p.write("y", np.zeros((8, 32), np.float32))
        p.run_eager()
        np.testing.assert_allclose(p.read("y"), expected, rtol=1e-5, atol=1e-6)
        assert p.verify(2).ok


def test_a_strided_batch_sets_batch_count_and_strides_on_every_layout():
    batch = 3
    node = gemm(0, "gemm:c", batch=batch, alpha=0.5, beta=2.0, a=matrix("a", 4, 8, batch_stride=32),
                b=matrix("b", 8, 12), c=matrix("c", 4, 12, ld=16, batch_stride=64))
    plan = gemm_plan([buffer("a", "f32", (batch, 4, 8)), buffer("b", "f32", (8, 12)), buffer("c", "f32", (batch, 4, 16))],
                     [node])
    p, cuda, lt = pipeline(plan)
    with p:
        a_layout, b_layout, c_layout, _ = lt.matmuls[0].layouts
        assert (a_layout["BATCH_COUNT"], a_layout["STRIDED_BATCH_OFFSET"]) == (batch, 0)  # b: one matrix
        assert (b_layout["BATCH_COUNT"], b_layout["STRIDED_BATCH_OFFSET"]) == (batch, 32)
        assert (c_layout["LD"], c_layout["BATCH_COUNT"], c_layout["STRIDED_BATCH_OFFSET"]) == (16, batch, 64)
        assert (lt.matmuls[0].alpha, lt.matmuls[0].beta) == (0.5, 2.0)
        a, b, c = (p.read(n).astype(np.float64) for n in ("a", "b", "c"))
        p.step()
        expected = c.copy()
        expected[:, :, :12] = 0.5 * a @ b + 2.0 * c[:, :, :12]
        np.testing.assert_allclose(p.read("c"), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("epilogue, aux, bias_grad, expected", [
    ("relu", True, False, "RELU_AUX"), ("gelu", True, False, "GELU_AUX"), ("gelu_bias", False, False, "GELU_BIAS"),
    ("relu_bias", True, False, "RELU_AUX_BIAS"), ("gelu_bias", True, False, "GELU_AUX_BIAS"),
    ("drelu", True, False, "DRELU"), ("drelu", True, True, "DRELU_BGRAD"), ("dgelu", True, False, "DGELU"),
    ("dgelu", True, True, "DGELU_BGRAD"), ("bgrad_a", False, True, "BGRADB")])
def test_epilogues_and_their_pointers(epilogue, aux, bias_grad, expected):
    relu = "relu" in epilogue
    aux_spec = matrix("aux", 8, 128, "u8" if relu else "f16", ld=128, batch_stride=0) if aux else None
    vector = matrix("grad", 1, 8 if epilogue == "bgrad_a" else 128, "f16") if bias_grad else None
    node = gemm(0, "gemm:y", a=matrix("x", 8, 16, "f16"), b=matrix("w", 128, 16, "f16"), c=matrix("y", 8, 128, "f16"),
                trans_b=True, epilogue=epilogue, aux=aux_spec, bias_grad=vector,
                bias=matrix("b", 1, 128, "f16") if epilogue.endswith("_bias") else None)
    buffers = [buffer("x", "f16", (8, 16)), buffer("w", "f16", (128, 16)), buffer("y", "f16", (8, 128)),
               buffer("b", "f16", (128,)), buffer("aux", "u8" if relu else "f16", (8, 16) if relu else (8, 128)),
               buffer("grad", "f16", (128,))]
    p, cuda, lt = pipeline(gemm_plan(buffers, [node]))
    with p:
        desc = lt.matmuls[0].desc
        assert desc["EPILOGUE"] == Epilogue[expected]
        assert desc["COMPUTE_TYPE"] == COMPUTE_32F and lt.matmuls[0].layouts[0]["TYPE"] == F16
        if aux:
            assert (desc["EPILOGUE_AUX_POINTER"], desc["EPILOGUE_AUX_LD"], desc["EPILOGUE_AUX_BATCH_STRIDE"]) == (
                p.buffer("aux").device_ptr, 128, 0)
        else:
            assert "EPILOGUE_AUX_POINTER" not in desc
        vector_buffer = "grad" if bias_grad else "b" if epilogue.endswith("_bias") else None
        if vector_buffer:
            assert (desc["BIAS_POINTER"], desc["BIAS_DATA_TYPE"]) == (p.buffer(vector_buffer).device_ptr, F16)
        else:
            assert "BIAS_POINTER" not in desc


def test_tf32_compute_and_bf16_into_f32():
    nodes = [gemm(0, "gemm:c", a=matrix("a", 8, 8), b=matrix("b", 8, 8), c=matrix("c", 8, 8), compute="tf32"),
             gemm(1, "gemm:d", a=matrix("e", 8, 8, "bf16"), b=matrix("f", 8, 8, "bf16"), c=matrix("d", 8, 8))]
    plan = gemm_plan([buffer(n, "f32", (8, 8)) for n in "abcd"] + [buffer(n, "bf16", (8, 8)) for n in "ef"], nodes,
                     edges=())
    p, cuda, lt = pipeline(plan)
    with p:
        tf32, mixed = lt.matmuls[0], lt.matmuls[1]
        assert tf32.desc["COMPUTE_TYPE"] == COMPUTE_32F_FAST_TF32
        assert mixed.desc["COMPUTE_TYPE"] == COMPUTE_32F and mixed.desc["SCALE_TYPE"] == F32
        assert [layout["TYPE"] for layout in mixed.layouts] == [BF16, BF16, F32, F32]


def test_the_recording_is_a_child_graph_of_one_kernel_and_eager_uses_its_algorithm():
    p, cuda, lt = pipeline(dense())
    with p:
        [node] = cuda.executables[p.graph.exec].nodes
        assert node.kind == "graph" and [n.kind for n in node.child.nodes] == ["kernel"]
        assert [c.args[1] for c in cuda.named("cuStreamBeginCapture")] == [
            cuda.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL]
        p.run_eager()
        algorithms = {call.algorithm for call in lt.matmuls}
        assert len(algorithms) == 1 and lt.heuristic_calls == 1
    assert cuda.live() == {"allocations": 0, "graphs": 0, "executables": 0, "modules": 0, "streams": 0}
    assert lt.live() == {"handles": 0, "descs": 0, "layouts": 0, "preferences": 0}


@pytest.mark.parametrize("kinds, found", [(("kernel", "memcpy"), "memcpy"), (("host",), "host")])
def test_a_recording_with_other_nodes_is_refused_naming_them(kinds, found):
    cuda = FakeCuda(param_sizes={})
    with pytest.raises(LibraryRecordingError, match=rf"^gemm `gemm:y` \(gemm.pipe:1:5\): the library call recorded "
                                                    rf"1 node of another kind \({found}\)"):
        pipeline(dense(), cuda, recorded_kinds=kinds)
    assert cuda.live() == {"allocations": 0, "graphs": 0, "executables": 0, "modules": 0, "streams": 0}


def test_a_descriptor_the_library_cannot_serve_is_one_line_naming_the_node():
    cuda = FakeCuda(param_sizes={})
    with pytest.raises(GemmError) as error:
        pipeline(dense(), cuda, unsupported=True)
    assert str(error.value) == ("gemm `gemm:y` (gemm.pipe:1:5): cuBLASLt cannot serve this GEMM (m=8 n=32 k=16 "
                                "batch=1, f32 x f32 -> f32, compute f32, epilogue RELU_BIAS, workspace 4194304 "
                                "bytes): CUBLAS_STATUS_NOT_SUPPORTED")
    assert cuda.live()["allocations"] == 0


def test_chosen_algorithms_are_kept_per_descriptor_gpu_and_version(tmp_path):
    first, _, lt = pipeline(dense(), cache=tmp_path)
    with first:
        chosen = first.gemms.algorithms
    [kept] = tmp_path.glob("*.json")
    assert lt.heuristic_calls == 1 and chosen["gemm:y"] == bytes([1, 0, 0, 0, 0, 0, 0, 0] * 8).hex()
    again, _, lt = pipeline(dense(), cache=tmp_path)
    with again:
        assert again.gemms.algorithms == chosen and lt.heuristic_calls == 0
    newer, _, lt = pipeline(dense(), cache=tmp_path, version=130200)
    with newer:
        assert lt.heuristic_calls == 1  # another cuBLASLt: chosen again, kept beside the first
    assert len(list(tmp_path.glob("*.json"))) == 2
    kept.write_text(kept.read_text().replace(chosen["gemm:y"], "09" * 64))  # an algorithm no longer offered
    checked, _, lt = pipeline(dense(), cache=tmp_path)
    with checked:
        assert checked.gemms.algorithms == chosen and lt.heuristic_calls == 1


def test_tuning_keeps_the_fastest_candidate_and_restores_the_outputs(tmp_path):
    cuda = FakeCuda(param_sizes={})
    times = iter([3.0, 1.0, 2.0])  # milliseconds of candidates 1, 2 and 3
    cuda.cuEventElapsedTime = lambda start, end: (cuda.CUresult.CUDA_SUCCESS, next(times))
    p, _, lt = pipeline(dense(), cuda, cache=tmp_path, tune=True)
    with p:
        tuned = p.gemms.algorithms
        assert tuned["gemm:y"] == bytes([2, 0, 0, 0, 0, 0, 0, 0] * 8).hex()
        assert len(lt.matmuls) == 3 * 12 + 2  # warm-up and timed calls, the first call, the recording
        rng = np.random.Generator(np.random.PCG64(7))
        assert np.array_equal(p.read("y"), rng.uniform(-1.0, 1.0, (8, 32)).astype(np.float32)), "y was not restored"
    heuristic, _, lt = pipeline(dense(), cache=tmp_path)
    with heuristic:  # a tuned algorithm serves a later run without tuning too
        assert heuristic.gemms.algorithms == tuned and lt.heuristic_calls == 0


def test_a_constant_that_reaches_a_gemm_is_refused_as_a_live_update():
    plan = dense()
    scaled = dataclasses.replace(plan, graphs=(dataclasses.replace(
        plan.graphs[0], nodes=(dataclasses.replace(plan.graphs[0].nodes[0], alpha=2.0),)),))
    p, _, _ = pipeline(plan, recompile=lambda values: scaled)
    with p, pytest.raises(UpdateRefused, match=r"^SCALE changes `alpha` of the gemm node `gemm:y` \(gemm.pipe:1:5\) "
                                               r"from 1.0 to 2.0: a GEMM's recorded call cannot change in place"):
        p.update(SCALE=2.0)


def test_gemm_nodes_in_child_graphs_record_into_each_and_run_eagerly():
    nodes = [gemm(i, f"gemm:y{i}", a=matrix("x", 8, 16), b=matrix("w", 32, 16), c=matrix(f"y{i}", 8, 32), trans_b=True,
                  line=i + 1) for i in range(2)]
    buffers = [buffer("x", "f32", (8, 16)), buffer("w", "f32", (32, 16))]
    buffers += [buffer(f"y{i}", "f32", (8, 32), first="write") for i in range(2)]
    p, cuda, lt = pipeline(gemm_plan(buffers, nodes, children=True))
    with p:
        holders = cuda.executables[p.graph.exec].nodes
        assert [n.kind for n in holders] == ["graph", "graph"]
        assert [[m.kind for m in n.child.nodes] for n in holders] == [["graph"], ["graph"]]  # child > recording
        assert p.graph.library_kernels == {"gemm:y0": ("cublasLt_fake_gemm",), "gemm:y1": ("cublasLt_fake_gemm",)}
        x, w = p.read("x").astype(np.float64), p.read("w").astype(np.float64)
        p.step()
        for i in range(2):
            np.testing.assert_allclose(p.read(f"y{i}"), x @ w.T, rtol=1e-5, atol=1e-6)
        assert p.verify(1).ok


def test_the_sharing_benchmark_runs_on_the_fakes():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import gemm_sharing

    plan = gemm_sharing.sharing_plan(graphs=3, size=128, distinct=True)
    cuda = FakeCuda(param_sizes={})
    library = FakeCublasLt(cuda)
    result = gemm_sharing.measure(plan, 2, True, Driver(cuda), library)
    # the fake's events last 1 us: 2 replays, 0.5 us each; its every GEMM is one kernel
    assert result == {"replay_us": 0.5, "eager_us": 1.0, "kernels": 1, "gemms": 3, "algorithms": 1}
    assert {call.desc["EPILOGUE"] for call in library.matmuls} == {Epilogue.DEFAULT, Epilogue.RELU, Epilogue.GELU}


def test_the_profile_copies_recordings_into_its_graph_and_spans_each_gemm():
    from pipec.runtime import profile_collect
    from test_profile_collect import FakeCupti

    nodes = [gemm(i, f"gemm:y{i}", a=matrix("x", 8, 16), b=matrix("w", 32, 16), c=matrix(f"y{i}", 8, 32), trans_b=True,
                  line=i + 1) for i in range(2)]
    buffers = [buffer("x", "f32", (8, 16)), buffer("w", "f32", (32, 16))]
    buffers += [buffer(f"y{i}", "f32", (8, 32), first="write") for i in range(2)]
    p, cuda, lt = pipeline(gemm_plan(buffers, nodes, children=True), recorded_kinds=("memset", "kernel"))
    with p:
        flat = []

        def build():
            from pipec.runtime.graph import BuiltGraph

            flat.append(BuiltGraph(p.plan, p.plan.step, p._buffers, p.modules, p.device, p.stream, flatten=True,
                                   gemms=p.gemms))
            return flat[-1]

        report = profile_collect.profile(p, build, replays=3, cupti=FakeCupti(cuda))
        # the recordings' memset and kernel, copied into the profiled graph itself, in a chain
        assert {name: len(copies) for name, copies in flat[0].library_nodes.items()} == {"gemm:y0": 2, "gemm:y1": 2}
        assert report.critical_path == ["gemm:y0", "gemm:y1"]
        # each GEMM: its memset (0.3 us), the gap before its kernel (0.7 us), its kernel (1 us)
        assert [n.microseconds for n in report.nodes] == pytest.approx([2.0, 2.0])
        assert report.latency_us == pytest.approx(0.7)


def test_load_turns_a_gemm_that_cannot_run_into_one_pipeline_error(monkeypatch):
    import sys
    from pathlib import Path

    from fake_cuda import fake_driver
    from pipec import load
    from pipec.runtime import Backends, PipelineError

    nodes = Path(__file__).parent / "fixtures" / "runtime" / "nodes.pipe"
    seen = {}

    def refusing(plan, binaries, device, **options):
        seen.update(options)
        raise GemmError("gemm `gemm:y` (nodes.pipe:3:5): cuBLASLt cannot serve this GEMM")

    monkeypatch.setattr(sys.modules["pipec.runtime.load"], "Pipeline", refusing)
    with pytest.raises(PipelineError) as error:
        load(nodes, backends=Backends(fake_driver(nodes)), tune_gemms=True)
    assert error.value.render() == f"{nodes}: gemm `gemm:y` (nodes.pipe:3:5): cuBLASLt cannot serve this GEMM\n"
    assert seen["gemm"].tune and seen["gemm"].library is None


def test_piperun_tune_gemms_reaches_the_load(monkeypatch, capsys, tmp_path):
    import sys

    from pipec.runtime import PipelineError, cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "any.pipe").write_text("# read by piperun's preflight only: the load is stubbed\n")
    seen = {}

    def stop(path, options):
        seen["options"] = options
        raise PipelineError([], "stopped")

    monkeypatch.setattr(sys.modules["pipec.runtime.load"], "load", stop)
    assert cli.main(["any.pipe", "--tune-gemms"]) == cli.EXIT_USAGE
    assert seen["options"].tune_gemms is True and capsys.readouterr().err == "stopped\n"


def test_piperun_reports_a_gemm_that_fails_eagerly_in_one_line(monkeypatch, capsys, tmp_path):
    import sys

    from pipec.runtime import cli

    monkeypatch.chdir(tmp_path)
    (tmp_path / "gemm.pipe").write_text("# read by piperun's preflight only: the load is stubbed\n")
    built, _, library = pipeline(dense())
    library.failing = True
    monkeypatch.setattr(sys.modules["pipec.runtime.load"], "load", lambda path, options: built)
    assert cli.main(["gemm.pipe", "--eager", "--steps", "1", "--no-progress"]) == cli.EXIT_FAILED
    assert capsys.readouterr().err.splitlines()[-1] == (
        "piperun: error: gemm `gemm:y` (gemm.pipe:1:5): matmul failed: CUBLAS_STATUS_EXECUTION_FAILED")


def test_nodes_with_one_descriptor_are_tuned_once_and_run_one_algorithm():
    cuda = FakeCuda(param_sizes={})
    times = iter([3.0, 1.0, 2.0])  # a second tuning would run out of times
    cuda.cuEventElapsedTime = lambda start, end: (cuda.CUresult.CUDA_SUCCESS, next(times))
    nodes = [gemm(i, f"gemm:y{i}", a=matrix("x", 8, 16), b=matrix("w", 32, 16), c=matrix(f"y{i}", 8, 32), trans_b=True,
                  line=i + 1) for i in range(2)]
    buffers = [buffer("x", "f32", (8, 16)), buffer("w", "f32", (32, 16))]
    buffers += [buffer(f"y{i}", "f32", (8, 32), first="write") for i in range(2)]
    p, _, lt = pipeline(gemm_plan(buffers, nodes), cuda, tune=True)
    with p:
        assert set(p.gemms.algorithms.values()) == {bytes([2, 0, 0, 0, 0, 0, 0, 0] * 8).hex()}
        assert lt.heuristic_calls == 1


def test_without_nvmath_a_gemm_node_names_the_gemm_extra(monkeypatch):
    """The README's main job installs no cuBLAS; a plan with a GEMM node then says which extra
    brings it, in one line."""
    import builtins

    from pipec.runtime import cublaslt

    real_import = builtins.__import__

    def without_nvmath(name, *args, **kwargs):
        if name.startswith("nvmath"):
            raise ImportError("No module named 'nvmath'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_nvmath)
    with pytest.raises(cublaslt.GemmError) as error:
        cublaslt.cublaslt()
    assert str(error.value) == ("GEMM nodes need nvmath-python and cuBLAS (No module named 'nvmath'); "
                                "install `pipec[gemm12]` or `pipec[gemm13]`")
