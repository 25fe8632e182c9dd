"""`pipeline.buffers[name]`: a view of a buffer's device memory that other frameworks take
without a copy and without CuPy: DLPack (`torch.from_dlpack(view)`,
`jax.dlpack.from_dlpack(view)`) and `__cuda_array_interface__` v3 (CuPy, Numba, PyTorch).

A view checks on every access that its pipeline is still open: after `close()` the memory is
freed, and a view taken before raises `ClosedError` instead of handing out a dangling
pointer. Arrays another framework already made from a view share the memory and must not
outlive the pipeline. Exports are ordered after the pipeline's work: the consumer's stream
waits (on the device) for everything the pipeline enqueued so far."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol, SupportsInt

import numpy as np

from ..errors import Error
from ..plan.schema import Plan
from . import dlpack
from .driver import Device
from .memory import DeviceBuffer

LEGACY_DEFAULT_STREAM = 1  # DLPack's and the CUDA array interface's number for it


class ClosedError(Error):
    """A buffer view (or an export from one) used after its pipeline was closed."""


def stream_handle(stream) -> int:
    """The raw `CUstream` of a stream object with the `__cuda_stream__` protocol (returns
    `(version, handle)`), or of a raw handle (an int, a `cuda.bindings` CUstream)."""
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        _version, handle = protocol()
        return int(handle)
    try:
        return int(stream)
    except (TypeError, ValueError):
        raise TypeError(f"a stream must have __cuda_stream__ or be a raw CUstream handle, not "
                        f"{type(stream).__name__}") from None


class Pipeline(Protocol):
    """What a view needs of its pipeline (runtime/pipeline.py's, which holds the views)."""

    closed: bool
    plan: Plan
    device: Device
    stream: SupportsInt  # a CUstream

    def buffer(self, name: str) -> DeviceBuffer: ...

    def read(self, name: str) -> np.ndarray: ...

    def order_before(self, stream) -> None: ...


class BufferView:
    """One buffer of one pipeline: `shape`, `dtype` (NumPy; bf16 is `ml_dtypes.bfloat16`),
    `strides` (bytes, C order), `ptr`; `numpy()` copies it to the host, `cupy()` wraps it in a
    CuPy array (bf16 as its uint16 bit patterns: CuPy has no bfloat16)."""

    def __init__(self, pipeline: Pipeline, name: str) -> None:
        self._pipeline = pipeline
        self.name = name
        buffer = pipeline.buffer(name)
        self._spec = buffer.spec
        self.dtype = buffer.numpy_dtype
        self.shape = self._spec.shape
        self.strides = tuple(self.dtype.itemsize * int(np.prod(self.shape[i + 1:], dtype=np.int64))
                             for i in range(len(self.shape)))

    def _live(self):
        if self._pipeline.closed:
            raise ClosedError(f"buffer `{self.name}` of {self._pipeline.plan.pipe}: the pipeline is closed "
                              "and its memory freed")
        return self._pipeline.buffer(self.name)

    @property
    def ptr(self) -> int:
        return self._live().device_ptr

    @property
    def nbytes(self) -> int:
        return self._spec.nbytes

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        state = "closed" if self._pipeline.closed else f"at {self._pipeline.buffer(self.name).device_ptr:#x}"
        return f"<pipec buffer `{self.name}` {self._spec.dtype}{list(self.shape)} {state}>"

    def numpy(self) -> np.ndarray:
        """A host copy, after everything enqueued on the pipeline's stream has finished."""
        self._live()
        return self._pipeline.read(self.name)

    def cupy(self):
        import cupy

        memory = cupy.cuda.UnownedMemory(self.ptr, self.nbytes, owner=self,
                                         device_id=self._pipeline.device.ordinal)
        dtype = np.uint16 if self._spec.dtype == "bf16" else self.dtype
        return cupy.ndarray(self.shape, dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, 0))

    # --- the CUDA array interface (v3) -------------------------------------------------------

    @property
    def __cuda_array_interface__(self) -> dict:
        """`stream` is the pipeline's own stream: a consumer orders its use after it."""
        if self._spec.dtype == "bf16":  # no type string says bfloat16; DLPack does
            raise AttributeError("a bf16 buffer has no __cuda_array_interface__ type; use DLPack")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": int(self._pipeline.stream)}

    # --- DLPack --------------------------------------------------------------------------------

    def __dlpack_device__(self) -> tuple[int, int]:
        return (dlpack.KDL_CUDA, self._pipeline.device.ordinal)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """`stream` is the consumer's: None is the legacy default stream, -1 asks for no
        ordering; otherwise that stream waits for the pipeline's work so far."""
        pointer = self.ptr
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"buffer `{self.name}` lives on CUDA device {self._pipeline.device.ordinal}, "
                              f"not {tuple(dl_device)}")
        if copy:
            raise BufferError("pipec exports its buffers without copying (copy=True asked for a copy)")
        if stream != -1:
            self._pipeline.order_before(LEGACY_DEFAULT_STREAM if stream is None else stream_handle(stream))
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return dlpack.export(self, pointer, self._pipeline.device.ordinal, self._spec.dtype, self.shape,
                             versioned=versioned)


class BufferViews(Mapping):
    """Every buffer of a pipeline as a `BufferView`, by name."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._views: dict[str, BufferView] = {}

    def __getitem__(self, name: str) -> BufferView:
        if name not in self._views:
            if self._pipeline.closed:
                raise ClosedError(f"{self._pipeline.plan.pipe} is closed")
            self._views[name] = BufferView(self._pipeline, name)
        return self._views[name]

    def __iter__(self) -> Iterator[str]:
        return iter(b.name for b in self._pipeline.plan.buffers)

    def __len__(self) -> int:
        return len(self._pipeline.plan.buffers)
