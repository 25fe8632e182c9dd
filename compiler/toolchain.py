"""Compiling CUDA sources: NVRTC from pip (the default, no CUDA toolkit needed) or nvcc.

Both produce PTX for analysis (with line info) and cubin for the runtime. Compile errors come
back as `CompileFailed` with the compiler's log; a missing compiler as `ToolchainUnavailable`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path


class ToolchainUnavailable(Exception):
    pass


class CompileFailed(Exception):
    def __init__(self, log: str, command: str) -> None:
        super().__init__(log)
        self.log = log
        self.command = command


@dataclass(frozen=True)
class CompileRequest:
    source: str  # the text to compile
    name: str  # the path reported in diagnostics and line info
    include_dirs: tuple[Path, ...]
    arch: str  # compute_90 for PTX, sm_90 for cubin
    target: str  # "ptx" or "cubin"
    defines: tuple[str, ...] = ()

    def options(self) -> list[str]:
        opts = [f"--gpu-architecture={self.arch}", "-std=c++17", "-lineinfo"]
        opts += [f"-I{d}" for d in self.include_dirs]
        opts += [f"-D{d}" for d in self.defines]
        return opts


class Nvrtc:
    name = "nvrtc"

    @cached_property
    def _nvrtc(self):
        try:
            from cuda.bindings import nvrtc
        except ImportError as error:
            raise ToolchainUnavailable(
                "NVRTC is not installed (the `cuda.bindings` package is missing); "
                "install `pipec[cu12]` or `pipec[cu13]`, or set `compiler = \"nvcc\"`"
            ) from error
        return nvrtc

    @cached_property
    def version(self) -> str:
        try:
            err, major, minor = self._nvrtc.nvrtcVersion()
        except Exception as error:  # the shared library itself is missing
            raise ToolchainUnavailable(f"NVRTC cannot be loaded: {error}") from error
        return f"nvrtc-{major}.{minor}"

    def compile(self, request: CompileRequest) -> bytes:
        nvrtc = self._nvrtc
        _ = self.version
        err, prog = nvrtc.nvrtcCreateProgram(request.source.encode(), request.name.encode(), 0, [], [])
        self._check(err, "nvrtcCreateProgram")
        try:
            opts = [o.encode() for o in request.options()]
            (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
            if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise CompileFailed(self._log(prog), self._repro(request))
            if request.target == "ptx":
                err, size = nvrtc.nvrtcGetPTXSize(prog)
                out = b" " * size
                (err,) = nvrtc.nvrtcGetPTX(prog, out)
            else:
                err, size = nvrtc.nvrtcGetCUBINSize(prog)
                out = b" " * size
                (err,) = nvrtc.nvrtcGetCUBIN(prog, out)
            self._check(err, "nvrtcGetPTX" if request.target == "ptx" else "nvrtcGetCUBIN")
            return out.rstrip(b"\0") if request.target == "ptx" else out
        finally:
            nvrtc.nvrtcDestroyProgram(prog)

    def _log(self, prog) -> str:
        err, size = self._nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        self._nvrtc.nvrtcGetProgramLog(prog, log)
        return log.rstrip(b"\0").decode(errors="replace")

    def _check(self, err, call: str) -> None:
        if err != self._nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileFailed(f"{call} failed: {err.name}", call)

    @staticmethod
    def _repro(request: CompileRequest) -> str:
        return "NVRTC " + " ".join([request.name, *request.options()])


class Nvcc:
    name = "nvcc"

    @cached_property
    def executable(self) -> str:
        found = shutil.which("nvcc")
        if not found:
            raise ToolchainUnavailable("`nvcc` is not on the PATH; use the default NVRTC compiler")
        return found

    @cached_property
    def version(self) -> str:
        out = subprocess.run([self.executable, "--version"], capture_output=True, text=True).stdout
        match = re.search(r"release ([\d.]+), V([\d.]+)", out)
        return f"nvcc-{match.group(2) if match else out.strip().splitlines()[-1]}"

    def compile(self, request: CompileRequest) -> bytes:
        with tempfile.TemporaryDirectory(prefix="pipec-") as tmp:
            src = Path(tmp) / Path(request.name).name
            src.write_text(request.source)
            out = Path(tmp) / f"out.{request.target}"
            cmd = [self.executable, f"-{request.target}", *request.options(), str(src), "-o", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                log = (proc.stderr + proc.stdout).replace(str(src), request.name)
                raise CompileFailed(log, " ".join(cmd))
            return out.read_bytes()


def get_toolchain(name: str):
    if name == "nvrtc":
        return Nvrtc()
    if name == "nvcc":
        return Nvcc()
    raise ToolchainUnavailable(f"unknown compiler `{name}` (choose `nvrtc` or `nvcc`)")
