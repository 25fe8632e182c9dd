"""The C runtime (native/) against the Python runtime, on CPU: for every pipeline in pipelines/
(and fixtures with conditional nodes), one bundle, opened by the C runtime through the fake
driver library native/tests/fake_cuda.c and by the Python runtime through tests/fake_cuda.py.
Both must hand their driver the same graph (nodes, work, argument bytes, memsets, copies, child
graphs, edges and which are programmatic, conditional nodes and handles), run the same kernels in
the same order (each launched with programmatic stream serialization or not), make the same
cuBLASLt calls, leave the same bytes in every buffer and free everything. CMake and a C
compiler are needed (they exist here and in CI); ctest (.ci/run) runs the unit tests."""

from __future__ import annotations

import hashlib
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from fake_cublaslt import FakeCublasLt
from fake_cuda import fake_driver, param_sizes
from native_harness import (
    Normal, build_native, describe_native, describe_python, fake_environment, native_launches, native_matmuls,
    native_tools_missing, python_launches, python_matmuls, run_native,
)
from pipec.compiler import compile_file, load_settings
from pipec.compiler.bundle import write_bundle
from pipec.compiler.config import override
from pipec.compiler.emit import plan_json
from pipec import load
from pipec.plan.schema import GemmNodeSpec
from pipec.runtime import Backends
from pipec.runtime.cli import _short

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


def _bundle(path: Path, folder: Path, defines: dict | None = None, archs: tuple[str, ...] = ("sm_90",)):
    settings = load_settings(path)
    if defines:
        settings = override(settings, defines=tuple((k, str(v)) for k, v in defines.items()))
    compilation = compile_file(path, settings)
    assert compilation.plan is not None, [d.message for d in compilation.diagnostics]
    write_bundle(compilation.plan, archs, folder, str(path))
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
