"""A bundle: a checked plan with everything a runtime needs to run it without the compiler.

    DIR/manifest.json                 the format, its version, the reader range, the archs and
                                      the sha256 of every other file
    DIR/plan.json                     what `pipec --emit plan` writes
    DIR/modules/<index>.<arch>.cubin  each plan module for each target architecture
    DIR/modules/<index>.ptx           its PTX for the oldest target, for any newer device
    DIR/buffers/<name>.bin            the initial bytes of every buffer the host cannot set with
                                      one memset (random and loaded values)
    DIR/gemm_algorithms.json          the GEMM algorithms chosen on GPUs, when given
                                      (`--gemm-algorithms`, plan/gemm_algorithms.py)

The C runtime (native/) and the Python runtime (`pipec.load_bundle`) read the same files; the
same plan and architectures give the same bytes. docs/native.md describes every file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from .._version import __version__
from ..plan.bundle_format import (
    FORMAT, FORMAT_VERSION, GEMM_ALGORITHMS, MANIFEST, PLAN, BundleError, buffer_path, cubin_path, readers,
    initial_bytes_expected, ptx_path, virtual_arch,
)
from ..plan.gemm_algorithms import GemmAlgorithms, bundle_text
from ..plan.initial_values import initial_array
from ..plan.schema import BufferSpec, Plan
from .artifacts import module_binaries
from .emit import plan_json


def initial_bytes(spec: BufferSpec) -> bytes | None:
    """The bytes the Python runtime uploads into the buffer at load, or None where it sets the
    buffer with a memset (zeros, uninit, fill): random values from their seed, loaded files
    converted to the buffer's type."""
    if not initial_bytes_expected(spec):
        return None
    return initial_array(spec).tobytes()


def bundle_files(plan: Plan, archs: tuple[str, ...], gemm_algorithms: tuple[GemmAlgorithms, ...] = ()) \
        -> dict[str, bytes]:
    """Every file of the bundle but the manifest, by path. Raises CompileFailed when a module
    does not compile for one of `archs`. `gemm_algorithms` were checked against the plan."""
    files = {PLAN: plan_json(plan).encode()}
    if gemm_algorithms:
        files[GEMM_ALGORITHMS] = bundle_text(gemm_algorithms)
    for arch in archs:
        for index, binary in enumerate(module_binaries(plan, arch)):
            files[cubin_path(index, arch)] = binary
    for index, ptx in enumerate(module_binaries(plan, virtual_arch(archs), "ptx")):
        files[ptx_path(index)] = ptx
    for spec in plan.buffers:
        if (data := initial_bytes(spec)) is not None:
            files[buffer_path(spec.name)] = data
    return files


def manifest(files: dict[str, bytes], plan: Plan, source: str, archs: tuple[str, ...]) -> bytes:
    data = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "readers": list(readers(plan)),
        "pipec_version": plan.pipec_version or __version__, "source": source, "archs": list(archs),
        "files": {path: "sha256:" + hashlib.sha256(content).hexdigest() for path, content in files.items()},
    }
    return (json.dumps(data, sort_keys=True, indent=1) + "\n").encode()


def write_bundle(plan: Plan, archs: tuple[str, ...], directory: Path, source: str,
                 gemm_algorithms: tuple[GemmAlgorithms, ...] = ()) -> None:
    """Build the bundle of `plan` for `archs` into `directory`, with the GEMM algorithms chosen
    on GPUs (checked against the plan: `gemm_algorithms.check_for_plan`): written into a
    temporary folder beside it and renamed into place, so a failure leaves no half-written
    bundle. An existing bundle there is replaced; any other existing folder or file is refused."""
    if not archs:
        raise BundleError("a bundle needs at least one target architecture (--arch)")
    if len(set(archs)) != len(archs):
        raise BundleError(f"an architecture is given twice: {', '.join(archs)}")
    directory = Path(directory)
    _check_replaceable(directory)
    files = bundle_files(plan, archs, gemm_algorithms)
    files_and_manifest = {**files, MANIFEST: manifest(files, plan, source, archs)}
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    except OSError as error:
        raise BundleError(f"cannot write {directory}: {error.strerror or error}") from None
    try:
        for path, content in sorted(files_and_manifest.items()):
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        staging.chmod(0o755)  # mkdtemp's folder is private; a bundle is read by others too
        _replace(staging, directory)
    except OSError as error:
        raise BundleError(f"cannot write {directory}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_replaceable(directory: Path) -> None:
    if directory.is_dir() and any(directory.iterdir()) and not (directory / MANIFEST).is_file():
        raise BundleError(f"{directory} exists and is not a bundle (it has no {MANIFEST}); "
                          "choose another folder or remove it")
    if directory.exists() and not directory.is_dir():
        raise BundleError(f"{directory} exists and is not a folder")


def _replace(staging: Path, directory: Path) -> None:
    """Move `staging` to `directory`; an old bundle there is moved aside first and removed
    after, so the folder holds the old bundle or the new one at every moment but between the
    two renames."""
    if not directory.exists():
        os.replace(staging, directory)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=directory.parent))
    os.replace(directory, old / "bundle")
    try:
        os.replace(staging, directory)
    except OSError:
        os.replace(old / "bundle", directory)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
