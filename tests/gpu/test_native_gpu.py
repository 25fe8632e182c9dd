"""The C runtime (native/) on the GPU, against the Python runtime in the same process: the
bundles of rl_step and c51_step replayed by both end bit-identical on every buffer, and so does
c51_step's bundle with stored GEMM algorithms that are not the heuristic's, which both runtimes
say they run; the C runtime's steps/s matches the Python runtime's (the same graph, so the GPU
sets the pace);
host time per cuGraphLaunch from C and from Python; the step embedded into a graph the
host builds (pipec_add_to_graph) stays bit-exact; the C++ example runs clean under
compute-sanitizer memcheck where it is installed. The library is built here with CMake.
Figures go to $OUT/native_gpu.json when OUT is set."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from gpu_arch import device_arch
from native_harness import build_native, native_tools_missing

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(native_tools_missing() is not None, reason=native_tools_missing() or "")]

ROOT = Path(__file__).resolve().parents[2]
STEPS = 200  # replays compared bit for bit
TIMED = 2000  # replays timed for steps/s, best of REPEATS
LAUNCHES = 16  # replays timed for the host's time per launch
REPEATS = 5


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    return build_native(tmp_path_factory.mktemp("native-gpu-build"))


def _loaded_cublaslt() -> str | None:
    """The cuBLASLt this process loaded for the Python runtime (nvmath-python's), so that both
    runtimes call the same library."""
    with open("/proc/self/maps") as maps:
        found = [line.split()[-1] for line in maps if "libcublasLt.so" in line]
    return found[0] if found else None


class CRuntime:
    """libpipec_runtime.so through ctypes."""

    def __init__(self, build: Path) -> None:
        lib = self.lib = ctypes.CDLL(str(build / "libpipec_runtime.so"))
        handle, size = ctypes.c_void_p, ctypes.c_size_t
        lib.pipec_last_error.restype = ctypes.c_char_p
        lib.pipec_open_dir.argtypes = [ctypes.c_char_p, handle, ctypes.POINTER(handle)]
        lib.pipec_step.argtypes = [handle, ctypes.c_uint64]
        lib.pipec_synchronize.argtypes = [handle]
        lib.pipec_close.argtypes = [handle]
        lib.pipec_buffer.argtypes = [handle, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(size),
                                     ctypes.POINTER(ctypes.c_int)]
        lib.pipec_read_buffer.argtypes = [handle, ctypes.c_char_p, handle, size]
        lib.pipec_add_to_graph.argtypes = [handle, handle, ctypes.POINTER(handle), size, ctypes.POINTER(handle)]
        lib.pipec_gemm_count.argtypes = [handle]
        lib.pipec_gemm_count.restype = size
        lib.pipec_gemm_at.argtypes = [handle, size, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
                                      ctypes.POINTER(ctypes.c_char_p)]

    def check(self, status: int) -> None:
        assert status == 0, self.lib.pipec_last_error().decode()

    def open(self, bundle: Path) -> ctypes.c_void_p:
        if (library := _loaded_cublaslt()) is not None:
            os.environ.setdefault("PIPEC_CUBLASLT_LIBRARY", library)
        p = ctypes.c_void_p()
        self.check(self.lib.pipec_open_dir(str(bundle).encode(), None, ctypes.byref(p)))
        return p

    def gemm_choices(self, p) -> list[tuple[str, bool, str]]:
        """(node, stored, why) of each GEMM node, as pipec_gemm_at reports them."""
        choices = []
        for index in range(self.lib.pipec_gemm_count(p)):
            node, stored, why = ctypes.c_char_p(), ctypes.c_int(), ctypes.c_char_p()
            self.check(self.lib.pipec_gemm_at(p, index, ctypes.byref(node), ctypes.byref(stored), ctypes.byref(why)))
            choices.append((node.value.decode(), bool(stored.value), why.value.decode()))
        return choices

    def read(self, p, name: str) -> bytes:
        size = ctypes.c_size_t()
        self.check(self.lib.pipec_buffer(p, name.encode(), None, ctypes.byref(size), None))
        out = (ctypes.c_uint8 * size.value)()
        self.check(self.lib.pipec_read_buffer(p, name.encode(), out, size))
        return bytes(out)


def _bundle(path: Path, folder: Path, arch: str, gemm_algorithms: tuple = ()) -> None:
    from pipec.compiler import compile_file, load_settings
    from pipec.compiler.bundle import write_bundle

    compilation = compile_file(path, load_settings(path))
    assert compilation.plan is not None
    write_bundle(compilation.plan, (arch,), folder, str(path), gemm_algorithms)


def _differences(c: CRuntime, p, snapshot: dict[str, np.ndarray]) -> list[str]:
    return [name for name, array in snapshot.items() if c.read(p, name) != np.ascontiguousarray(array).tobytes()]


def _rates(runs: dict) -> dict[str, tuple[float, float]]:
    """Per runtime (name -> (enqueue n replays, synchronize)): the best steps/s of TIMED replays
    and the least host time per launch of LAUNCHES replays (fewer than the launch queue holds,
    so the host never waits for the device), over REPEATS rounds that alternate the runtimes,
    so that neither gains from the GPU's clocks settling."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    launches: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(REPEATS):
        for name, (run, synchronize) in runs.items():
            synchronize()
            start = time.perf_counter()
            run(TIMED)
            synchronize()
            rates[name].append(TIMED / (time.perf_counter() - start))
            start = time.perf_counter()
            run(LAUNCHES)
            launches[name].append((time.perf_counter() - start) / LAUNCHES)
            synchronize()
    return {name: (max(rates[name]), min(launches[name])) for name in runs}


def _embedded(c: CRuntime, bundle: Path, steps: int) -> tuple[ctypes.c_void_p, object]:
    """A second C pipeline whose step lives in a graph the host built (after one empty node),
    launched `steps` times on the host's own stream."""
    from cuda.bindings import driver as cu

    p = c.open(bundle)
    err, host = cu.cuGraphCreate(0)
    assert err == cu.CUresult.CUDA_SUCCESS
    err, first = cu.cuGraphAddEmptyNode(host, [], 0)
    deps = (ctypes.c_void_p * 1)(int(first))
    last = ctypes.c_void_p()
    c.check(c.lib.pipec_add_to_graph(p, ctypes.c_void_p(int(host)), deps, 1, ctypes.byref(last)))
    assert last.value
    err, executable = cu.cuGraphInstantiate(host, 0)
    assert err == cu.CUresult.CUDA_SUCCESS
    err, stream = cu.cuStreamCreate(1)
    for _ in range(steps):
        assert cu.cuGraphLaunch(executable, stream)[0] == cu.CUresult.CUDA_SUCCESS
    assert cu.cuStreamSynchronize(stream)[0] == cu.CUresult.CUDA_SUCCESS
    cu.cuGraphExecDestroy(executable)
    cu.cuGraphDestroy(host)
    cu.cuStreamDestroy(stream)
    return p, host


@pytest.mark.parametrize("name", ["rl_step", "c51_step"])
def test_the_c_runtime_replays_bit_identical_to_the_python_runtime(name, native, tmp_path):
    import pipec

    path = ROOT / "pipelines" / f"{name}.pipe"
    c = CRuntime(native)
    bundle = tmp_path / "bundle"
    _bundle(path, bundle, device_arch())
    with pipec.load_bundle(bundle) as pipeline:  # the heuristic's GEMM algorithms, as the C runtime's
        p = c.open(bundle)
        try:
            assert not _differences(c, p, pipeline.snapshot()), "the buffers differ after the open"
            pipeline.step(STEPS)
            c.check(c.lib.pipec_step(p, STEPS))
            c.check(c.lib.pipec_synchronize(p))
            expected = pipeline.snapshot()
            assert not _differences(c, p, expected), f"buffers differ after {STEPS} steps"
            measured = _rates({"c": (lambda n: c.check(c.lib.pipec_step(p, n)),
                                     lambda: c.check(c.lib.pipec_synchronize(p))),
                               "python": (pipeline.step, pipeline.synchronize)})
            (c_rate, c_launch), (py_rate, py_launch) = measured["c"], measured["python"]
        finally:
            c.lib.pipec_close(p)
        embedded, _ = _embedded(c, bundle, STEPS)
        try:
            assert not _differences(c, embedded, expected), "the embedded step differs from the pipeline's"
        finally:
            c.lib.pipec_close(embedded)
    figures = {"pipe": name, "c_steps_per_s": round(c_rate, 1), "python_steps_per_s": round(py_rate, 1),
               "c_host_us_per_launch": round(c_launch * 1e6, 3), "python_host_us_per_launch": round(py_launch * 1e6, 3)}
    print(json.dumps(figures))
    if os.environ.get("OUT"):
        with open(Path(os.environ["OUT"]) / "native_gpu.json", "a") as f:
            f.write(json.dumps(figures) + "\n")
    # The same graph runs on the same GPU: equal rates but for noise, which on an H200 measured
    # +-4% for rl_step between runs whichever runtime was ahead, and 0.3% for c51_step.
    assert c_rate >= 0.95 * py_rate, figures


def test_both_runtimes_run_a_bundles_stored_gemm_algorithms_bit_identical(native, tmp_path):
    """c51_step's bundle stores, for each GEMM node, the last of the heuristic's best candidates
    (another kernel than the heuristic alone runs, where cuBLASLt offers several): both runtimes
    say every node runs its stored algorithm, in the same words, and end bit-identical."""
    import pipec
    from pipec.plan.gemm_algorithms import file_text, read_file
    from pipec.runtime.gemm_nodes import TUNE_CANDIDATES

    path = ROOT / "pipelines" / "c51_step.pipe"
    with pipec.load(path) as pipeline:
        data, gemms, arch = pipeline.gemm_algorithms(), pipeline.gemms, pipeline.device.arch
        other = []  # the nodes whose stored algorithm is not the heuristic's first
        for name, op in gemms.ops.items():
            candidates = gemms._heuristic(op, TUNE_CANDIDATES)
            data["gemms"][name].update(algorithm=candidates[-1].tobytes().hex(), chosen_by="tune")
            if len(candidates) > 1:
                other.append(name)
    (tmp_path / "c51.gemms.json").write_text(file_text(data))
    assert other, "cuBLASLt offers one algorithm for every GEMM node here: nothing tells the stored from the heuristic's"
    bundle = tmp_path / "bundle"
    _bundle(path, bundle, arch, (read_file(tmp_path / "c51.gemms.json"),))
    c = CRuntime(native)
    with pipec.load_bundle(bundle) as pipeline:
        p = c.open(bundle)
        try:
            python = [(choice.node, choice.stored, choice.why) for choice in pipeline.gemm_choices]
            assert c.gemm_choices(p) == python and all(stored for _, stored, _ in python), python
            assert pipeline.gemms.algorithms == {n: e["algorithm"] for n, e in data["gemms"].items()}
            assert not _differences(c, p, pipeline.snapshot()), "the buffers differ after the open"
            pipeline.step(STEPS)
            c.check(c.lib.pipec_step(p, STEPS))
            c.check(c.lib.pipec_synchronize(p))
            assert not _differences(c, p, pipeline.snapshot()), f"buffers differ after {STEPS} steps"
        finally:
            c.lib.pipec_close(p)
    print(json.dumps({"pipe": "c51_step", "gemm_nodes": len(python), "stored_other_than_heuristic": len(other)}))


@pytest.mark.skipif(shutil.which("compute-sanitizer") is None, reason="compute-sanitizer is not installed")
def test_the_cpp_example_is_memcheck_clean(native, tmp_path):
    if not (native / "run_bundle").exists():
        pytest.skip("no C++ compiler: the example was not built")
    path = ROOT / "pipelines" / "rl_step.pipe"
    _bundle(path, tmp_path / "bundle", device_arch())
    done = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "1",
                           str(native / "run_bundle"), str(tmp_path / "bundle"), "20"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "ERROR SUMMARY: 0 errors" in done.stdout, done.stdout + done.stderr
