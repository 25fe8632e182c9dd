"""Buffers at fixed addresses: device memory, or pinned host memory mapped into the device's
address space. Allocated once, initialised as declared, freed on close. A table of addresses
(`addresses(...)`) is filled once every buffer has its address, and again whenever its
contents are restored (`fill_tables`): it holds this process's addresses, never saved ones."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..plan.dtypes import DTYPES, fill_pattern
from ..plan.initial_values import host_dtype, initial_array
from ..plan.schema import BufferSpec, Plan
from ..api_arguments import ArgumentError
from ..errors import Error
from ..wording import counted
from .dlpack import DL_TYPES, KDL_CUDA, read_capsule
from .driver import CudaError, Driver, wait_for

# Bit patterns that make an unwritten element obvious: NaNs for floats, 0xA5 bytes for integers.
POISON = {"f32": (4, 0x7FC0DEAD), "f64": (4, 0x7FF8DEAD), "f16": (2, 0x7E5A), "bf16": (2, 0x7FDA)}
INTEGER_POISON = (1, 0xA5)


class OutOfMemory(Error):
    pass


class BindError(Error):
    pass


@dataclass
class DeviceBuffer:
    spec: BufferSpec
    driver: Driver
    device_ptr: int
    host_ptr: int | None  # mapped buffers only
    owner: object | None = None  # an external array whose memory this buffer uses

    @property
    def numpy_dtype(self) -> np.dtype:
        return host_dtype(self.spec.dtype)

    def host_view(self) -> np.ndarray:
        """The mapped buffer's memory as a NumPy array (no copy)."""
        assert self.host_ptr is not None, "only mapped buffers live in host memory"
        raw = (ctypes.c_uint8 * self.spec.nbytes).from_address(self.host_ptr)
        return np.frombuffer(memoryview(raw), dtype=self.numpy_dtype).reshape(self.spec.shape)

    def read(self) -> np.ndarray:
        """A host copy of the contents (the caller synchronises first)."""
        if self.host_ptr is not None:
            return self.host_view().copy()
        out = np.empty(self.spec.shape, dtype=self.numpy_dtype)
        self.driver.call("cuMemcpyDtoH", out, self.device_ptr, self.spec.nbytes)
        return out

    def write(self, array: np.ndarray) -> None:
        """Values of the buffer's type; a bf16 buffer also takes uint16 arrays as bit patterns
        (what the compiler's initial values and older state files hold)."""
        array = self.fitting(array)
        if self.host_ptr is not None:
            self.host_view()[...] = array
        else:
            self.driver.call("cuMemcpyHtoD", self.device_ptr, array, self.spec.nbytes)

    def fitting(self, values) -> np.ndarray:
        """`values` as a C-contiguous array of the buffer's type and shape; ArgumentError when
        its shape (the buffer's, or flat with as many elements) or its type does not fit: a
        float array written to an integer buffer would be truncated, silently."""
        spec, target = self.spec, self.numpy_dtype
        try:
            array = np.asarray(values)
        except (TypeError, ValueError) as error:
            raise ArgumentError(f"`{spec.name}`: cannot write {type(values).__name__} ({error})") from None
        if spec.dtype == "bf16" and array.dtype == np.uint16:
            array = array.view(target)
        if array.shape != tuple(spec.shape) and array.shape != (math.prod(spec.shape),):
            raise ArgumentError(f"`{spec.name}` is {spec.dtype}{list(spec.shape)}: cannot write an array of "
                                f"shape {list(array.shape)}")
        source = array.dtype
        if not (np.can_cast(source, target, "same_kind") or (source.kind in "iu" and target.kind in "iu")):
            raise ArgumentError(f"`{spec.name}` is {spec.dtype}{list(spec.shape)}: cannot write {source} values")
        return np.ascontiguousarray(array, dtype=target).reshape(spec.shape)

    def memset(self, element_size: int, value: int, stream=None) -> None:
        count = self.spec.nbytes // element_size
        suffix = {1: "D8", 2: "D16", 4: "D32"}[element_size]
        if stream is None:
            self.driver.call(f"cuMemset{suffix}", self.device_ptr, value, count)
        else:
            self.driver.call(f"cuMemset{suffix}Async", self.device_ptr, value, count, stream)

    def poison(self, stream=None) -> None:
        size, value = POISON.get(self.spec.dtype, INTEGER_POISON)
        self.memset(size, value, stream)


class BufferSet:
    """Every buffer of a plan, by name."""

    def __init__(self, plan: Plan, driver: Driver, bind: Mapping[str, object] | None = None, stream=0,
                 initial: Mapping[str, bytes] | None = None) -> None:
        """`initial`: buffers' initial bytes (a bundle's buffers/NAME.bin) to upload instead of
        computing their random or loaded values."""
        self.plan = plan
        self.driver = driver
        self.buffers: dict[str, DeviceBuffer] = {}
        bind = dict(bind or {})
        unknown = set(bind) - {b.name for b in plan.buffers}
        if unknown:
            raise BindError(f"no buffer named {', '.join(sorted(unknown))} in {plan.pipe}")
        try:
            for spec in plan.buffers:
                if spec.name in bind:
                    self.buffers[spec.name] = _bind_external(spec, driver, bind[spec.name], stream)
                else:
                    self.buffers[spec.name] = _allocate(spec, driver)
                    _initialise(self.buffers[spec.name], (initial or {}).get(spec.name))
            self.fill_tables()
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> DeviceBuffer:
        return self.buffers[name]

    def __iter__(self):
        return iter(self.buffers.values())

    def pointer(self, name: str, byte_offset: int = 0) -> int:
        return self.buffers[name].device_ptr + byte_offset

    def fill_tables(self) -> None:
        """Write every table of addresses: the address of each buffer it names, plus its offset."""
        for buffer in self.buffers.values():
            init = buffer.spec.init
            if init.kind == "addresses":
                buffer.write(np.array([self.pointer(a.buffer, a.byte_offset) for a in init.addresses], dtype=np.uint64))

    def close(self) -> None:
        for buffer in self.buffers.values():
            if buffer.owner is not None:
                continue
            if buffer.host_ptr is not None:
                self.driver.call("cuMemFreeHost", buffer.host_ptr)
            else:
                self.driver.call("cuMemFree", buffer.device_ptr)
        self.buffers.clear()


def _allocate(spec: BufferSpec, driver: Driver) -> DeviceBuffer:
    cu, call = driver.cu, driver.call
    try:
        if spec.memory == "mapped":
            flags = cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE
            host = call("cuMemHostAlloc", spec.nbytes, flags)
            device = call("cuMemHostGetDevicePointer", host, 0)
            return DeviceBuffer(spec, driver, int(device), int(host))
        return DeviceBuffer(spec, driver, int(call("cuMemAlloc", spec.nbytes)), None)
    except CudaError as error:
        if error.name in ("CUDA_ERROR_OUT_OF_MEMORY",):
            raise OutOfMemory(f"out of {spec.memory} memory allocating `{spec.name}` "
                              f"({spec.nbytes:,} bytes, declared at {spec.location})") from None
        raise


def _initialise(buffer: DeviceBuffer, contents: bytes | None = None) -> None:
    spec, init = buffer.spec, buffer.spec.init
    if contents is not None:  # a bundle's buffers/NAME.bin: the bytes initial_array gives
        buffer.write(np.frombuffer(contents, dtype=buffer.numpy_dtype))
        return
    dtype = DTYPES[spec.dtype]
    if init.kind == "zeros":
        buffer.memset(4 if spec.nbytes % 4 == 0 else 1, 0)
    elif init.kind == "uninit":
        buffer.poison()  # deterministic and loud if something reads it before writing
    elif init.kind == "fill":
        size, pattern = fill_pattern(dtype, init.args[0])
        if size <= 4 and spec.nbytes % size == 0:
            buffer.memset(size, pattern)
        else:
            buffer.write(np.full(spec.shape, pattern, dtype=np.uint64).view(buffer.numpy_dtype))
    elif init.kind != "addresses":  # random or loaded values (plan/initial_values.py); tables come last
        buffer.write(initial_array(spec))


def _bind_external(spec: BufferSpec, driver: Driver, array: object, stream) -> DeviceBuffer:
    """Use an existing device array as the buffer's memory: anything with
    `__cuda_array_interface__` (CuPy, Numba, PyTorch) or `__dlpack__` (PyTorch, JAX, CuPy). It
    must match the buffer's type (a bf16 buffer also takes uint16 bit patterns) and size, be
    C-contiguous, and live on the device; `stream` waits for the producer's pending work."""
    # Each requirement is one check and one message, in the order a user would fix them.
    if spec.memory == "mapped":
        raise BindError(f"`{spec.name}` is mapped host memory; only device buffers can be bound")
    if spec.init.kind == "addresses":
        raise BindError(f"`{spec.name}` is a table of addresses, which the runtime fills; bind the buffers it names")
    try:
        interface = getattr(array, "__cuda_array_interface__")
    except (AttributeError, TypeError, ValueError, BufferError):  # older PyTorch's bf16 has none
        interface = None
    if interface is not None and np.dtype(interface["typestr"]).kind not in "iuf" and hasattr(array, "__dlpack__"):
        interface = None  # PyTorch 2.11 describes bf16 as raw bytes ("<V2"); DLPack says bfloat16
    if interface is not None:
        if interface.get("stream"):
            wait_for(driver, stream, interface["stream"])
        dtype = np.dtype(interface["typestr"])
        kind = f"{dtype.kind}{dtype.itemsize * 8}"
        shape, strides = tuple(interface["shape"]), interface.get("strides")
        strides = None if strides is None else tuple(s // dtype.itemsize for s in strides)
        pointer, owner = int(interface["data"][0]), array
    elif hasattr(array, "__dlpack__"):
        imported = read_capsule(array.__dlpack__(stream=int(stream)))
        if imported.device_type != KDL_CUDA:
            raise BindError(f"cannot bind `{spec.name}`: the array is not in CUDA device memory")
        code, bits, lanes = imported.dl_type
        kind = "bf16" if (code, bits) == DL_TYPES["bf16"] else f"{'iuf'[code]}{bits}" if code < 3 else "?"
        shape, strides, pointer, owner = imported.shape, imported.strides, imported.pointer, (array, imported)
    else:
        raise BindError(f"cannot bind `{spec.name}`: {type(array).__name__} is not a CUDA array "
                        "(it has neither __cuda_array_interface__ nor __dlpack__)")
    dtype = DTYPES[spec.dtype]
    accepted = {f"{dtype.kind}{dtype.bits}"} if spec.dtype != "bf16" else {"bf16", "u16"}
    if kind not in accepted:
        raise BindError(f"cannot bind `{spec.name}`: the array holds {_describe(kind)}, the buffer {spec.dtype}")
    count = int(np.prod(shape, dtype=np.int64))
    if count * dtype.size != spec.nbytes:
        raise BindError(f"cannot bind `{spec.name}`: the array has {counted(count, 'element')}, the buffer "
                        f"{spec.nbytes // dtype.size}")
    if strides is not None and count > 1 and strides != _contiguous(shape):
        raise BindError(f"cannot bind `{spec.name}`: the array is not C-contiguous")
    return DeviceBuffer(spec, driver, pointer, None, owner=owner)


def _describe(kind: str) -> str:
    return {"f": "float", "i": "int", "u": "uint"}.get(kind[0], "") + kind[1:] if kind != "bf16" else "bfloat16"


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    """C-order strides in elements."""
    return tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape)))
