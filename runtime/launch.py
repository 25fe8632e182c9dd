"""What a kernel node is launched with: its `kernelParams` array, built once.

The driver copies argument values when a node is added or a kernel launched; the arrays here
are kept alive anyway, so that eager launches can reuse one array for every launch."""

from __future__ import annotations

import numpy as np

from ..compiler.model import bfloat16_bits
from ..compiler.plan import ArgSpec, KernelNodeSpec
from .memory import BufferSet

SCALAR_TYPES = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "i8": np.int8, "i16": np.int16,
    "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
    "u64": np.uint64, "bool": np.bool_,
}


def _value(arg: ArgSpec, buffers: BufferSet) -> np.ndarray:
    if arg.kind == "pointer":
        return np.array([buffers.pointer(arg.buffer, arg.byte_offset)], dtype=np.uint64)
    if arg.ctype == "bf16":
        return bfloat16_bits([arg.value])
    return np.array([arg.value], dtype=SCALAR_TYPES[arg.ctype])


class KernelArgs:
    def __init__(self, spec: KernelNodeSpec, buffers: BufferSet) -> None:
        self.storage = [_value(arg, buffers) for arg in spec.args]
        self.pointers = np.array([s.ctypes.data for s in self.storage] or [0], dtype=np.uint64)

    @property
    def address(self) -> int:
        """The address of the `void*[]` the driver reads the arguments through."""
        return int(self.pointers.ctypes.data)
