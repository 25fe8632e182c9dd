"""DLPack with ctypes alone: capsules that hand a pipeline's buffer to PyTorch, JAX or CuPy
without copying, and the reading of other frameworks' capsules for `bind=`.

The structs follow dlpack.h (v1.1): `DLManagedTensor` in a capsule named "dltensor" for
consumers that ask for no version, `DLManagedTensorVersioned` in "dltensor_versioned" for those
passing `max_version >= (1, 0)`. A consumer renames the capsule ("used_...") and calls the
deleter when it is done; a capsule never consumed calls the deleter itself when collected.
Until the deleter runs, the exported struct, its shape and strides and the object it was made
from (which keeps the pipeline alive) stay in `_EXPORTED`."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

KDL_CUDA = 2
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT = 0, 1, 2, 4
# What each pipec element type is in DLPack: (type code, bits).
DL_TYPES = {"f32": (KDL_FLOAT, 32), "f16": (KDL_FLOAT, 16), "bf16": (KDL_BFLOAT, 16), "f64": (KDL_FLOAT, 64),
            "i8": (KDL_INT, 8), "i16": (KDL_INT, 16), "i32": (KDL_INT, 32), "i64": (KDL_INT, 64),
            "u8": (KDL_UINT, 8), "u16": (KDL_UINT, 16), "u32": (KDL_UINT, 32), "u64": (KDL_UINT, 64)}
VERSION = (1, 1)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# A capsule's destructor gets the capsule while it is being freed: a raw pointer, never a
# Python reference (taking one would revive it), hence the second, raw form of the calls.
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _capi(name: str, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_new = _capi("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR)
_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_raw_is_valid = _capi("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_raw_pointer = _capi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)

_EXPORTED: dict[int, tuple] = {}  # the managed struct's address -> what must outlive it


@DELETER
def _delete(address: int) -> None:
    _EXPORTED.pop(address, None)


def _capsule_destructor(name: bytes):
    @_CAPSULE_DESTRUCTOR
    def destroy(capsule) -> None:
        if _raw_is_valid(capsule, name):  # never consumed: the deleter is ours to call
            _delete(_raw_pointer(capsule, name))
    return destroy


_DESTRUCTORS = {name: _capsule_destructor(name) for name in (b"dltensor", b"dltensor_versioned")}


def export(owner: object, pointer: int, device_id: int, dtype: str, shape: tuple[int, ...], *,
           versioned: bool):
    """A capsule over `pointer` (C-contiguous, `shape` elements of `dtype`) on CUDA device
    `device_id`; `owner` stays referenced until the consumer lets go."""
    code, bits = DL_TYPES[dtype]
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    tensor = DLTensor(pointer, DLDevice(KDL_CUDA, device_id), len(shape), DLDataType(code, bits, 1),
                      dims, None, 0)  # NULL strides: compact row-major
    managed: DLManagedTensorVersioned | DLManagedTensor
    if versioned:
        managed = DLManagedTensorVersioned(DLPackVersion(*VERSION), None, _delete, 0, tensor)
        name = b"dltensor_versioned"
    else:
        managed = DLManagedTensor(tensor, None, _delete)
        name = b"dltensor"
    address = ctypes.addressof(managed)
    _EXPORTED[address] = (managed, dims, owner)
    return _capsule_new(address, name, _DESTRUCTORS[name])


def outstanding() -> int:
    """Capsules exported and not yet released by their consumer."""
    return len(_EXPORTED)


@dataclass(frozen=True)
class Imported:
    """What another framework's capsule describes."""

    pointer: int
    device_type: int
    dl_type: tuple[int, int, int]  # code, bits, lanes
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements
    capsule: object  # kept with the binding: collected, it releases the producer's tensor


def read_capsule(capsule) -> Imported:
    """The tensor in a "dltensor" or "dltensor_versioned" capsule, which stays unconsumed (its
    own destructor releases it once pipec drops it)."""
    for name, struct in ((b"dltensor_versioned", DLManagedTensorVersioned), (b"dltensor", DLManagedTensor)):
        if _is_valid(capsule, name):
            managed = struct.from_address(_pointer(capsule, name))
            tensor = managed.dl_tensor
            shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
            strides = tuple(tensor.strides[i] for i in range(tensor.ndim)) if tensor.strides else None
            dtype = tensor.dtype
            return Imported((tensor.data or 0) + tensor.byte_offset, tensor.device.device_type,
                            (dtype.code, dtype.bits, dtype.lanes), shape, strides, capsule)
    raise TypeError("not a DLPack capsule")
