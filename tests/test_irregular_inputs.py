"""A FIFO, or any other file that is not a regular one, as an input of `pipec --check`: the
FILE, a `.pipe` found in a checked folder, an import, a kernel source, a `load(...)`. Each is
refused with a one-line error naming what it is, without being read (a read of a FIFO blocks
until a writer comes: a CI job that never ends). Run in a child process with a time limit,
so a regression fails instead of hanging the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TINY = Path(__file__).resolve().parents[1] / "bench" / "tiny.cu"
REFUSED = "it is a FIFO, not a regular file; pipec reads only regular files"

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def _check(*arguments: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipec", "--check", *map(str, arguments)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_fifo_as_the_file_or_in_a_checked_folder_is_refused(tmp_path):
    os.mkfifo(tmp_path / "step.pipe")
    for target in ("step.pipe", "."):
        result = _check(target, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert f"pipec: error: cannot read step.pipe: {REFUSED}" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize("program, fifo, code", [
    ('import "shared.pipe"\nbuffer x: u32[4]\nstep {\n}\n', "shared.pipe", "PC102"),
    ('from "k.cu" import tiny\nbuffer x: u32[4]\nstep {\n    launch tiny<<<1, 32>>>(x)\n}\n', "k.cu", "PC102"),
    ('from "tiny.cu" import tiny\nbuffer x: u32[4] = load("x.npy")\nstep {\n    launch tiny<<<1, 32>>>(x)\n}\n',
     "x.npy", "PC107"),
])
def test_a_fifo_named_by_the_program_is_a_diagnostic_at_the_name(tmp_path, program, fifo, code):
    (tmp_path / "tiny.cu").write_bytes(TINY.read_bytes())
    (tmp_path / "t.pipe").write_text(program)
    os.mkfifo(tmp_path / fifo)
    result = _check("--format", "concise", "t.pipe", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    line, = (line for line in result.stdout.splitlines() if code in line)
    assert REFUSED in line and fifo in line


def test_a_regular_file_still_reads(tmp_path):
    (tmp_path / "tiny.cu").write_bytes(TINY.read_bytes())
    (tmp_path / "t.pipe").write_text('from "tiny.cu" import tiny\nbuffer x: u32[1]\nstep {\n'
                                     '    launch tiny<<<1, 32>>>(x)\n}\n')
    assert _check("t.pipe", cwd=tmp_path).returncode == 0


def test_piperun_refuses_a_fifo_as_its_file_before_looking_for_a_gpu(tmp_path):
    os.mkfifo(tmp_path / "step.pipe")
    result = subprocess.run([sys.executable, "-m", "pipec.runtime.cli", "step.pipe", "--steps", "1"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert REFUSED in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
