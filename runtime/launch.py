"""What a kernel node is launched with: its `kernelParams` array, built once.

The driver copies argument values when a node is added or a kernel launched; the arrays here
are kept alive anyway, so that eager launches can reuse one array for every launch."""

from __future__ import annotations

import numpy as np

from ..compiler.dtypes import DTYPES, host_array
from ..compiler.plan_schema import ArgSpec, KernelNodeSpec
from .memory import BufferSet


def _value(arg: ArgSpec, buffers: BufferSet) -> np.ndarray:
    if arg.kind == "pointer":
        return np.array([buffers.pointer(arg.buffer, arg.byte_offset)], dtype=np.uint64)
    return host_array(DTYPES[arg.ctype], [arg.value])


class KernelArgs:
    def __init__(self, spec: KernelNodeSpec, buffers: BufferSet) -> None:
        self.storage = [_value(arg, buffers) for arg in spec.args]
        self.pointers = np.array([s.ctypes.data for s in self.storage] or [0], dtype=np.uint64)

    @property
    def address(self) -> int:
        """The address of the `void*[]` the driver reads the arguments through."""
        return int(self.pointers.ctypes.data)
