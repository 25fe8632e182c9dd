"""The CUDA runtime and CUDA C++ library (CCCL) headers NVRTC compiles against.

NVRTC from pip ships no headers beyond its built-ins, so `<cooperative_groups.h>`,
`<cuda/atomic>` or `<cuda/std/atomic>` need the headers a user's machine has: the header wheels
(`nvidia-cuda-runtime-cu12` and `nvidia-cuda-cccl-cu12` for CUDA 12, `nvidia-cuda-runtime` and
`nvidia-cuda-cccl` for CUDA 13) anywhere on the Python path, or else what cuda-pathfinder finds
(a conda environment, `CUDA_HOME`, a toolkit). Headers of another CUDA version than the NVRTC in
use do not compile (the runtime headers use built-ins of their own release), so only headers of
NVRTC's major.minor version are used; the others are named in the advice a failed include gets.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# Per library: the file that marks its folder, the folders its wheels install and the wheels
# (CUDA 12, CUDA 13).
LIBRARIES = {
    "cudart": ("cuda_runtime.h", ("nvidia/cuda_runtime/include", "nvidia/cu13/include"),
               ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")),
    "cccl": ("cuda/std/version", ("nvidia/cuda_cccl/include", "nvidia/cu13/include/cccl"),
             ("nvidia-cuda-cccl-cu12", "nvidia-cuda-cccl")),
}
_CUDART_VERSION = re.compile(r"#define\s+CUDART_VERSION\s+(\d+)")
# An include the compiler could not open, in NVRTC's and nvcc's words.
MISSING_INCLUDE = re.compile(r'(?:could not|cannot) open source file "([^"]+)"')
# Headers that come with CUDA rather than with the user's project.
_CUDA_HEADER = re.compile(r"^(cuda/|cub/|thrust/|nv/|cooperative_groups|cuda_|crt/|sm_\d+|mma\.h|curand)")


@dataclass(frozen=True)
class Found:
    folder: Path
    version: str | None  # CUDA major.minor, None when unknown
    origin: str  # how it was found, for messages


@dataclass(frozen=True)
class CudaHeaders:
    """The header folders to put on NVRTC's include path, and why others are not there."""

    nvrtc_version: str  # major.minor
    folders: tuple[Path, ...]
    unusable: tuple[Found, ...]  # of another CUDA version

    def advice(self, include: str) -> str | None:
        """What to do about an include that could not be opened, when it is a CUDA header."""
        if not _CUDA_HEADER.match(include) or len(self.folders) == len(LIBRARIES):
            return None
        major = self.nvrtc_version.split(".")[0]
        wheels = " and ".join(f"`{requirement(library, self.nvrtc_version)}`" for library in LIBRARIES)
        install = (f"install {wheels} (the CUDA {major} header wheels matched to NVRTC "
                   f"{self.nvrtc_version}), or a CUDA {self.nvrtc_version} toolkit")
        if self.unusable:
            found = "; ".join(f"{f.version or 'an unknown version'} in {f.folder} ({f.origin})" for f in self.unusable)
            return f"the CUDA headers found are not NVRTC {self.nvrtc_version}'s: {found}; {install}"
        return f"NVRTC {self.nvrtc_version} has no CUDA headers to include `{include}` from; {install}"


def requirement(library: str, version: str) -> str:
    """The pip requirement for a library's header wheel matched to a CUDA major.minor version."""
    cu12, cu13 = LIBRARIES[library][2]
    return f"{cu12 if version.startswith('12.') else cu13}=={version}.*"


def find(nvrtc_version: str, search_path: list[str] | None = None) -> CudaHeaders:
    """The headers of NVRTC's version (major.minor): the wheels on `search_path` (sys.path)
    first, then cuda-pathfinder's search."""
    folders, unusable = [], []
    for library in LIBRARIES:
        candidates = _candidates(library, sys.path if search_path is None else search_path)
        matching = next((c for c in candidates if c.version == nvrtc_version), None)
        if matching is not None:
            folders.append(matching.folder)
        else:
            unusable += candidates
    return CudaHeaders(nvrtc_version, tuple(folders), tuple(unusable))


def _candidates(library: str, search_path: list[str]) -> list[Found]:
    marker, wheel_folders, distributions = LIBRARIES[library]
    found = []
    for entry in search_path:
        for sub, distribution in zip(wheel_folders, distributions):
            folder = Path(entry) / sub
            if (folder / marker).is_file():
                found.append(Found(folder.resolve(), _wheel_version(Path(entry), distribution)
                                   or _runtime_version(folder), f"the {distribution} wheel in {entry}"))
    located = _pathfinder(library)
    if located is not None and all(located[0] != f.folder for f in found):
        folder = located[0]
        found.append(Found(folder, _runtime_version(folder), f"found via {located[1]}"))
    return found


def _pathfinder(library: str) -> tuple[Path, str] | None:
    try:
        from cuda.pathfinder import locate_nvidia_header_directory
    except ImportError:
        return None
    located = locate_nvidia_header_directory(library)
    if located is None or located.abs_path is None:
        return None
    return Path(located.abs_path).resolve(), located.found_via


def _wheel_version(entry: Path, name: str) -> str | None:
    """The CUDA major.minor of a header wheel installed in a Python path entry."""
    for distribution in importlib.metadata.distributions(path=[str(entry)]):
        if (distribution.metadata["Name"] or "").lower().replace("_", "-") == name:
            return ".".join(distribution.version.split(".")[:2])
    return None


def _runtime_version(folder: Path) -> str | None:
    """The CUDA major.minor of a toolkit's headers: CUDART_VERSION beside them or one folder up
    (a toolkit's CCCL lies in `include/cccl`)."""
    for candidate in (folder / "cuda_runtime_api.h", folder.parent / "cuda_runtime_api.h"):
        if candidate.is_file() and (m := _CUDART_VERSION.search(candidate.read_text(errors="replace"))):
            number = int(m.group(1))
            return f"{number // 1000}.{number % 1000 // 10}"
    return None
