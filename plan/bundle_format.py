"""The bundle format: the names, versions and paths that `pipec build` writes
(compiler/bundle.py) and the runtimes read (runtime/bundle.py, native/). A leaf of the compiler:
it imports only the plan, so reading a bundle never imports the compiler. docs/native.md
describes every file."""

from __future__ import annotations

import re

from ..errors import Error
from .schema import BufferSpec, Plan

FORMAT = "pipec-bundle"
FORMAT_VERSION = 2  # what this pipec writes, and the reader version it is
READERS = (1, 2)  # the reader versions that can read what this pipec writes (1 ignores the live-update record)
MANIFEST = "manifest.json"
PLAN = "plan.json"
GEMM_ALGORITHMS = "gemm_algorithms.json"  # only with `pipec build --gemm-algorithms` (plan/gemm_algorithms.py)
# Initial values a runtime sets itself, with a memset, the addresses of buffers or nothing; the
# others travel as bytes.
HOST_SET_INITS = ("zeros", "uninit", "fill", "addresses")


def readers(plan: Plan) -> tuple[int, int]:
    """The reader versions that can run `plan`'s bundle: READERS, less version 1 where a buffer
    is a table of addresses, which a reader of version 1 would leave unfilled."""
    if any(spec.init.kind == "addresses" for spec in plan.buffers):
        return (2, READERS[1])
    return READERS


class BundleError(Error):
    """A bundle cannot be written, or is not one this runtime can run; the message says which
    file and why."""


def cubin_path(module: int, arch: str) -> str:
    return f"modules/{module}.{arch}.cubin"


def ptx_path(module: int) -> str:
    return f"modules/{module}.ptx"


def buffer_path(name: str) -> str:
    return f"buffers/{name}.bin"


def arch_number(arch: str) -> int:
    """`sm_90a` -> 90."""
    match = re.fullmatch(r"sm_(\d+)[af]?", arch)
    if match is None:
        raise BundleError(f"`{arch}` is not an architecture of the form sm_XY")
    return int(match.group(1))


def virtual_arch(archs: tuple[str, ...]) -> str:
    """The PTX target: the oldest of `archs` without its `a`/`f` suffix (whose code runs on
    that one device family only), so the driver can compile it for every newer device."""
    return f"compute_{min(arch_number(arch) for arch in archs)}"


def initial_bytes_expected(spec: BufferSpec) -> bool:
    """Whether the bundle holds the buffer's initial bytes (buffers/NAME.bin)."""
    return spec.init.kind not in HOST_SET_INITS
