"""A stand-in for `nvmath.bindings.cublasLt` over tests/fake_cuda.py: `GemmSettings(library=
FakeCublasLt(fake_cuda))`.

It keeps every descriptor, layout and preference with the attributes set on it (decoded from
the bytes the runtime passed, by the attribute's name), answers the heuristic with
`algorithm_count` distinct algorithms (every 64-bit word of algorithm i holds i), accepts in
`cublasLtMatmulAlgoCheck` the algorithms whose first word is one of those, saying that they need
their second word's bytes of workspace, and records each `matmul` with snapshots of what it was
called with. A matmul enqueues `recorded_kinds` on its stream (a kernel by default, so a
recording holds one kernel node): its kernel computes, in cuBLASLt's own column-major terms from
the layouts and attributes it was given, D = alpha * op(A) op(B) + beta * C for f32 operands
with the DEFAULT, BIAS, RELU and RELU_BIAS epilogues, so a wrong row-major mapping gives wrong
numbers on the CPU too. Other types and epilogues are recorded, not computed.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
from dataclasses import dataclass

import numpy as np

from fake_cuda import FakeCuda, KernelLaunch, Memcpy, Memset


STATUSES = {"CUBLAS_STATUS_INVALID_VALUE": 7, "CUBLAS_STATUS_EXECUTION_FAILED": 13, "CUBLAS_STATUS_NOT_SUPPORTED": 15}


class cuBLASLtError(Exception):  # noqa: N801 - the binding's name
    """As nvmath's: the status's name, and its number in `status`."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.status = STATUSES[name]


class MatmulDescAttribute(enum.IntEnum):
    COMPUTE_TYPE = 0
    SCALE_TYPE = 1
    TRANSA = 3
    TRANSB = 4
    EPILOGUE = 7
    BIAS_POINTER = 8
    BIAS_BATCH_STRIDE = 10
    EPILOGUE_AUX_POINTER = 11
    EPILOGUE_AUX_LD = 12
    EPILOGUE_AUX_BATCH_STRIDE = 13
    BIAS_DATA_TYPE = 26


class MatrixLayoutAttribute(enum.IntEnum):
    TYPE = 0
    ROWS = 2
    COLS = 3
    LD = 4
    BATCH_COUNT = 5
    STRIDED_BATCH_OFFSET = 6


class MatmulPreferenceAttribute(enum.IntEnum):
    MAX_WORKSPACE_BYTES = 1
    MIN_ALIGNMENT_A_BYTES = 5
    MIN_ALIGNMENT_B_BYTES = 6
    MIN_ALIGNMENT_C_BYTES = 7
    MIN_ALIGNMENT_D_BYTES = 8


class Epilogue(enum.IntEnum):
    DEFAULT = 1
    RELU = 2
    RELU_AUX = 130
    BIAS = 4
    RELU_BIAS = 6
    RELU_AUX_BIAS = 134
    DRELU = 136
    DRELU_BGRAD = 152
    GELU = 32
    GELU_AUX = 160
    GELU_BIAS = 36
    GELU_AUX_BIAS = 164
    DGELU = 192
    DGELU_BGRAD = 208
    BGRADA = 256
    BGRADB = 512


matmul_heuristic_result_dtype = np.dtype([("algo", [("data_", "<u8", (8,))]), ("workspace_size", "<u8"),
                                          ("state", "<i4"), ("waves_count", "<f4"), ("reserved", "<i4", (4,))])
SIGNED = {"BIAS_BATCH_STRIDE", "EPILOGUE_AUX_LD", "EPILOGUE_AUX_BATCH_STRIDE", "LD", "STRIDED_BATCH_OFFSET",
          "COMPUTE_TYPE", "SCALE_TYPE", "TRANSA", "TRANSB", "BIAS_DATA_TYPE", "BATCH_COUNT"}


@dataclass
class MatmulCall:
    handle: int
    desc: dict  # the descriptor's attributes when called
    layouts: tuple[dict, dict, dict, dict]  # A, B, C, D
    alpha: float
    beta: float
    pointers: tuple[int, int, int, int]  # A, B, C, D
    algorithm: bytes
    workspace: int
    workspace_bytes: int
    stream: int


def _read(buf: int, size: int, signed: bool) -> int:
    return int.from_bytes(ctypes.string_at(buf, size), "little", signed=signed)


class FakeCublasLt:
    cuBLASLtError = cuBLASLtError
    MatmulDescAttribute = MatmulDescAttribute
    MatrixLayoutAttribute = MatrixLayoutAttribute
    MatmulPreferenceAttribute = MatmulPreferenceAttribute
    Epilogue = Epilogue
    matmul_heuristic_result_dtype = matmul_heuristic_result_dtype

    def __init__(self, cuda: FakeCuda, *, algorithm_count: int = 3, version: int = 130100,
                 recorded_kinds: tuple[str, ...] = ("kernel",), unsupported: bool = False) -> None:
        self.cuda, self.algorithm_count, self.version = cuda, algorithm_count, version
        self.recorded_kinds, self.unsupported = recorded_kinds, unsupported
        self.handles: set[int] = set()
        self.descs: dict[int, dict] = {}
        self.layouts: dict[int, dict] = {}
        self.preferences: dict[int, dict] = {}
        self.matmuls: list[MatmulCall] = []
        self.heuristic_calls = 0
        self.failing = False  # set: every matmul fails, as one that faults would
        self._numbers = itertools.count(1000)

    def live(self) -> dict[str, int]:
        return {"handles": len(self.handles), "descs": len(self.descs), "layouts": len(self.layouts),
                "preferences": len(self.preferences)}

    def get_version(self) -> int:
        return self.version

    def create(self) -> int:
        handle = next(self._numbers)
        self.handles.add(handle)
        return handle

    def destroy(self, handle: int) -> None:
        self.handles.remove(handle)

    def matmul_desc_create(self, compute_type: int, scale_type: int) -> int:
        desc = next(self._numbers)
        self.descs[desc] = {"COMPUTE_TYPE": compute_type, "SCALE_TYPE": scale_type}
        return desc

    def matmul_desc_set_attribute(self, desc: int, attr: int, buf: int, size: int) -> None:
        name = MatmulDescAttribute(attr).name
        self.descs[desc][name] = _read(buf, size, name in SIGNED)

    def matmul_desc_destroy(self, desc: int) -> None:
        del self.descs[desc]

    def matrix_layout_create(self, dtype: int, rows: int, cols: int, ld: int) -> int:
        layout = next(self._numbers)
        self.layouts[layout] = {"TYPE": dtype, "ROWS": rows, "COLS": cols, "LD": ld}
        return layout

    def matrix_layout_set_attribute(self, layout: int, attr: int, buf: int, size: int) -> None:
        name = MatrixLayoutAttribute(attr).name
        self.layouts[layout][name] = _read(buf, size, name in SIGNED)

    def matrix_layout_destroy(self, layout: int) -> None:
        del self.layouts[layout]

    def matmul_preference_create(self) -> int:
        preference = next(self._numbers)
        self.preferences[preference] = {}
        return preference

    def matmul_preference_set_attribute(self, preference: int, attr: int, buf: int, size: int) -> None:
        self.preferences[preference][MatmulPreferenceAttribute(attr).name] = _read(buf, size, False)

    def matmul_preference_destroy(self, preference: int) -> None:
        del self.preferences[preference]

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, preference, count, results, returned) -> None:
        assert handle in self.handles and {a, b, c, d} <= set(self.layouts) and preference in self.preferences
        self.heuristic_calls += 1
        if self.unsupported:
            raise cuBLASLtError("CUBLAS_STATUS_NOT_SUPPORTED")
        n = min(count, self.algorithm_count)
        out = np.frombuffer((ctypes.c_uint8 * (count * matmul_heuristic_result_dtype.itemsize)).from_address(results),
                            matmul_heuristic_result_dtype)
        for i in range(n):
            out[i]["algo"]["data_"][:] = i + 1  # algorithm i + 1: every byte says which
            out[i]["state"] = 0
        ctypes.c_int32.from_address(returned).value = n

    def matmul_algo_check(self, handle, desc, a, b, c, d, algo, result) -> None:
        assert handle in self.handles and desc in self.descs and {a, b, c, d} <= set(self.layouts)
        number, workspace = np.frombuffer(ctypes.string_at(algo, 64), "<u8")[:2]
        if not 1 <= number <= self.algorithm_count:
            raise cuBLASLtError("CUBLAS_STATUS_INVALID_VALUE")
        out = np.frombuffer((ctypes.c_uint8 * matmul_heuristic_result_dtype.itemsize).from_address(result),
                            matmul_heuristic_result_dtype)
        out[0]["algo"]["data_"][:] = np.frombuffer(ctypes.string_at(algo, 64), "<u8")
        out[0]["workspace_size"], out[0]["state"] = workspace, 0

    def matmul(self, handle, desc, alpha, a, adesc, b, bdesc, beta, c, cdesc, d, ddesc, algo, workspace,
               workspace_bytes, stream) -> None:
        assert handle in self.handles
        if self.failing:
            raise cuBLASLtError("CUBLAS_STATUS_EXECUTION_FAILED")
        call = MatmulCall(handle, dict(self.descs[desc]),
                          tuple(dict(self.layouts[x]) for x in (adesc, bdesc, cdesc, ddesc)),
                          ctypes.c_float.from_address(alpha).value, ctypes.c_float.from_address(beta).value,
                          (a, b, c, d), ctypes.string_at(algo, 64), workspace, workspace_bytes, stream)
        self.matmuls.append(call)
        for kind in self.recorded_kinds:
            work = {"kernel": KernelLaunch("cublasLt_fake_gemm", (1, 1, 1), (128, 1, 1), 0, (),
                                           lambda: self._compute(call)),
                    "memset": Memset(workspace, 1, 0, 0), "memcpy": Memcpy(workspace, workspace, 0)}.get(
                        kind, lambda: None)  # a host function
            self.cuda.enqueue(self.cuda.CUstream(stream), kind, work)

    # --- the arithmetic, column-major ------------------------------------------------------

    def _matrix(self, pointer: int, layout: dict, index: int) -> np.ndarray:
        """Batch entry `index` of a column-major f32 matrix, as a (rows, cols) view."""
        rows, cols, ld = layout["ROWS"], layout["COLS"], layout["LD"]
        start = pointer + 4 * index * layout.get("STRIDED_BATCH_OFFSET", 0)
        flat = self.cuda._memory(start, 4 * (ld * (cols - 1) + rows)).view(np.float32)
        return np.lib.stride_tricks.as_strided(flat, (rows, cols), (4, 4 * ld))

    def _compute(self, call: MatmulCall) -> None:
        desc, (la, lb, lc, ld_) = call.desc, call.layouts
        epilogue = Epilogue(desc.get("EPILOGUE", Epilogue.DEFAULT)).name
        if any(layout["TYPE"] != 0 for layout in call.layouts) or epilogue not in (
                "DEFAULT", "BIAS", "RELU", "RELU_BIAS"):
            return
        for i in range(la.get("BATCH_COUNT", 1)):
            op_a = self._matrix(call.pointers[0], la, i).astype(np.float64)
            op_b = self._matrix(call.pointers[1], lb, i).astype(np.float64)
            op_a = op_a.T if desc.get("TRANSA", 0) else op_a
            op_b = op_b.T if desc.get("TRANSB", 0) else op_b
            value = call.alpha * (op_a @ op_b)
            if call.beta:
                value += call.beta * self._matrix(call.pointers[2], lc, i)
            if "BIAS" in epilogue:
                rows = op_a.shape[0]
                bias = self.cuda._memory(desc["BIAS_POINTER"] + 4 * i * desc.get("BIAS_BATCH_STRIDE", 0), 4 * rows)
                value += bias.view(np.float32)[:, None]
            if "RELU" in epilogue:
                value = np.maximum(value, 0)
            self._matrix(call.pointers[3], ld_, i)[...] = value.astype(np.float32)
