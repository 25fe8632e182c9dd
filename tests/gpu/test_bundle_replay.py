"""Bundles on a real GPU: the Python runtime replays a bundle bit for bit as it replays its
`.pipe` file (rl_step, c51_step and an example with random initial values; the bundle stores the
GEMM algorithms the file's load ran, which it runs too), `piperun DIR` and
`piperun FILE` save the same state, and a bundle without the device's cubin runs its PTX."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from gpu_arch import device_arch

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
PIPES = [ROOT / "pipelines" / "rl_step.pipe", ROOT / "pipelines" / "c51_step.pipe",
         ROOT / "pipelines" / "examples" / "gemm_mlp.pipe"]
STEPS = 200


def _build(pipe: Path, out: Path, *archs: str, gemm_algorithms: Path | None = None) -> Path:
    from pipec.compiler.cli import main

    stored = ["--gemm-algorithms", str(gemm_algorithms)] if gemm_algorithms else []
    assert main(["build", str(pipe), "-o", str(out), *(f"--arch={a}" for a in archs), *stored]) == 0
    return out


def _buffers(pipeline) -> dict[str, bytes]:
    pipeline.synchronize()
    return {spec.name: pipeline.read(spec.name).tobytes() for spec in pipeline.plan.buffers}


@pytest.mark.parametrize("pipe", PIPES, ids=lambda p: p.stem)
def test_a_bundle_replays_bit_for_bit_as_its_file(pipe, tmp_path):
    """The file's load runs the GEMM algorithms of the artifact cache (tuned ones, if a run kept
    them), which a bundle's load never reads: the bundle stores them instead."""
    import pipec
    from pipec.plan.gemm_algorithms import file_text

    algorithms = None
    with pipec.load(pipe) as from_file:
        if from_file.gemms.ops:
            algorithms = tmp_path / "gemms.json"
            algorithms.write_text(file_text(from_file.gemm_algorithms()))
        from_file.step(STEPS)
        expected = _buffers(from_file)
    bundle = _build(pipe, tmp_path / "bundle", device_arch(), gemm_algorithms=algorithms)
    with pipec.load_bundle(bundle) as from_bundle:
        assert all(choice.stored for choice in from_bundle.gemm_choices), from_bundle.gemm_choices
        from_bundle.step(STEPS)
        actual = _buffers(from_bundle)
    assert [name for name in expected if actual[name] != expected[name]] == []


def test_piperun_saves_the_same_state_from_a_bundle_and_from_its_file(tmp_path):
    pipe = ROOT / "pipelines" / "rl_step.pipe"
    bundle = _build(pipe, tmp_path / "bundle", device_arch())
    for name, target in (("file", pipe), ("bundle", bundle)):
        done = subprocess.run([sys.executable, "-m", "pipec.runtime.cli", str(target), "--steps", "1000",
                               "--no-progress", "--save-state", str(tmp_path / name)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    # the same plan (its `pipe`, hash and version in the metadata), the same steps, the same bits;
    # compared as read, since safetensors writes the metadata's keys in no fixed order
    from pipec.runtime.state import _read

    (file_meta, file_tensors), (bundle_meta, bundle_tensors) = (
        _read(tmp_path / name / "state.safetensors") for name in ("file", "bundle"))
    assert file_meta == bundle_meta and file_tensors.keys() == bundle_tensors.keys()
    assert [n for n in file_tensors if file_tensors[n].tobytes() != bundle_tensors[n].tobytes()] == []


def test_a_bundle_without_the_devices_cubin_runs_its_ptx_and_verifies(tmp_path):
    import pipec

    bundle = _build(ROOT / "pipelines" / "examples" / "tutorial.pipe", tmp_path / "bundle", "sm_80")
    with pipec.load_bundle(bundle) as pipeline:
        assert pipeline.verify(3).ok
