"""The set-up a user gets: the shipped kernel folder on the include path, and (marked `wheel`,
minutes, run by `.ci/run`) the sdist and wheel built as a release builds them, the wheel's exact
contents, and `pipec --check` from a fresh environment outside the repository."""

from __future__ import annotations

import os
import subprocess
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from pipec.compiler import Settings, compile_file, load_settings
from pipec.compiler.config import SHIPPED_KERNELS, override
from pipec.compiler.config import CompileOptions

ROOT = Path(__file__).resolve().parent.parent

# A user's kernel outside the repository that relies on the shipped header.
USER_KERNEL = """\
#include "common.cuh"

/// pipec: extent y = n
/// pipec: out y
extern "C" __global__ void fill(float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = pipec_u01f((unsigned int)i);
}
"""
USER_PIPELINE = """\
from "fill.cu" import fill

const N = 1024

buffer y: f32[N] = uninit

step {
    launch fill<<<4, 256>>>(out y, N)
}
"""


def write_user_project(folder: Path) -> Path:
    (folder / "fill.cu").write_text(USER_KERNEL)
    (folder / "user.pipe").write_text(USER_PIPELINE)
    return folder / "user.pipe"


def test_a_kernel_outside_the_repository_includes_the_shipped_header(tmp_path):
    pipe = write_user_project(tmp_path)
    codes = [d.code for d in compile_file(pipe, load_settings(pipe)).diagnostics]
    assert codes == []
    without = Settings(compile=CompileOptions(include_dirs=()))
    assert "PC106" in [d.code for d in compile_file(pipe, without).diagnostics]


def test_the_shipped_kernels_come_after_the_users_folders(tmp_path):
    settings = override(Settings(), include_dirs=[tmp_path, SHIPPED_KERNELS])
    assert settings.compile.include_dirs == (tmp_path, SHIPPED_KERNELS)


# ---- the built distributions (slow: builds, and installs NVRTC from the package index) ----

def _run(*command, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _fresh_venv(folder: Path) -> Path:
    venv.create(folder, with_pip=True)
    return folder / "bin"


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path]:
    """The sdist, and the wheel built from it (so the sdist is proved complete)."""
    work = tmp_path_factory.mktemp("dist")
    tools = _fresh_venv(work / "build-env")
    _run(tools / "python", "-m", "pip", "install", "-q", "build", cwd=work)
    _run(tools / "python", "-m", "build", "--outdir", work / "out", ROOT, cwd=work)
    (sdist,), (wheel,) = sorted((work / "out").glob("*.tar.gz")), sorted((work / "out").glob("*.whl"))
    return sdist, wheel


def _expected_wheel_files() -> set[str]:
    """Every file of the code folders (modules and the data they read), the shipped kernels and
    pipelines, and the package face."""
    code = [p for folder in ("cli", "dsl", "compiler", "plan", "runtime") for p in (ROOT / folder).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts]
    shipped = [p for pattern in ("kernels/*.cu", "kernels/*.cuh", "pipelines/**/*.pipe") for p in ROOT.glob(pattern)]
    files = {p.relative_to(ROOT).as_posix() for p in code + shipped}
    face = {"__init__.py", "__main__.py", "_version.py", "errors.py", "api_arguments.py", "files.py", "wording.py",
            "py.typed"}
    return {f"pipec/{f}" for f in files | face}


@pytest.mark.wheel
def test_the_wheel_carries_every_module_and_data_file_and_nothing_else(dists):
    names = set(zipfile.ZipFile(dists[1]).namelist())
    package = {n for n in names if n.startswith("pipec/")}
    expected = _expected_wheel_files()
    assert package == expected, (f"missing from the wheel: {sorted(expected - package)}\n"
                                 f"not expected in the wheel: {sorted(package - expected)}")
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    metadata = zipfile.ZipFile(dists[1]).read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    assert b"License-Expression: Apache-2.0" in metadata


@pytest.mark.wheel
def test_the_sdist_carries_the_tests_and_what_they_read(dists):
    with tarfile.open(dists[0]) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    needed = ["tests/conftest.py", "tests/fixtures/stage_kernels.cu", "docs/rules.md", "bench/torch_dqn.py",
              "LICENSE", "README.md", "setup.py", "pyproject.toml"]
    needed += [p.relative_to(ROOT).as_posix() for p in (ROOT / "compiler" / "explanations" / "examples").glob("*.pipe")]
    needed += [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "corpus").rglob("*.cu")]
    assert [n for n in needed if n not in names] == []


@pytest.mark.wheel
def test_the_installed_wheel_checks_pipelines_from_outside_the_repository(dists, tmp_path):
    bin_dir = _fresh_venv(tmp_path / "user-env")
    _run(bin_dir / "python", "-m", "pip", "install", "-q", f"{dists[1]}[nvrtc12]", "pygments", cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the installed pipec
    where = _run(bin_dir / "python", "-c", "import pipec, pathlib; print(pathlib.Path(pipec.__file__).parent)",
                 cwd=tmp_path, env=env).strip()
    assert Path(where).is_relative_to(tmp_path / "user-env"), where
    _run(bin_dir / "pipec", "--check", Path(where) / "pipelines", cwd=tmp_path, env=env)
    project = tmp_path / "project"
    project.mkdir()
    _run(bin_dir / "pipec", "--check", write_user_project(project).name, cwd=project, env=env)
    # Pygments finds the `.pipe` lexer through the installed entry point (docs/editors.md)
    found = _run(bin_dir / "python", "-c", "from pygments.lexers import get_lexer_by_name, get_lexer_for_filename; "
                 "print(get_lexer_by_name('pipe').name, get_lexer_for_filename('step.pipe').name)", cwd=tmp_path, env=env)
    assert found.split() == ["pipe", "pipe"]

