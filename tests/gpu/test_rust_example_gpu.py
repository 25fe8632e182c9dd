"""The Rust crate's example (native/rust/pipec/examples/run_bundle.rs) on the GPU, against
piperun on the same bundle: after the same steps every buffer of the saved states is
bit-identical, the diagnostics line is the same, and the Rust replay's steps/s is piperun's
within the noise. The GPU machines have no cargo, so the binary is built where cargo is
(`cargo build --release --offline --manifest-path native/rust/Cargo.toml --example run_bundle`)
and carried: the test takes `$PIPEC_RUST_RUN_BUNDLE`, else the release build's path in the
checkout. Figures go to $OUT/rust_example_gpu.json when OUT is set."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_arch import device_arch

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("PIPEC_RUST_RUN_BUNDLE",
                             ROOT / "native" / "rust" / "target" / "release" / "examples" / "run_bundle"))
STEPS = {"rl_step": 20000, "c51_step": 4000}  # a second or so of replays each
LOG_EVERY = 1000
ROUNDS = 3  # each runner this many times, alternating; the best rate of each is compared

SUMMARY = re.compile(r"ran (\d+) steps in [\d.]+ s: ([\d.]+) steps/s")


@functools.cache
def _cublaslt() -> dict[str, str]:
    """The cuBLASLt the Python runtime loads (nvmath-python's), named to the C runtime, so that
    both run the same GEMM kernels."""
    import nvmath.bindings.cublasLt as library

    library.get_version()  # loads it
    with open("/proc/self/maps") as maps:
        found = [line.split()[-1] for line in maps if "libcublasLt.so" in line]
    return {"PIPEC_CUBLASLT_LIBRARY": found[0]} if found else {}


def _run(command: list[str]) -> tuple[float, str]:
    """Runs one replay; its steps/s and the diagnostics line that follows its summary (piperun
    prints more around them: the device, where it saved the state)."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **_cublaslt(), "PIPEC_NO_CACHE": "1"})
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout}{done.stderr}"
    lines = [line.split(": ", 1)[1] for line in done.stdout.splitlines() if ": " in line]
    at = next(i for i, line in enumerate(lines) if SUMMARY.search(line))
    return float(SUMMARY.search(lines[at]).group(2)), lines[at + 1]


def _state(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(folder / "state.safetensors")


@pytest.mark.skipif(not BINARY.is_file(), reason=f"no Rust example binary at {BINARY}: build it with cargo "
                    "where cargo is installed and carry it (or set PIPEC_RUST_RUN_BUNDLE)")
@pytest.mark.parametrize("name", ["rl_step", "c51_step"])
def test_the_rust_example_replays_bit_identical_to_piperun(name, tmp_path):
    bundle = tmp_path / "bundle"
    build = subprocess.run([sys.executable, "-m", "pipec.compiler.cli", "build", str(ROOT / "pipelines" / f"{name}.pipe"),
                            "-o", str(bundle), "--arch", device_arch()], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    steps = STEPS[name]
    rates: dict[str, list[float]] = {"rust": [], "piperun": []}
    diagnostics: dict[str, str] = {}
    for round_ in range(ROUNDS):
        for runner in rates:
            state = tmp_path / f"{runner}-{round_}"
            common = [str(bundle), "--steps", str(steps), "--log-every", str(LOG_EVERY), "--save-state", str(state)]
            command = ([str(BINARY), *common] if runner == "rust"
                       else [sys.executable, "-m", "pipec.runtime.cli", *common, "--no-progress"])
            rate, line = _run(command)
            rates[runner].append(rate)
            diagnostics.setdefault(runner, line)
    rust, python = _state(tmp_path / "rust-0"), _state(tmp_path / "piperun-0")
    assert sorted(rust) == sorted(python)
    differing = [key for key in python if rust[key].dtype != python[key].dtype
                 or rust[key].tobytes() != python[key].tobytes()]
    assert not differing, f"buffers differ after {steps} steps: {differing}"
    assert diagnostics["rust"] == diagnostics["piperun"]
    figures = {"pipe": name, "steps": steps, "rust_steps_per_s": max(rates["rust"]),
               "piperun_steps_per_s": max(rates["piperun"]), "rounds": rates}
    print(json.dumps(figures))
    if os.environ.get("OUT"):
        with open(Path(os.environ["OUT"]) / "rust_example_gpu.json", "a") as f:
            f.write(json.dumps(figures) + "\n")
    # The same graph on the same GPU: the rates agree but for run-to-run noise (a few percent
    # on rl_step's 30 us steps, see test_native_gpu.py)
    assert max(rates["rust"]) >= 0.95 * max(rates["piperun"]), figures
