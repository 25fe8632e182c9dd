"""The NCCL communicator pipec issues collectives through: the official bindings, nccl4py, when
they import, else CuPy's `cupy.cuda.nccl` (docs/distributed.md says why both).

Both are driven through raw device addresses, element counts and NCCL's own enum values
(`ncclDataType_t`, `ncclRedOp_t`, part of NCCL's stable ABI), so that every element type pipec
has reaches NCCL, bf16 included, without an array object in between. Imported only when a plan
has collectives; a single-GPU run never loads NCCL.
"""

from __future__ import annotations

from typing import Protocol

# ncclDataType_t and ncclRedOp_t (nccl.h)
NCCL_DTYPES = {"i8": 0, "u8": 1, "i32": 2, "u32": 3, "i64": 4, "u64": 5, "f16": 6, "f32": 7,
               "f64": 8, "bf16": 9}
NCCL_OPS = {"sum": 0, "max": 2, "min": 3, "avg": 4}
UNIQUE_ID_BYTES = 128
IN_PROGRESS = 7  # ncclInProgress


class Communicator(Protocol):
    """What pipec needs of a communicator. Addresses are device pointers, `stream` a raw
    CUstream handle; every call only enqueues."""

    backend: str  # nccl4py | cupy | a test's name

    def allreduce(self, src: int, dst: int, count: int, dtype: str, op: str, stream: int) -> None: ...
    def broadcast(self, src: int, dst: int, count: int, dtype: str, root: int, stream: int) -> None: ...
    def allgather(self, src: int, dst: int, count: int, dtype: str, stream: int) -> None: ...
    def reducescatter(self, src: int, dst: int, count: int, dtype: str, op: str, stream: int) -> None: ...
    # ncclGroupStart, ncclGroupEnd: the calls between them run as one NCCL kernel
    def group_start(self) -> None: ...
    def group_end(self) -> None: ...
    def async_error(self) -> int: ...  # ncclResult_t: 0 success, 7 in progress, else an error
    def abort(self) -> None: ...
    def destroy(self) -> None: ...


def new_unique_id() -> bytes:
    """A fresh ncclUniqueId (rank 0 makes it; the launcher's channel carries it to the rest)."""
    try:
        from nccl.core import get_unique_id
        return bytes(get_unique_id())
    except ImportError:
        from cupy.cuda import nccl
        return bytes(b & 0xFF for b in nccl.get_unique_id())


def open_communicator(unique_id: bytes, world_size: int, rank: int) -> Communicator:
    """The communicator of this rank (blocks until every rank has called it); the current CUDA
    device must be this rank's."""
    try:
        import nccl.core  # noqa: F401
    except ImportError:
        return _CupyCommunicator(unique_id, world_size, rank)
    return _Nccl4pyCommunicator(unique_id, world_size, rank)


class _Nccl4pyCommunicator:
    """nccl4py (`nccl.core` for the communicator's life, `nccl.bindings.nccl` for the calls:
    the Pythonic methods take array objects and infer counts, pipec has addresses)."""

    backend = "nccl4py"

    def __init__(self, unique_id: bytes, world_size: int, rank: int) -> None:
        from nccl.bindings import nccl as bindings
        from nccl.core import Communicator, UniqueId, group_end, group_start
        self._bindings = bindings
        self.group_start, self.group_end = group_start, group_end
        self._comm = Communicator.init(world_size, rank, UniqueId.from_bytes(unique_id))
        self._handle = self._comm._comm  # the bindings' Comm, which the raw calls take

    def allreduce(self, src, dst, count, dtype, op, stream) -> None:
        self._bindings.all_reduce(src, dst, count, NCCL_DTYPES[dtype], NCCL_OPS[op], self._handle, stream)

    def broadcast(self, src, dst, count, dtype, root, stream) -> None:
        self._bindings.broadcast(src, dst, count, NCCL_DTYPES[dtype], root, self._handle, stream)

    def allgather(self, src, dst, count, dtype, stream) -> None:
        self._bindings.all_gather(src, dst, count, NCCL_DTYPES[dtype], self._handle, stream)

    def reducescatter(self, src, dst, count, dtype, op, stream) -> None:
        self._bindings.reduce_scatter(src, dst, count, NCCL_DTYPES[dtype], NCCL_OPS[op], self._handle, stream)

    def async_error(self) -> int:
        return int(self._comm.get_async_error())

    def abort(self) -> None:
        self._handle = None  # the Comm the raw calls took is freed with it
        self._comm.abort()

    def destroy(self) -> None:
        self._handle = None
        self._comm.destroy()


class _CupyCommunicator:
    """CuPy's NCCL bindings (`cupy.cuda.nccl.NcclCommunicator`), the same raw calls."""

    backend = "cupy"

    def __init__(self, unique_id: bytes, world_size: int, rank: int) -> None:
        from cupy.cuda import nccl
        signed = tuple(b - 256 if b > 127 else b for b in unique_id)  # CuPy's id: C chars
        self._comm = nccl.NcclCommunicator(world_size, signed, rank)
        self.group_start, self.group_end = nccl.groupStart, nccl.groupEnd

    def allreduce(self, src, dst, count, dtype, op, stream) -> None:
        self._comm.allReduce(src, dst, count, NCCL_DTYPES[dtype], NCCL_OPS[op], stream)

    def broadcast(self, src, dst, count, dtype, root, stream) -> None:
        self._comm.broadcast(src, dst, count, NCCL_DTYPES[dtype], root, stream)

    def allgather(self, src, dst, count, dtype, stream) -> None:
        self._comm.allGather(src, dst, count, NCCL_DTYPES[dtype], stream)

    def reducescatter(self, src, dst, count, dtype, op, stream) -> None:
        self._comm.reduceScatter(src, dst, count, NCCL_DTYPES[dtype], NCCL_OPS[op], stream)

    def async_error(self) -> int:
        try:
            self._comm.check_async_error()
        except Exception as error:  # CuPy raises its NcclError carrying the ncclResult_t
            return int(getattr(error, "status", 1) or 1)
        return 0

    def abort(self) -> None:
        self._comm.abort()

    def destroy(self) -> None:
        self._comm.destroy()
