"""The CUDA runtime and CCCL headers NVRTC compiles against: found in the header wheels on the
Python path (CUDA 12 and 13 layouts) or through cuda-pathfinder, used only when their version
is NVRTC's, and a failed include of one of them answered with what to install."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import compile_fixture
from pipec.compiler import cuda_headers
from pipec.compiler.toolchain import CompileFailed, CompileRequest, Nvrtc, get_toolchain


def _wheel(site: Path, folder: str, marker: str, name: str, version: str) -> Path:
    include = site / folder
    (include / marker).parent.mkdir(parents=True, exist_ok=True)
    (include / marker).write_text("")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return include


@pytest.fixture
def no_toolkit(monkeypatch):
    monkeypatch.setattr(cuda_headers, "_pathfinder", lambda library: None)


def test_the_wheels_of_nvrtcs_version_are_used(tmp_path, no_toolkit):
    runtime = _wheel(tmp_path, "nvidia/cuda_runtime/include", "cuda_runtime.h", "nvidia-cuda-runtime-cu12", "12.9.79")
    cccl = _wheel(tmp_path, "nvidia/cuda_cccl/include", "cuda/std/version", "nvidia-cuda-cccl-cu12", "12.9.27")
    found = cuda_headers.find("12.9", [str(tmp_path)])
    assert found.folders == (runtime, cccl) and found.unusable == ()
    assert found.advice("cuda/atomic") is None  # both there: a missing include is the source's own


def test_cuda_13_wheels_share_one_folder(tmp_path, no_toolkit):
    runtime = _wheel(tmp_path, "nvidia/cu13/include", "cuda_runtime.h", "nvidia-cuda-runtime", "13.0.96")
    (tmp_path / "nvidia/cu13/include/cccl/cuda/std").mkdir(parents=True)
    (tmp_path / "nvidia/cu13/include/cccl/cuda/std/version").write_text("")
    info = tmp_path / "nvidia_cuda_cccl-13.0.85.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cuda-cccl\nVersion: 13.0.85\n")
    assert cuda_headers.find("13.0", [str(tmp_path)]).folders == (runtime, runtime / "cccl")


def test_headers_of_another_version_are_named_not_used(tmp_path, no_toolkit):
    _wheel(tmp_path, "nvidia/cuda_runtime/include", "cuda_runtime.h", "nvidia-cuda-runtime-cu12", "12.4.127")
    found = cuda_headers.find("12.9", [str(tmp_path)])
    assert found.folders == ()
    advice = found.advice("cooperative_groups.h")
    assert "12.4 in " in advice and "NVRTC 12.9" in advice
    assert "`nvidia-cuda-runtime-cu12==12.9.*` and `nvidia-cuda-cccl-cu12==12.9.*`" in advice
    assert found.advice("my_helpers.cuh") is None  # not a CUDA header: nothing to install


def test_a_toolkits_version_is_read_from_its_headers(tmp_path, monkeypatch):
    include = tmp_path / "cuda" / "include"
    (include / "cccl" / "cuda" / "std").mkdir(parents=True)
    (include / "cuda_runtime_api.h").write_text("#define CUDART_VERSION  13000\n")
    folders = {"cudart": include, "cccl": include / "cccl"}
    monkeypatch.setattr(cuda_headers, "_pathfinder", lambda library: (folders[library], "CUDA_HOME"))
    assert cuda_headers.find("13.0", []).folders == (include, include / "cccl")
    assert [f.version for f in cuda_headers.find("12.9", []).unusable] == ["13.0", "13.0"]


@pytest.mark.parametrize("library, version, wanted", [
    ("cudart", "12.9", "nvidia-cuda-runtime-cu12==12.9.*"), ("cccl", "12.9", "nvidia-cuda-cccl-cu12==12.9.*"),
    ("cudart", "13.0", "nvidia-cuda-runtime==13.0.*"), ("cccl", "13.1", "nvidia-cuda-cccl==13.1.*"),
])
def test_requirements_match_the_version(library, version, wanted):
    assert cuda_headers.requirement(library, version) == wanted


def test_a_failed_cuda_include_says_what_to_install(tmp_path, no_toolkit):
    nvrtc = Nvrtc()
    nvrtc.cuda_headers = cuda_headers.find(nvrtc.version.removeprefix("nvrtc-"), [str(tmp_path)])
    source = "#include <cuda/atomic>\nextern \"C\" __global__ void k() {}\n"
    with pytest.raises(CompileFailed) as failure:
        nvrtc.compile(CompileRequest(source, str(tmp_path / "k.cu"), (), "compute_90", "ptx"))
    assert "has no CUDA headers to include `cuda/atomic` from; install `nvidia-cuda-runtime" in failure.value.advice


def test_the_diagnostic_carries_the_advice(tmp_path, monkeypatch, no_toolkit):
    nvrtc = get_toolchain("nvrtc")
    monkeypatch.setattr(nvrtc, "cuda_headers", cuda_headers.find(nvrtc.version.removeprefix("nvrtc-"), []))
    (tmp_path / "k.cu").write_text("#include <cooperative_groups.h>\nextern \"C\" __global__ void k(float* x) {}\n")
    (tmp_path / "p.pipe").write_text('from "k.cu" import k\nbuffer x: f32[4]\nstep {\n    launch k<<<1, 4>>>(x)\n}\n')
    actual, result = compile_fixture(tmp_path / "p.pipe")
    assert ("k.cu", 1, "PC106") in actual
    [diagnostic] = [d for d in result.diagnostics if d.code == "PC106"]
    assert diagnostic.hint.startswith(f"NVRTC {nvrtc.version.removeprefix('nvrtc-')} has no CUDA headers")
