"""GEMM nodes through cuBLASLt: one `cublasLtMatmul` per node, described once, with one
algorithm chosen once per pipeline.

The library is NVIDIA's nvmath-python low-level binding `nvmath.bindings.cublasLt`: every
function takes raw pointers (`intptr_t`), which is what pipec's buffers at fixed addresses
are, so no array library stands between a plan and the call. `GemmSettings.library` swaps it
(the CPU tests pass tests/fake_cublaslt.py), as `Driver` swaps the CUDA driver.

The mapping (docs/plan.md, "GEMM nodes"): a plan states a GEMM in row-major program terms,
c = op(a) @ op(b), op(a) m x k. A row-major matrix with leading dimension ld is the
column-major transpose with the same ld, so the node is cuBLASLt's column-major
c^T = op(b)^T @ op(a)^T: cuBLASLt's A is the program's b, its B the program's a, its m the
program's n and its n the program's m; the transposes carry over unchanged, every layout is
(rows = the program's cols, cols = the program's rows, ld). Bias per column of the program's c
is per row of cuBLASLt's D: its BIAS; the row sums of op(a) (bgrad_a) are its BGRADB.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..plan.gemm_algorithms import GemmAlgorithms
from ..plan.schema import GemmNodeSpec, MatrixSpec
from ..errors import Error
from .memory import BufferSet

# C ABI constants of library_types.h and cublas_api.h (the cuBLASLt binding has no enums for them).
CUDA_DATA_TYPES = {"f32": 0, "f16": 2, "bf16": 14}  # CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
COMPUTE_TYPES = {"f32": 68, "tf32": 77}  # CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_TF32
SCALE_TYPE = CUDA_DATA_TYPES["f32"]  # alpha and beta are f32 for every supported type
OPERATIONS = {False: 0, True: 1}  # CUBLAS_OP_N, CUBLAS_OP_T
# The heuristic assumes 256-byte aligned operands unless told; pipec tells it the truth.
MAX_ALIGNMENT = 256

_FORWARD = {"none": "DEFAULT", "relu": "RELU", "gelu": "GELU", "bias": "BIAS", "relu_bias": "RELU_BIAS",
            "gelu_bias": "GELU_BIAS"}
_WITH_AUX = {"RELU": "RELU_AUX", "GELU": "GELU_AUX", "RELU_BIAS": "RELU_AUX_BIAS", "GELU_BIAS": "GELU_AUX_BIAS"}


class GemmError(Error):
    """A GEMM node cannot run: no cuBLASLt, a descriptor the library cannot serve, a failed call.
    The message names the node and its `.pipe` location."""


@dataclass(frozen=True)
class GemmSettings:
    """How a pipeline realises its GEMM nodes. `library`: `nvmath.bindings.cublasLt` or a
    stand-in (None: imported when a plan has a GEMM node). `cache`: the folder where chosen
    algorithms are kept across runs (None: chosen afresh by each pipeline). `tune`: time the
    heuristic's best candidates on the GPU and keep the fastest, instead of its first.
    `stored`: a bundle's GEMM algorithms (none: an empty tuple), used by the rule both runtimes
    follow instead of the cache; None for a pipeline that is not a bundle's."""

    library: Any = None
    cache: Path | None = None
    tune: bool = False
    stored: tuple[GemmAlgorithms, ...] | None = None


def cublaslt():
    try:
        import nvmath.bindings.cublasLt as library
    except ImportError as error:
        raise GemmError(f"GEMM nodes need nvmath-python and cuBLAS ({error}); install `pipec[gemm12]` "
                        "or `pipec[gemm13]`") from None
    return library


@dataclass(frozen=True)
class Layout:
    """One operand's `cublasLtMatrixLayout_t`, column-major."""
    dtype: str
    rows: int
    cols: int
    ld: int
    batch: int
    batch_stride: int  # elements; 0 with batch > 1: one matrix for every batch entry


@dataclass(frozen=True)
class LtGemm:
    """A GEMM node in cuBLASLt's terms, without addresses: everything the algorithm depends on
    (the algorithm cache's key). `a` and `b` are cuBLASLt's A and B (the program's b and a);
    `c` is the layout of both C and D."""
    compute: str
    trans_a: bool
    trans_b: bool
    a: Layout
    b: Layout
    c: Layout
    epilogue: str  # the cublasLtEpilogue_t name
    vector_dtype: str | None  # the bias or bias gradient's type
    vector_batch_stride: int
    aux_ld: int | None  # elements of c (bits, for a ReLU mask)
    aux_batch_stride: int
    workspace_bytes: int
    alignments: tuple[int, int, int, int]  # bytes: A, B, C, D

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def describe(node: GemmNodeSpec) -> str:
    return f"gemm `{node.name}` ({node.location})"


def epilogue_name(node: GemmNodeSpec) -> str:
    """The cuBLASLt epilogue realising the node's epilogue, its aux and its bias gradient."""
    if node.epilogue in ("drelu", "dgelu"):
        if node.aux is None:
            raise GemmError(f"{describe(node)}: `{node.epilogue}` reads the forward pass's aux, and none is given")
        return node.epilogue.upper() + ("_BGRAD" if node.bias_grad is not None else "")
    if node.epilogue == "bgrad_a":
        return "BGRADB"
    name = _FORWARD[node.epilogue]
    if node.aux is None:
        return name
    if name not in _WITH_AUX:
        raise GemmError(f"{describe(node)}: the epilogue `{node.epilogue}` stores no aux")
    return _WITH_AUX[name]


def _layout(matrix: MatrixSpec, batch: int) -> Layout:
    return Layout(matrix.dtype, matrix.cols, matrix.rows, matrix.ld, batch, matrix.batch_stride)


def alignment(pointer: int) -> int:
    """The largest power of two (up to 256) that divides the address."""
    return min(MAX_ALIGNMENT, pointer & -pointer) if pointer else MAX_ALIGNMENT


def lt_gemm(node: GemmNodeSpec, buffers: BufferSet) -> LtGemm:
    vector = node.bias if node.bias is not None else node.bias_grad
    aux = node.aux
    pointers = (buffers.pointer(node.b.buffer, node.b.byte_offset), buffers.pointer(node.a.buffer, node.a.byte_offset),
                buffers.pointer(node.c.buffer, node.c.byte_offset))
    return LtGemm(
        node.compute, node.trans_b, node.trans_a, _layout(node.b, node.batch), _layout(node.a, node.batch),
        _layout(node.c, node.batch), epilogue_name(node),
        vector.dtype if vector is not None else None, vector.batch_stride if vector is not None else 0,
        aux.ld if aux is not None else None, aux.batch_stride if aux is not None else 0,
        node.workspace_bytes, (alignment(pointers[0]), alignment(pointers[1]), alignment(pointers[2]),
                               alignment(pointers[2])))


# Attribute value types (cublasLt.h): the descriptor's, the layouts' and the preference's.
_DESC_TYPES = {"COMPUTE_TYPE": np.int32, "SCALE_TYPE": np.int32, "TRANSA": np.int32, "TRANSB": np.int32,
               "EPILOGUE": np.uint32, "BIAS_POINTER": np.uint64, "BIAS_BATCH_STRIDE": np.int64,
               "BIAS_DATA_TYPE": np.int32, "EPILOGUE_AUX_POINTER": np.uint64, "EPILOGUE_AUX_LD": np.int64,
               "EPILOGUE_AUX_BATCH_STRIDE": np.int64}
_LAYOUT_TYPES = {"BATCH_COUNT": np.int32, "STRIDED_BATCH_OFFSET": np.int64}
PREFERENCE_TYPES = {"MAX_WORKSPACE_BYTES": np.uint64, "MIN_ALIGNMENT_A_BYTES": np.uint32,
                    "MIN_ALIGNMENT_B_BYTES": np.uint32, "MIN_ALIGNMENT_C_BYTES": np.uint32,
                    "MIN_ALIGNMENT_D_BYTES": np.uint32}


def set_attribute(setter, obj, enum, types: dict, name: str, value) -> None:
    """`setter(obj, attribute, &value, sizeof value)`, the value in the attribute's C type."""
    data = np.array([value], dtype=types[name])
    setter(obj, getattr(enum, name), data.ctypes.data, data.itemsize)


class GemmOp:
    """One node's `cublasLtMatmul`, ready to enqueue on any stream: its descriptor, layouts,
    operand addresses, host alpha and beta (kept alive: cuBLASLt reads them at each call, and a
    recorded call keeps the values it read), and the algorithm once chosen."""

    def __init__(self, library, handle, node: GemmNodeSpec, buffers: BufferSet, success) -> None:
        self.library, self.handle, self.node, self.success = library, handle, node, success
        self.what = describe(node)
        self.problem = lt_gemm(node, buffers)
        self.algorithm: np.ndarray | None = None  # the 64-byte cublasLtMatmulAlgo_t
        self.alpha = np.array([node.alpha], np.float32)
        self.beta = np.array([node.beta], np.float32)
        pointer = lambda m: buffers.pointer(m.buffer, m.byte_offset) if m is not None else 0
        self.a, self.b, self.c = pointer(node.b), pointer(node.a), pointer(node.c)
        self.workspace = buffers.pointer(node.workspace)
        self.descriptor = None
        self.layouts: list = []
        try:
            self._describe(node, pointer)
        except GemmError:
            self.close()
            raise

    def _call(self, function: str, *args):
        try:
            return getattr(self.library, function)(*args)
        except self.library.cuBLASLtError as error:
            raise GemmError(f"{self.what}: {function} failed: {error}") from None

    def _describe(self, node: GemmNodeSpec, pointer) -> None:
        lib, problem = self.library, self.problem
        self.descriptor = self._call("matmul_desc_create", COMPUTE_TYPES[problem.compute], SCALE_TYPE)

        def desc(name: str, value) -> None:
            set_attribute(lambda *a: self._call("matmul_desc_set_attribute", *a), self.descriptor,
                          lib.MatmulDescAttribute, _DESC_TYPES, name, value)

        desc("TRANSA", OPERATIONS[problem.trans_a])
        desc("TRANSB", OPERATIONS[problem.trans_b])
        desc("EPILOGUE", int(getattr(lib.Epilogue, problem.epilogue)))
        vector = node.bias if node.bias is not None else node.bias_grad
        if vector is not None:
            desc("BIAS_POINTER", pointer(vector))
            desc("BIAS_DATA_TYPE", CUDA_DATA_TYPES[vector.dtype])
            desc("BIAS_BATCH_STRIDE", problem.vector_batch_stride)
        if node.aux is not None:
            desc("EPILOGUE_AUX_POINTER", pointer(node.aux))
            desc("EPILOGUE_AUX_LD", problem.aux_ld)
            desc("EPILOGUE_AUX_BATCH_STRIDE", problem.aux_batch_stride)
        for layout in (problem.a, problem.b, problem.c):
            self.layouts.append(self._call("matrix_layout_create", CUDA_DATA_TYPES[layout.dtype],
                                           layout.rows, layout.cols, layout.ld))
            if layout.batch > 1:
                for name, value in (("BATCH_COUNT", layout.batch), ("STRIDED_BATCH_OFFSET", layout.batch_stride)):
                    set_attribute(lambda *a: self._call("matrix_layout_set_attribute", *a), self.layouts[-1],
                                  lib.MatrixLayoutAttribute, _LAYOUT_TYPES, name, value)

    @property
    def operation(self) -> tuple:
        """The descriptor and the layouts of A, B, C and D, as the heuristic takes them."""
        a, b, c = self.layouts
        return (self.descriptor, a, b, c, c)

    def enqueue(self, stream, algorithm: np.ndarray | None = None) -> tuple:
        """The matmul on `stream` (a CUstream or raw handle) with the chosen algorithm (or
        `algorithm`); returns `(CUDA_SUCCESS,)` like a driver call."""
        algo = self.algorithm if algorithm is None else algorithm
        assert algo is not None, "the algorithm is chosen before the first call"
        descriptor, a, b, c, d = self.operation
        self._call("matmul", self.handle, descriptor, self.alpha.ctypes.data, self.a, a, self.b, b,
                   self.beta.ctypes.data, self.c, c, self.c, d, algo.ctypes.data, self.workspace,
                   self.node.workspace_bytes, int(stream))
        return (self.success,)

    def close(self) -> None:
        for layout in self.layouts:
            self.library.matrix_layout_destroy(layout)
        self.layouts.clear()
        if self.descriptor is not None:
            self.library.matmul_desc_destroy(self.descriptor)
            self.descriptor = None
