"""The C runtime (native/) against the Python runtime, on CPU: for every pipeline in pipelines/
(and fixtures with conditional nodes), one bundle, opened by the C runtime through the fake
driver library native/tests/fake_cuda.c and by the Python runtime through tests/fake_cuda.py.
Both must hand their driver the same graph (nodes, work, argument bytes, memsets, copies, child
graphs, edges and which are programmatic, conditional nodes and handles), run the same kernels in
the same order (each launched with programmatic stream serialization or not), make the same
cuBLASLt calls and, for plans with collective nodes, the same NCCL calls (native/tests/fake_nccl.c
against tests/fake_nccl.py), leave the same bytes in every buffer and free everything. CMake and a C
compiler are needed (they exist here and in CI); ctest (.ci/run) runs the unit tests."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fake_cublaslt import FakeCublasLt
from fake_cuda import fake_driver, param_sizes
from fake_nccl import CapturingCuda, FakeCommunicator, FakeLibrary
from native_harness import (
    Normal, build_native, describe_native, describe_python, fake_environment, native_collectives, native_launches,
    native_matmuls, native_tools_missing, python_collectives, python_launches, python_matmuls, run_native,
)
from pipec.compiler import compile_file, load_settings
from pipec.compiler.bundle import write_bundle
from pipec.compiler.config import override
from pipec.compiler.emit import plan_json
from pipec import load
from pipec.plan.bundle_format import BundleError
from pipec.plan.gemm_algorithms import GemmAlgorithms, check_for_plan, file_text, read_file
from pipec.plan.schema import GemmNodeSpec
from pipec.runtime import Backends, PipelineError
from pipec.runtime.bundle import load_bundle
from pipec.runtime.cli import _short
from pipec.runtime.distributed import LocalChannel, connect
from pipec.runtime.process_launchers import Launch

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "runtime"
PIPES = [*sorted((ROOT / "pipelines").glob("*.pipe")), *sorted((ROOT / "pipelines" / "examples").glob("*.pipe")),
         *(FIXTURES / name for name in ("nodes.pipe", "copies.pipe", "conditionals.pipe", "device_loops.pipe",
                                        "bf16.pipe"))]
STEPS, EAGER = 2, 1

pytestmark = pytest.mark.skipif(native_tools_missing() is not None, reason=native_tools_missing() or "")


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    return build_native(tmp_path_factory.mktemp("native-build"))


def _bundle(path: Path, folder: Path, defines: dict | None = None, archs: tuple[str, ...] = ("sm_90",),
            gemm_algorithms: tuple[GemmAlgorithms, ...] = ()):
    settings = load_settings(path)
    if defines:
        settings = override(settings, defines=tuple((k, str(v)) for k, v in defines.items()))
    compilation = compile_file(path, settings)
    assert compilation.plan is not None, [d.message for d in compilation.diagnostics]
    for algorithms in gemm_algorithms:
        check_for_plan(algorithms, compilation.plan, "test")
    write_bundle(compilation.plan, archs, folder, str(path), gemm_algorithms)
    return compilation


def _hashes(pipeline) -> dict[str, str]:
    return {name: hashlib.sha256(array.tobytes()).hexdigest() for name, array in pipeline.snapshot().items()}


def _python_side(path: Path, **device):
    driver = fake_driver(path, **device)
    library = FakeCublasLt(driver.cu)
    pipeline = load(path, backends=Backends(driver, library))
    return pipeline, driver.cu, library


def _normal_python(pipeline, fake) -> Normal:
    buffers = {b.name: (pipeline.buffer(b.name).device_ptr, b.nbytes) for b in pipeline.plan.buffers}
    return Normal(buffers, [h.number for h in fake.conditional_handles])


def _normal_native(run) -> Normal:
    handles = [e["value"] for e in run.log if e["event"] == "handle"]
    return Normal({name: tuple(v) for name, v in run.result["buffers"].items()}, handles)


@pytest.mark.parametrize("path", PIPES, ids=lambda p: p.stem)
def test_the_c_runtime_hands_the_driver_the_graph_the_python_runtime_does(path, native, tmp_path):
    compilation = _bundle(path, tmp_path / "bundle")
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--steps", str(STEPS), "--eager", str(EAGER))
    pipeline, fake, library = _python_side(path)
    with pipeline:
        python = _normal_python(pipeline, fake)
        opened = _hashes(pipeline)
        py_paths: dict = {}
        py_graph = describe_python(fake, fake.executables[pipeline.graph.exec], python, py_paths)
        py_handles = [(py_paths[id(graph)], default, flags) for graph, _, default, flags in
                      fake.conditional_handles.values()]
        pipeline.step(STEPS)
        stepped = _hashes(pipeline)
        pipeline.run_eager(EAGER)
        eager = _hashes(pipeline)
        py_launches = python_launches(fake, python)
        py_matmuls = python_matmuls(library, python)
        py_diags = pipeline.readback()
    assert fake.live() == dict.fromkeys(fake.live(), 0)

    c = _normal_native(run)
    (instantiated,) = [e["graph"] for e in run.log if e["event"] == "instantiate"]
    c_paths: dict = {}
    assert describe_native(instantiated, c, c_paths) == py_graph
    assert [(c_paths[e["graph"]], e["default"], e["flags"]) for e in run.log if e["event"] == "handle"] == py_handles
    assert native_launches(run.log, c) == py_launches, "the kernels run, eagerly and in graphs, differ"
    assert native_matmuls(run.log, c) == py_matmuls
    assert run.result["open"] == opened, "the buffers differ after the open"
    if not _gemm_count(pipeline.plan):  # tests/fake_cublaslt.py computes f32 GEMMs; the C fake computes none
        assert run.result["steps"] == stepped and run.result["eager"] == eager
    assert {k: v for k, v in run.result["diags"].items()} == pytest.approx(py_diags, nan_ok=True)
    (live,) = [e for e in run.log if e["event"] == "live"]
    assert {k: v for k, v in live.items() if k != "event"} == dict.fromkeys(
        ("allocations", "graphs", "executables", "modules", "streams", "events"), 0)


# Every pipeline with collective nodes, as (file, WORLD_SIZE, RANK): rl_step has them only with
# several ranks; rank 1 reads another slice in reducescatter; one rank takes NCCL's one-rank path
# (the fakes' too), whose recordings hold copies.
COLLECTIVE_RUNS = [(ROOT / "pipelines" / "rl_step.pipe", 2, 0), (FIXTURES / "collectives.pipe", 1, 0),
                   (FIXTURES / "collectives.pipe", 2, 1)]


@pytest.mark.parametrize("path, world_size, rank", COLLECTIVE_RUNS, ids=lambda v: getattr(v, "stem", str(v)))
def test_collectives_reach_nccl_as_the_python_runtime_issues_them(path, world_size, rank, native, tmp_path):
    """The host's communicator (the fake NCCL's, rank `rank` of `world_size`) against the Python
    runtime's fake communicator: the same graph with the same recorded collectives, the same NCCL
    calls in the same order (eager, recorded, grouped), the same bytes everywhere. The C runtime
    issues one more collective first: the check that every rank's plan has the same collectives
    (in place, so on one rank it runs nothing)."""
    defines = {"WORLD_SIZE": world_size, "RANK": rank}
    compilation = _bundle(path, tmp_path / "bundle", defines)
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--nccl", f"{rank}/{world_size}", "--steps", str(STEPS), "--eager", str(EAGER))
    driver = fake_driver(path, fake=CapturingCuda)
    communicator = FakeCommunicator(driver.cu, world_size, rank)
    ranks = lambda plan, launch: connect(plan, launch, LocalChannel(), FakeLibrary(communicator))  # noqa: E731
    pipeline = load(path, launch=Launch("torchrun", rank, world_size, rank),
                    backends=Backends(driver, FakeCublasLt(driver.cu), connect_ranks=ranks))
    with pipeline:
        python, fake = _normal_python(pipeline, driver.cu), driver.cu
        opened = _hashes(pipeline)
        py_graph = describe_python(fake, fake.executables[pipeline.graph.exec], python)
        pipeline.step(STEPS)
        stepped = _hashes(pipeline)
        pipeline.run_eager(EAGER)
        eager = _hashes(pipeline)
        py_launches, py_calls = python_launches(fake, python), python_collectives(communicator, python)
    assert len(py_calls) >= 3 and not _gemm_count(pipeline.plan)

    c = _normal_native(run)
    (instantiated,) = [e["graph"] for e in run.log if e["event"] == "instantiate"]
    assert describe_native(instantiated, c) == py_graph
    assert ("memcpy" in _kinds(py_graph)) == (world_size == 1)  # NCCL's one-rank copies, recorded
    check, *c_calls = native_collectives(run.log, c)
    assert {k: check[k] for k in ("call", "count", "dtype", "detail", "captured", "grouped")} == {
        "call": "allreduce", "count": 16, "dtype": "u32", "detail": "max", "captured": False, "grouped": False}
    assert c_calls == py_calls
    c_launches = native_launches(run.log, c)
    if world_size > 1:
        check_kernel, *c_launches = c_launches
        assert check_kernel["function"] == "ncclDevKernel_allreduce"
    assert c_launches == py_launches
    assert (run.result["open"], run.result["steps"], run.result["eager"]) == (opened, stepped, eager)
    (live,) = [e for e in run.log if e["event"] == "live"]
    assert set(live.values()) == {"live", 0}


def test_both_runtimes_refuse_one_ranks_copy_to_host_memory_in_the_same_line(native, tmp_path):
    """On one rank NCCL records an allgather as a copy, here into a `mapped` buffer: a copy to
    host memory, which both runtimes refuse in the same words (and the C runtime frees all)."""
    path = tmp_path / "gather.pipe"
    path.write_text("buffer x: f32[8] = fill(1.5)\nbuffer parts: f32[8 * WORLD_SIZE] mapped\n"
                    "step {\n    allgather x -> parts\n}\n")
    compilation = _bundle(path, tmp_path / "bundle", {"WORLD_SIZE": 1, "RANK": 0})
    env = fake_environment(native, tmp_path / "native", param_sizes(compilation.program))
    done = subprocess.run([str(native / "run_fake"), str(tmp_path / "bundle"), str(tmp_path / "out.json"), "--nccl",
                           "0/1"], capture_output=True, text=True, env=env, timeout=300)
    driver = fake_driver(path, fake=CapturingCuda)
    communicator = FakeCommunicator(driver.cu, 1, 0)
    ranks = lambda plan, launch: connect(plan, launch, LocalChannel(), FakeLibrary(communicator))  # noqa: E731
    with pytest.raises(PipelineError) as error:
        load_bundle(tmp_path / "bundle", backends=Backends(driver, connect_ranks=ranks))
    message = str(error.value).removeprefix(f"{tmp_path / 'bundle'}: ")
    assert message.startswith("allgather `step/allgather:parts` (") and "(a copy from device to host memory)" in message
    assert done.returncode == 1 and done.stderr == f"pipec_open_dir: {message}"
    (live,) = [e for e in map(json.loads, Path(env["FAKE_CUDA_LOG"]).read_text().splitlines()) if e["event"] == "live"]
    assert set(live.values()) == {"live", 0}
    assert driver.cu.live() == dict.fromkeys(driver.cu.live(), 0)


def test_the_data_parallel_host_program_saves_the_state_the_python_runtime_reaches(native, tmp_path):
    """native/examples/data_parallel.c on the fakes, one rank: it creates the communicator itself,
    replays the bundle of collectives.pipe and saves the state, which the Python runtime loads as
    its own after the same steps; opened as another rank, it stops with one line."""
    path = FIXTURES / "collectives.pipe"
    compilation = _bundle(path, tmp_path / "bundle", {"WORLD_SIZE": 1, "RANK": 0})
    env = fake_environment(native, tmp_path / "native", param_sizes(compilation.program))
    command = [str(native / "data_parallel"), str(tmp_path / "bundle"), "--steps", "5", "--sync-every", "2",
               "--id-file", str(tmp_path / "id"), "--save-state", str(tmp_path / "c-state")]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("data_parallel[rank 0]: ran 5 steps in ")
    driver = fake_driver(path, fake=CapturingCuda)
    communicator = FakeCommunicator(driver.cu, 1, 0)
    ranks = lambda plan, launch: connect(plan, launch, LocalChannel(), FakeLibrary(communicator))  # noqa: E731
    with load(path, backends=Backends(driver, connect_ranks=ranks)) as pipeline:
        pipeline.step(5)
        expected = _hashes(pipeline)
        pipeline.load_state(tmp_path / "c-state")
        assert _hashes(pipeline) == expected

    wrong = subprocess.run(command, capture_output=True, text=True, env={**env, "RANK": "1", "WORLD_SIZE": "2"},
                           timeout=300)
    assert wrong.returncode == 1 and wrong.stderr.count("\n") == 1, wrong.stderr
    assert wrong.stderr.startswith(f"data_parallel[rank 1]: error: {tmp_path / 'bundle'} was built for rank 0 of 1, "
                                   "and the host's communicator is rank 1 of 2")


def _kinds(tree: list[dict]) -> set[str]:
    """The node kinds of a described graph tree."""
    return {n["kind"] for n in tree}.union(*(_kinds(t) for n in tree for t in [n.get("child", []), *n.get("bodies", [])]))


def _programmatic(tree: list[dict]) -> int:
    """The programmatic edges of a described graph tree."""
    return sum(len(n["programmatic"]) + sum(_programmatic(t) for t in [n.get("child", []), *n.get("bodies", [])])
               for n in tree)


@pytest.mark.parametrize("capability", [80, 90], ids=["sm_80", "sm_90"])
def test_programmatic_edges_and_launches_only_where_the_device_has_them(capability, native, tmp_path, monkeypatch):
    path = ROOT / "pipelines" / "rl_step.pipe"
    compilation = _bundle(path, tmp_path / "bundle", archs=(f"sm_{capability}",))
    monkeypatch.setenv("FAKE_CUDA_CAPABILITY", str(capability))
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--steps", "1", "--eager", "1")
    pipeline, fake, _ = _python_side(path, capability=divmod(capability, 10))
    with pipeline:
        py_graph = describe_python(fake, fake.executables[pipeline.graph.exec], _normal_python(pipeline, fake))
        pipeline.step(1)
        pipeline.run_eager(1)
        py_launches = python_launches(fake, _normal_python(pipeline, fake))
    (instantiated,) = [e["graph"] for e in run.log if e["event"] == "instantiate"]
    c_graph = describe_native(instantiated, _normal_native(run))
    assert c_graph == py_graph and native_launches(run.log, _normal_native(run)) == py_launches
    serialized = sum(launch["serialized"] for launch in py_launches)
    child_graph_nodes = sum(node["kind"] == "graph" for node in c_graph)
    if capability >= 90:  # child graphs opened, library recordings kept whole
        assert _programmatic(c_graph) > 0 and serialized > 0 and child_graph_nodes == _gemm_count(pipeline.plan)
    else:
        assert _programmatic(c_graph) == 0 and serialized == 0 and child_graph_nodes > _gemm_count(pipeline.plan)


def _stored_algorithms(path: Path, folder: Path, variant: str) -> tuple[GemmAlgorithms, ...]:
    """The algorithms the Python runtime chose for `path` on the fakes, changed so that each step of
    the rule decides a node (`mixed`: stored, refused by cublasLtMatmulAlgoCheck, too much workspace,
    none stored), or chosen on another GPU, or none at all."""
    if variant == "none":
        return ()
    driver = fake_driver(path)
    with load(path, backends=Backends(driver, FakeCublasLt(driver.cu))) as pipeline:
        data = pipeline.gemm_algorithms()
    gemms = list(data["gemms"].values())
    word = lambda *words: b"".join(w.to_bytes(8, "little") for w in words).hex()  # noqa: E731
    if variant == "mixed":
        gemms[0].update(algorithm=word(2, 2, 2, 2, 2, 2, 2, 2), chosen_by="tune")
        gemms[1]["algorithm"] = word(9, 9, 9, 9, 9, 9, 9, 9)
        gemms[2]["algorithm"] = word(3, 1 << 30, 3, 3, 3, 3, 3, 3)
        del data["gemms"][list(data["gemms"])[3]]
    else:
        data["device"]["name"] = "NVIDIA H200"
    (folder / "gemms.json").write_text(file_text(data))
    return (read_file(folder / "gemms.json"),)


@pytest.mark.parametrize("path, variant", [(ROOT / "pipelines" / "c51_step.pipe", "mixed"),
                                           (ROOT / "pipelines" / "examples" / "gemm_mlp.pipe", "mixed"),
                                           (ROOT / "pipelines" / "examples" / "gemm_mlp.pipe", "another_gpu"),
                                           (ROOT / "pipelines" / "examples" / "gemm_mlp.pipe", "none")],
                         ids=["c51_step", "gemm_mlp", "gemm_mlp_another_gpu", "gemm_mlp_none"])
def test_both_runtimes_choose_a_bundles_gemm_algorithms_alike(path, variant, native, tmp_path):
    """The same bundle with stored algorithms: the C runtime makes the same cuBLASLt calls as the
    Python runtime (the algorithm of each included) and reports each choice in the same words."""
    chosen = _stored_algorithms(path, tmp_path, variant)
    compilation = _bundle(path, tmp_path / "bundle", gemm_algorithms=chosen)
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--steps", str(STEPS), "--eager", str(EAGER))
    driver = fake_driver(path)
    library = FakeCublasLt(driver.cu)
    with load_bundle(tmp_path / "bundle", backends=Backends(driver, library)) as pipeline:
        python = _normal_python(pipeline, driver.cu)
        choices = [[c.node, c.stored, c.why] for c in pipeline.gemm_choices]
        pipeline.step(STEPS)
        pipeline.run_eager(EAGER)
        py_matmuls = python_matmuls(library, python)
    assert run.result["gemms"] == choices and len(choices) == _gemm_count(pipeline.plan)
    assert native_matmuls(run.log, _normal_native(run)) == py_matmuls
    stored = sum(stored for _, stored, _ in choices)
    assert stored == {"mixed": len(choices) - 3}.get(variant, 0)
    if variant == "mixed":
        assert {m["algorithm"][:16] for m in py_matmuls} == {"0200000000000000", "0100000000000000"}


def test_both_runtimes_refuse_an_algorithm_for_less_aligned_operands_alike(native, tmp_path):
    """An operand 4 bytes into its buffer: the algorithm chosen for 256-byte aligned ones is not used."""
    from gemm_plans import buffer, gemm, gemm_plan, matrix
    from pipec.plan.gemm_algorithms import ChosenOn, StoredAlgorithm, gemm_spec

    node = gemm(0, "gemm:y", a=matrix("x", 8, 16, byte_offset=4), b=matrix("w", 32, 16), c=matrix("y", 8, 32),
                trans_b=True)
    plan = gemm_plan([buffer("x", "f32", (8 * 16 + 1,)), buffer("w", "f32", (32, 16)),
                      buffer("y", "f32", (8, 32), first="write")], [node])
    stored = StoredAlgorithm(bytes([2] + [0] * 7) * 8, (256, 256, 256, 256), "tune", gemm_spec(node))
    write_bundle(plan, ("sm_90",), tmp_path / "bundle", "gemm.pipe",
                 (GemmAlgorithms(ChosenOn("Fake H200", "sm_90", 132, 130100), {"gemm:y": stored}),))
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", {}, "--steps", "1")
    driver = fake_driver(FIXTURES / "nodes.pipe")
    with load_bundle(tmp_path / "bundle", backends=Backends(driver, FakeCublasLt(driver.cu))) as pipeline:
        choices = [[c.node, c.stored, c.why] for c in pipeline.gemm_choices]
    assert run.result["gemms"] == choices == [["gemm:y", False, (
        "heuristic: its operands (cuBLASLt's A, B, C, D) are aligned to 256/4/256/256 bytes here, and the stored "
        "algorithm was chosen for 256/256/256/256")]]


@pytest.mark.parametrize("change", [
    lambda d: d["choices"][0]["gemms"].update(nope=d["choices"][0]["gemms"]["step/forward/gemm:h"]),
    lambda d: d["choices"][0]["gemms"]["step/forward/gemm:y"].update(algorithm="ab"),
    lambda d: d["choices"][0]["gemms"]["step/forward/gemm:y"].update(algorithm="xy" * 64),
    lambda d: d["choices"][0]["gemms"]["step/forward/gemm:y"].update(alignments=[256, 256, 256]),
    lambda d: d["choices"][0]["gemms"]["step/forward/gemm:y"].update(chosen_by=None),
    lambda d: d["choices"][0]["device"].update(arch="90"),
    lambda d: d["choices"][0].update(cublaslt=0),
    lambda d: d["choices"][0].update(gemms=[]),
    lambda d: d["choices"].append(3),
    lambda d: d.update(choices={}),
], ids=["node", "size", "hex", "alignments", "chosen_by", "arch", "cublaslt", "gemms", "choice", "choices"])
def test_both_runtimes_refuse_a_bundles_bad_algorithms_in_the_same_line(change, native, tmp_path):
    from test_gemm_algorithms import rewrite_gemm_algorithms

    path = ROOT / "pipelines" / "examples" / "gemm_mlp.pipe"
    compilation = _bundle(path, tmp_path / "bundle", gemm_algorithms=_stored_algorithms(path, tmp_path, "another_gpu"))
    rewrite_gemm_algorithms(tmp_path / "bundle", change)
    env = fake_environment(native, tmp_path / "native", param_sizes(compilation.program))
    done = subprocess.run([str(native / "run_fake"), str(tmp_path / "bundle"), str(tmp_path / "out.json")],
                          capture_output=True, text=True, env=env, timeout=300)
    driver = fake_driver(path)
    with pytest.raises(BundleError) as error:
        load_bundle(tmp_path / "bundle", backends=Backends(driver, FakeCublasLt(driver.cu)))
    assert done.returncode == 1 and done.stderr == f"pipec_open_dir: {error.value}\n"
    assert driver.cu.live() == dict.fromkeys(driver.cu.live(), 0)


def _gemm_count(plan) -> int:
    return sum(isinstance(n, GemmNodeSpec) for g in plan.graphs for n in g.nodes)


@pytest.mark.parametrize("name", ["nodes.pipe", "bf16.pipe"])
def test_state_written_by_either_runtime_loads_in_the_other(name, native, tmp_path):
    path = FIXTURES / name
    compilation = _bundle(path, tmp_path / "bundle")
    sizes = param_sizes(compilation.program)
    saved = run_native(native, tmp_path / "bundle", tmp_path / "save", sizes, "--steps", "1", "--save",
                       str(tmp_path / "c-state"))
    pipeline, _, _ = _python_side(path)
    with pipeline:
        pipeline.load_state(tmp_path / "c-state")
        assert _hashes(pipeline) == saved.result["steps"]
        pipeline.step(3)
        pipeline.save_state(tmp_path / "py-state", steps=4)
        expected = _hashes(pipeline)
    loaded = run_native(native, tmp_path / "bundle", tmp_path / "load", sizes, "--load", str(tmp_path / "py-state"),
                        "--eager", "0")
    assert loaded.result["eager"] == expected


def _table_digest(buffers: dict, entries: list[tuple[str, int]]) -> str:
    """The SHA-256 of a table holding these (buffer, byte offset) addresses, in `buffers`' terms."""
    return hashlib.sha256(struct.pack(f"<{len(entries)}Q", *(buffers[name][0] + offset
                                                               for name, offset in entries))).hexdigest()


def test_each_runtime_fills_a_table_with_its_own_addresses_even_from_the_others_state(native, tmp_path):
    path = FIXTURES / "tables.pipe"
    compilation = _bundle(path, tmp_path / "bundle")
    sizes = param_sizes(compilation.program)
    entries = [("a", 0), ("b", 256 * 4)]
    saved = run_native(native, tmp_path / "bundle", tmp_path / "save", sizes, "--steps", "1", "--save",
                       str(tmp_path / "c-state"))
    c_table = _table_digest(saved.result["buffers"], entries)
    assert saved.result["open"]["tensors"] == saved.result["steps"]["tensors"] == c_table
    pipeline, _, _ = _python_side(path)
    with pipeline:
        mine = {b.name: (pipeline.buffer(b.name).device_ptr, b.nbytes) for b in pipeline.plan.buffers}
        assert _hashes(pipeline)["tensors"] == _table_digest(mine, entries)
        pipeline.load_state(tmp_path / "c-state")  # the C runtime's addresses, saved
        loaded = _hashes(pipeline)
        assert loaded["tensors"] == _table_digest(mine, entries)
        assert {k: v for k, v in loaded.items() if k != "tensors"} == \
            {k: v for k, v in saved.result["steps"].items() if k != "tensors"}
        pipeline.save_state(tmp_path / "py-state", steps=1)
    again = run_native(native, tmp_path / "bundle", tmp_path / "load", sizes, "--load", str(tmp_path / "py-state"),
                       "--eager", "0")
    assert again.result["eager"]["tensors"] == _table_digest(again.result["buffers"], entries)


def test_verify_and_a_live_update_match_the_python_runtime(native, tmp_path):
    path = FIXTURES / "live.pipe"
    compilation = _bundle(path, tmp_path / "bundle")
    new = compile_file(path, override(load_settings(path), defines=(("FACTOR", "3.0"), ("BLOCK", "64"))))
    (tmp_path / "new-plan.json").write_text(plan_json(new.plan))
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--verify", "2", "--update", str(tmp_path / "new-plan.json"), "--steps", "1")
    pipeline, fake, _ = _python_side(path)
    with pipeline:
        assert pipeline.verify(2).ok and run.result["verify"]["ok"] == 1
        changed = pipeline.update(FACTOR=3.0, BLOCK=64)
        fake.launches.clear()
        pipeline.step(1)
        python = _normal_python(pipeline, fake)
        launched = python_launches(fake, python)
    assert run.result["update"] == {"status": 0, "changed": len(changed)}
    c = _normal_native(run)
    after_update = run.log[max(i for i, e in enumerate(run.log) if e["event"] == "exec_set") + 1:]
    assert native_launches(after_update, c) == launched


def test_an_update_that_needs_a_new_graph_is_refused_in_one_line(native, tmp_path):
    path = FIXTURES / "live.pipe"
    compilation = _bundle(path, tmp_path / "bundle")
    new = compile_file(path, override(load_settings(path), defines=(("N", "2000"),)))
    (tmp_path / "new-plan.json").write_text(plan_json(new.plan))
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--update", str(tmp_path / "new-plan.json"))
    assert run.result["update"]["status"] == 9  # PIPEC_ERROR_UPDATE_REFUSED
    (message,) = run.stderr.splitlines()
    assert message.startswith("update: the new plan changes the buffer `x` (declared at ")
    assert message.endswith("only kernel scalar arguments and launch shapes can be updated in place: load the "
                            "pipeline again")


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler: the C++ example is not built")
def test_the_cpp_example_sets_constants_as_the_python_runtime_does(native, tmp_path):
    path = ROOT / "pipelines" / "rl_step.pipe"
    compilation = _bundle(path, tmp_path / "bundle")
    env = fake_environment(native, tmp_path / "native", param_sizes(compilation.program))
    done = subprocess.run([str(native / "run_bundle"), str(tmp_path / "bundle"), "5", "GAMMA=0.5", "EPS_DECAY_STEPS=3"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    pipeline, _ = _bundle_side(path, tmp_path / "bundle")
    with pipeline:
        assert pipeline.update(GAMMA=0.5, EPS_DECAY_STEPS=3) == ["step/act/mlp_act_push"]
        pipeline.step(5)
        expected = "run_bundle: " + _short(pipeline.readback())
    assert done.stdout.splitlines()[1] == expected
    refused = subprocess.run([str(native / "run_bundle"), str(tmp_path / "bundle"), "5", "LR=0.5"], capture_output=True,
                             text=True, env=env, timeout=300)
    assert refused.returncode == 1 and refused.stderr.startswith("run_bundle: `LR` cannot change in place: it reaches ")


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler: the C++ example is not built")
def test_the_cpp_example_prints_the_diagnostics_piperun_prints(native, tmp_path):
    path = ROOT / "pipelines" / "rl_step.pipe"
    compilation = _bundle(path, tmp_path / "bundle")
    env = fake_environment(native, tmp_path / "native", param_sizes(compilation.program))
    done = subprocess.run([str(native / "run_bundle"), str(tmp_path / "bundle"), "5"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    pipeline, _, _ = _python_side(path)
    with pipeline:
        pipeline.step(5)
        expected = "run_bundle: " + _short(pipeline.readback())
    ran, diagnostics = done.stdout.splitlines()
    assert ran.startswith("run_bundle: ran 5 steps in ") and diagnostics == expected


LIVE_UPDATES = {
    "live": {"FACTOR": 3.0, "BLOCK": 64},
    "flows": {"TAG": 5, "RATE": 0.25, "WIDE": 1.75, "SMEM": 2048, "PERIOD": 5, "REPS": 3, "CLUSTER_GRID": 6,
              "BIG": 2**45, "FLAG": False, "SHIFT": -6, "THREADS": 32},
    "rl_step": {"GAMMA": 0.95, "TD_SPB": 2, "LR_FACTOR": 0.25},
    "c51_step": {"V_MIN": -20.0, "WARPS": 2},
}
LIVE_PIPES = {"live": FIXTURES / "live.pipe", "flows": ROOT / "tests" / "fixtures" / "live" / "flows.pipe",
              "rl_step": ROOT / "pipelines" / "rl_step.pipe", "c51_step": ROOT / "pipelines" / "c51_step.pipe"}


def _assignments(changes: dict) -> str:
    return ",".join(f"{name}={'true' if v is True else 'false' if v is False else repr(v)}" for name, v in changes.items())


def _bundle_side(path: Path, bundle: Path):
    driver = fake_driver(path)
    library = FakeCublasLt(driver.cu)
    return load_bundle(bundle, backends=Backends(driver, library)), driver.cu


@pytest.mark.parametrize("name", sorted(LIVE_UPDATES))
def test_the_c_runtime_updates_constants_as_the_python_runtime_does(name, native, tmp_path):
    path, changes = LIVE_PIPES[name], LIVE_UPDATES[name]
    compilation = _bundle(path, tmp_path / "bundle")
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--steps", "1", "--set", _assignments(changes), "--steps", "1")
    pipeline, fake = _bundle_side(path, tmp_path / "bundle")
    with pipeline:
        pipeline.step(1)
        changed = pipeline.update(**changes)
        set_params = len(fake.named("cuGraphExecKernelNodeSetParams"))
        fake.launches.clear()
        pipeline.step(1)
        launched = python_launches(fake, _normal_python(pipeline, fake))
        stepped = _hashes(pipeline)
    assert changed and run.result["set"] == {"status": 0, "changed": len(changed)}
    sets = [i for i, e in enumerate(run.log) if e["event"] == "exec_set"]
    assert len(sets) == set_params
    assert native_launches(run.log[sets[-1] + 1:], _normal_native(run)) == launched
    if not _gemm_count(pipeline.plan):
        assert run.result["steps"] == stepped


@pytest.mark.parametrize("assignments, status, message", [
    ("NOPE=1", 1, "set: pipec_update_constants: "),
    ("N=2000", 9, "set: `N` cannot change in place: it reaches a buffer's dimension at "),
    ("BLOCK=4096", 9, "set: BLOCK = 4096: block.x of `step/bump/add_one` ("),
    ("BLOCK=64.5", 9, "set: BLOCK = 64.5: grid.x of `step/bump/add_one` ("),
    ("FACTOR=1e+39", 9, "set: FACTOR = 1e+39: argument 3 of `step/scaled` ("),
    ("FACTOR=3.0,BLOCK=4096", 9, "set: FACTOR = 3.0, BLOCK = 4096: block.x of `step/bump/add_one` ("),
])
def test_a_refused_constant_update_changes_nothing_in_one_line(assignments, status, message, native, tmp_path):
    path = FIXTURES / "live.pipe"
    compilation = _bundle(path, tmp_path / "bundle")
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--steps", "1", "--set", assignments, "--steps", "1")
    assert run.result["set"] == {"status": status, "changed": 0}
    (line,) = run.stderr.splitlines()
    assert line.startswith(message) and (status != 1 or line.endswith("live.pipe has no constant `NOPE`"))
    assert not [e for e in run.log if e["event"] == "exec_set"], "a refused update set a node"
    runs = [e for e in run.log if e["event"] == "run"]
    assert runs[:len(runs) // 2] == runs[len(runs) // 2:], "the second step ran as the first"


def test_constants_change_from_the_record_of_a_plan_pipec_update_plan_applied(native, tmp_path):
    path = FIXTURES / "live.pipe"
    compilation = _bundle(path, tmp_path / "bundle")
    new = compile_file(path, override(load_settings(path), defines=(("FACTOR", "3.0"), ("BLOCK", "64"))))
    (tmp_path / "new-plan.json").write_text(plan_json(new.plan))
    run = run_native(native, tmp_path / "bundle", tmp_path / "native", param_sizes(compilation.program),
                     "--update", str(tmp_path / "new-plan.json"), "--set", "FACTOR=5.0", "--steps", "1")
    pipeline, fake = _bundle_side(path, tmp_path / "bundle")
    with pipeline:
        pipeline.update(BLOCK=64, FACTOR=5.0)
        fake.launches.clear()
        pipeline.step(1)
        launched = python_launches(fake, _normal_python(pipeline, fake))
    assert run.result["set"] == {"status": 0, "changed": 1}, "FACTOR changes `scaled` alone: BLOCK is 64 already"
    sets = [i for i, e in enumerate(run.log) if e["event"] == "exec_set"]
    assert native_launches(run.log[sets[-1] + 1:], _normal_native(run)) == launched
