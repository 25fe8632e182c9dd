"""The front doors as one sitting reads them: `pipec.load`'s keywords are `LoadOptions`, a
pipeline that fails to build frees what it made in reverse and gives the device back once, and
the steps per launch are the compiler's (a plan with them needs no runtime)."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from fake_cuda import Call, CUresult, FakeCuda, fake_driver

import pipec
from pipec.compiler import compile_file, load_settings
from pipec.compiler.config import override
from pipec.compiler.steps_per_launch import CONTROL, StepsPerLaunchRefused
from pipec.runtime import Backends, LoadOptions
from pipec.runtime.memory import OutOfMemory

ROOT = Path(__file__).resolve().parents[1]
NODES = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
CONDITIONALS = ROOT / "tests" / "fixtures" / "runtime" / "conditionals.pipe"
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"


def test_pipec_load_takes_the_load_options_as_keywords_and_the_backends():
    keywords = [p.name for p in inspect.signature(pipec.load).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert keywords == [f.name for f in dataclasses.fields(LoadOptions)] + ["backends"]
    defaults = {p.name: p.default for p in inspect.signature(pipec.load).parameters.values()}
    assert all(defaults[f.name] == f.default for f in dataclasses.fields(LoadOptions))


def test_a_pipeline_that_fails_to_build_frees_in_reverse_and_releases_the_device_once():
    driver = fake_driver(NODES, memory_bytes=6000)  # the buffers do not fit: after stream and modules
    with pytest.raises(OutOfMemory):
        pipec.load(NODES, backends=Backends(driver))
    names = [call.name for call in driver.cu.calls]
    assert names.count("cuDevicePrimaryCtxRelease") == 1 and names[-1] == "cuDevicePrimaryCtxRelease"
    last = {name: max(i for i, n in enumerate(names) if n == name)
            for name in ("cuModuleUnload", "cuStreamDestroy", "cuDevicePrimaryCtxRelease")}
    assert last["cuModuleUnload"] < last["cuStreamDestroy"] < last["cuDevicePrimaryCtxRelease"]


def _plan(path: Path, **options):
    compilation = compile_file(path, override(load_settings(path), **options))
    assert compilation.plan is not None, compilation.diagnostics
    return compilation.plan


def test_the_compiler_wraps_the_step_in_a_device_loop():
    plan = _plan(CONDITIONALS, steps_per_launch=4)
    root = plan.graphs[plan.step]
    assert root.name == "launch" and CONTROL in {b.name for b in plan.buffers}
    plain = _plan(CONDITIONALS)
    assert plain.graphs[plain.step].name == "step"


def test_the_compiler_copies_the_step_when_unrolled():
    once, thrice = _plan(RL_STEP), _plan(RL_STEP, steps_per_launch=3, unroll=True)
    assert len(thrice.graphs[thrice.step].nodes) == 3 * len(once.graphs[once.step].nodes)
    assert CONTROL not in {b.name for b in thrice.buffers}


def test_the_compiler_refuses_to_unroll_an_every_block():
    with pytest.raises(StepsPerLaunchRefused, match=r"conditionals.pipe: the step has an `every` block"):
        compile_file(CONDITIONALS, override(load_settings(CONDITIONALS), steps_per_launch=4, unroll=True))


def test_a_compile_can_stop_after_parsing():
    compilation = compile_file(NODES, load_settings(NODES), until="parse")
    assert compilation.tree is not None and compilation.program is None and compilation.plan is None


class FaultedCuda(FakeCuda):
    """A context that faults once `faulted` is set: every free fails with the driver's error."""

    FREES = ("cuGraphExecDestroy", "cuMemFree", "cuModuleUnload", "cuStreamDestroy", "cuDevicePrimaryCtxRelease")
    ACCEPTED = tuple(name for name in FakeCuda.ACCEPTED if name != "cuDevicePrimaryCtxRelease")
    faulted = False

    def cuDevicePrimaryCtxRelease(self, device):
        return (CUresult.CUDA_SUCCESS,)

    def __getattribute__(self, name: str):
        if name in FaultedCuda.FREES and object.__getattribute__(self, "faulted"):
            calls = object.__getattribute__(self, "calls")
            return lambda *args: calls.append(Call(name, args)) or (CUresult.CUDA_ERROR_INVALID_VALUE,)
        return super().__getattribute__(name)


def test_a_faulted_context_still_frees_everything_and_gives_the_device_back():
    pipeline = pipec.load(NODES, backends=Backends(fake_driver(NODES, fake=FaultedCuda)))
    cu = pipeline.driver.cu
    cu.faulted = True
    pipeline.close()  # no CudaError: each free is tried, the device given back last
    tried = [call.name for call in cu.calls if call.name in FaultedCuda.FREES]
    assert set(tried) == set(FaultedCuda.FREES) and tried[-1] == "cuDevicePrimaryCtxRelease"
