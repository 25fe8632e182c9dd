"""The C runtime's collectives on one GPU: native/examples/data_parallel.c creates a one-rank
NCCL communicator itself, replays the bundle of tests/fixtures/runtime/collectives.pipe (every
collective kind, grouped ones included) and saves the state; `piperun` replays the same bundle
through the Python runtime; every buffer must hold the same bits. The library and the host
program are built here with CMake; NCCL is the machine's libnccl.so.2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from native_harness import build_native, native_tools_missing
from pipec.runtime.state import _read

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(native_tools_missing() is not None, reason=native_tools_missing() or "")]

ROOT = Path(__file__).resolve().parents[2]
COLLECTIVES = ROOT / "tests" / "fixtures" / "runtime" / "collectives.pipe"
STEPS = 20


def build_bundle(pipe: Path, bundle: Path, rank: int, world_size: int) -> None:
    done = subprocess.run([sys.executable, "-m", "pipec", "build", str(pipe), "-o", str(bundle), "--arch", "sm_90",
                           "-D", f"RANK={rank}", "-D", f"WORLD_SIZE={world_size}"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def same_state(a: Path, b: Path) -> list[str]:
    """The buffers whose bits differ between two saved states."""
    (_, left), (_, right) = _read(a / "state.safetensors"), _read(b / "state.safetensors")
    assert left.keys() == right.keys()
    return [name for name in left if left[name].tobytes() != right[name].tobytes()]


def test_one_rank_from_c_matches_piperun_bit_for_bit(tmp_path):
    native = build_native(tmp_path / "build")
    build_bundle(COLLECTIVES, tmp_path / "bundle", 0, 1)
    c = subprocess.run([str(native / "data_parallel"), str(tmp_path / "bundle"), "--steps", str(STEPS),
                        "--id-file", str(tmp_path / "id"), "--save-state", str(tmp_path / "c")],
                       capture_output=True, text=True, timeout=300)
    assert c.returncode == 0, c.stderr
    python = subprocess.run([sys.executable, "-m", "pipec.runtime.cli", str(tmp_path / "bundle"), "--steps",
                             str(STEPS), "--no-progress", "--save-state", str(tmp_path / "python")],
                            capture_output=True, text=True, timeout=300)
    assert python.returncode == 0, python.stderr
    assert same_state(tmp_path / "c", tmp_path / "python") == []
    _, tensors = _read(tmp_path / "c" / "state.safetensors")
    assert np.all(tensors["x"] == 1.0) and np.all(tensors["gathered"] == 1.0)  # one rank: sums of one value
