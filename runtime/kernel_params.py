"""What a kernel node is launched with: its `kernelParams` array, built once.

The driver copies argument values when a node is added or a kernel launched; the arrays here
are kept alive anyway, so that eager launches can reuse one array for every launch."""

from __future__ import annotations

import numpy as np

from ..plan.dtypes import DTYPES, host_array
from ..plan.schema import ArgSpec, KernelNodeSpec
from .memory import BufferSet


def _value(arg: ArgSpec, buffers: BufferSet, handles) -> np.ndarray:
    if arg.kind == "pointer":
        return np.array([buffers.pointer(arg.buffer, arg.byte_offset)], dtype=np.uint64)
    if arg.kind == "handle":
        return np.array([int(handles[arg.value]) if handles is not None else 0], dtype=np.uint64)
    if arg.kind == "in_graph":
        return np.array([handles is not None], dtype=np.uint32)
    return host_array(DTYPES[arg.ctype], [arg.value])


class KernelArgs:
    """`handles` are the graph's conditional handles, by index; None for eager launches, where
    a kernel that decides a conditional only stores its decision."""

    def __init__(self, spec: KernelNodeSpec, buffers: BufferSet, handles=None) -> None:
        self.storage = [_value(arg, buffers, handles) for arg in spec.args]
        self.pointers = np.array([s.ctypes.data for s in self.storage] or [0], dtype=np.uint64)

    @property
    def address(self) -> int:
        """The address of the `void*[]` the driver reads the arguments through."""
        return int(self.pointers.ctypes.data)
