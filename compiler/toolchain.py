"""Compiling CUDA sources: NVRTC from pip (the default, no CUDA toolkit needed) or nvcc.

Both produce PTX for analysis (with line info) and cubin for the runtime. Compile errors come
back as `CompileFailed` with the compiler's log; a missing compiler as `ToolchainUnavailable`.
NVRTC gets the CUDA runtime and CCCL headers of its own version (cuda_headers); each compiler
names the folders of its own headers (`system_headers`), whose lines a finding's chain skips.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from ..errors import Error
from . import cuda_headers


class ToolchainUnavailable(Error):
    pass


class CompileFailed(Error):
    def __init__(self, log: str, command: str, advice: str | None = None) -> None:
        super().__init__(log)
        self.log = log
        self.command = command
        self.advice = advice  # what to install when a CUDA header could not be included


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
    """NVRTC through its C API (ctypes), found by cuda-pathfinder in the pip wheel or the
    toolkit. Nothing here imports a GPU runtime or needs a driver."""

    name = "nvrtc"

    @cached_property
    def library_path(self) -> str:
        try:
            from cuda.pathfinder import DynamicLibNotFoundError, load_nvidia_dynamic_lib
        except ImportError as error:
            raise ToolchainUnavailable(
                "cuda-pathfinder is not installed, so NVRTC cannot be found; install `pipec[nvrtc12]` "
                "or `pipec[nvrtc13]` (checking needs nothing else), or set `compiler = \"nvcc\"`") from error
        try:
            loaded = load_nvidia_dynamic_lib("nvrtc")
        except DynamicLibNotFoundError as error:
            raise ToolchainUnavailable(
                f"NVRTC is not installed ({str(error).splitlines()[0]}); install `pipec[nvrtc12]` or "
                "`pipec[nvrtc13]` (checking needs nothing else), or set `compiler = \"nvcc\"`") from error
        return loaded.abs_path

    @cached_property
    def _lib(self) -> ctypes.CDLL:
        lib = ctypes.CDLL(self.library_path)
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        return lib

    @cached_property
    def version(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self._lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return f"nvrtc-{major.value}.{minor.value}"

    @cached_property
    def cuda_headers(self) -> cuda_headers.CudaHeaders:
        return cuda_headers.find(self.version.removeprefix("nvrtc-"))

    @property
    def system_headers(self) -> tuple[Path, ...]:
        return self.cuda_headers.folders

    @cached_property
    def supported_archs(self) -> tuple[str, ...]:
        """The real architectures this NVRTC can target, oldest first (`sm_50`, ...)."""
        count = ctypes.c_int()
        self._check(self._lib.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
        archs = (ctypes.c_int * count.value)()
        self._check(self._lib.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
        return tuple(f"sm_{arch}" for arch in archs)

    def compile(self, request: CompileRequest) -> bytes:
        lib = self._lib
        program = ctypes.c_void_p()
        self._check(lib.nvrtcCreateProgram(ctypes.byref(program), request.source.encode(),
                                           request.name.encode(), 0, None, None), "nvrtcCreateProgram")
        try:
            options = request.options() + [f"-I{d}" for d in self.system_headers]
            array = (ctypes.c_char_p * len(options))(*(o.encode() for o in options))
            if lib.nvrtcCompileProgram(program, len(options), array) != 0:
                log = self._log(program)
                missing = cuda_headers.MISSING_INCLUDE.search(log)
                raise CompileFailed(log, "NVRTC " + " ".join([request.name, *options]),
                                    self.cuda_headers.advice(missing.group(1)) if missing else None)
            kind = "PTX" if request.target == "ptx" else "CUBIN"
            size = ctypes.c_size_t()
            self._check(getattr(lib, f"nvrtcGet{kind}Size")(program, ctypes.byref(size)), f"nvrtcGet{kind}Size")
            out = ctypes.create_string_buffer(size.value)
            self._check(getattr(lib, f"nvrtcGet{kind}")(program, out), f"nvrtcGet{kind}")
            return out.raw.rstrip(b"\0") if request.target == "ptx" else out.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(program))

    def _log(self, program) -> str:
        size = ctypes.c_size_t()
        self._lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        self._lib.nvrtcGetProgramLog(program, log)
        return log.value.decode(errors="replace")

    def _check(self, result: int, call: str) -> None:
        if result != 0:
            raise CompileFailed(f"{call} failed: {self._lib.nvrtcGetErrorString(result).decode()}", call)


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

    @cached_property
    def system_headers(self) -> tuple[Path, ...]:
        """The toolkit nvcc belongs to (`TOP` in its dry run: a wrapper script may call it)."""
        out = subprocess.run([self.executable, "--dryrun", "-E", "-x", "cu", os.devnull], capture_output=True, text=True)
        top = re.search(r"^#\$ TOP=(.*)$", out.stdout + out.stderr, re.M)
        return (Path(top.group(1).strip()).resolve(),) if top else ()

    def compile(self, request: CompileRequest) -> bytes:
        with tempfile.TemporaryDirectory(prefix="pipec-") as tmp:
            src = Path(tmp) / Path(request.name).name
            # The line info and the messages name the real file, not this copy.
            name = request.name.replace("\\", "\\\\").replace('"', '\\"')
            src.write_text(f'#line 1 "{name}"\n{request.source}')
            out = Path(tmp) / f"out.{request.target}"
            cmd = [self.executable, f"-{request.target}", *request.options(), str(src), "-o", str(out)]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                log = (proc.stderr + proc.stdout).replace(str(src), request.name)
                raise CompileFailed(log, " ".join(cmd))
            return out.read_bytes()


@cache
def get_toolchain(name: str):
    if name == "nvrtc":
        return Nvrtc()
    if name == "nvcc":
        return Nvcc()
    raise ToolchainUnavailable(f"unknown compiler `{name}` (choose `nvrtc` or `nvcc`)")
