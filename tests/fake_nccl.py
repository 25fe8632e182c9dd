"""Collectives on CPU: a `FakeCuda` that can record one call on a capturing stream (what
runtime/library.py's `record_call` does), and a fake NCCL communicator whose calls act on the
fake device memory as if every other rank held the same data as this one (so a sum over W
ranks is W times this rank's values, a gather W copies). Between group_start and group_end its
calls wait, as NCCL's do, and group_end enqueues them as one kernel. A communicator of one rank
takes NCCL's one-rank path instead (`ncclLaunchOneRank`, NCCL 2.28), at once, in a group or
not: an out-of-place call is one copy (`cudaMemcpyAsync` with `cudaMemcpyDefault`, whose node
gives both ends as unified addresses), an in-place one does nothing, and a float average is
NCCL's one-rank kernel, `oneRankReduce`."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

import numpy as np

from fake_cuda import CUmemorytype, CUresult, FakeCuda, KernelLaunch, Memcpy, fake_driver
from pipec.plan.dtypes import DTYPES
from pipec import load
from pipec.runtime import Backends
from pipec.runtime.distributed import LocalChannel, connect
from pipec.runtime.process_launchers import Launch


class CUresultWithQuery(enum.IntEnum):
    CUDA_SUCCESS = CUresult.CUDA_SUCCESS
    CUDA_ERROR_INVALID_VALUE = CUresult.CUDA_ERROR_INVALID_VALUE
    CUDA_ERROR_OUT_OF_MEMORY = CUresult.CUDA_ERROR_OUT_OF_MEMORY
    CUDA_ERROR_NOT_READY = 600


class CapturingCuda(FakeCuda):
    """FakeCuda (which records captures) with a stream that can be made never to finish."""

    CUresult = CUresultWithQuery

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.not_ready = False  # cuStreamQuery answers NOT_READY (a step that never finishes)

    def cuStreamQuery(self, stream):
        return (CUresultWithQuery.CUDA_ERROR_NOT_READY if self.not_ready else CUresult.CUDA_SUCCESS,)

    def cuEventQuery(self, event):  # an event behind the step that never finishes never fires
        return self.cuStreamQuery(None)

    def cuGraphExecDestroy(self, executable):
        # the driver waits for the executable's launches in flight (measured on two H200s),
        # which a NCCL kernel waiting for a rank that never comes keeps in flight for ever
        deadline = time.monotonic() + 2
        while self.not_ready:  # until an abort flag ends it
            assert time.monotonic() < deadline, "cuGraphExecDestroy of a replay that never finishes hangs"
            time.sleep(1e-3)
        return super().cuGraphExecDestroy(executable)


@dataclass
class FakeCommunicator:
    """Rank `rank` of `world_size`, over the memory of `fake`."""

    fake: CapturingCuda
    world_size: int = 2
    rank: int = 0
    backend: str = "fake"
    # (collective, count, dtype, op or root, captured, grouped, src, dst)
    calls: list = field(default_factory=list)
    groups: list = field(default_factory=list)  # the calls of each group ended, by collective
    state: int = 0  # what async_error answers
    aborted: bool = False
    destroyed: bool = False
    extra_node: str | None = None  # a node kind each recorded call adds before its kernel
    _group: list | None = None  # the open group's (collective, stream, effect), or None outside one

    def _array(self, address: int, count: int, dtype: str) -> np.ndarray:
        numpy = np.dtype(DTYPES[dtype].numpy)
        return self.fake._memory(address, count * numpy.itemsize).view(numpy)

    def _enqueue(self, what, stream, detail, count, dtype, effect, src, dst) -> None:
        handle = self.fake.CUstream(stream)
        self.calls.append((what, count, dtype, detail, handle in self.fake.capturing, self._group is not None, src, dst))
        if self.world_size == 1:
            self._one_rank(handle, detail, count, dtype, effect, src, dst)
        elif self._group is not None:
            self._group.append((what, handle, effect))
        else:
            self._launch(what, handle, effect)

    def _one_rank(self, handle, detail, count, dtype, effect, src, dst) -> None:
        """NCCL's one-rank path (see the module's docstring)."""
        if detail == "avg" and DTYPES[dtype].kind == "f":  # NCCL's PreMulSum: a kernel, even in place
            self.fake.enqueue(handle, "kernel", KernelLaunch("oneRankReduce", (1, 1, 1), (1, 1, 1), 0, (), run=effect))
        elif src != dst:
            unified = CUmemorytype.CU_MEMORYTYPE_UNIFIED
            self.fake.enqueue(handle, "memcpy", Memcpy(dst, src, count * DTYPES[dtype].size, unified, unified))

    def _launch(self, what: str, handle, effect) -> None:
        if self.extra_node is not None:  # recorded before the kernel, as NCCL's host callback or event
            self.fake.enqueue(handle, self.extra_node, lambda: None)
        self.fake.enqueue(handle, "kernel", KernelLaunch(f"ncclDevKernel_{what}", (1, 1, 1), (1, 1, 1), 0, (),
                                                         run=effect))

    def group_start(self) -> None:
        assert self._group is None, "ncclGroupStart inside a group pipec opened"
        self._group = []

    def group_end(self) -> None:
        group, self._group = self._group, None
        assert group is not None, "ncclGroupEnd without ncclGroupStart"
        if self.world_size == 1:  # its calls were done at once
            return
        assert group, "ncclGroupEnd around no call"
        streams = {handle for _, handle, _ in group}
        assert len(streams) == 1, "one group's calls on several streams"
        self.groups.append([what for what, _, _ in group])
        effects = [effect for _, _, effect in group]
        self._launch("group", streams.pop(), lambda: [effect() for effect in effects])

    def allreduce(self, src, dst, count, dtype, op, stream) -> None:
        factor = self.world_size if op == "sum" else 1
        def effect():
            self._array(dst, count, dtype)[:] = self._array(src, count, dtype) * factor
        self._enqueue("allreduce", stream, op, count, dtype, effect, src, dst)

    def broadcast(self, src, dst, count, dtype, root, stream) -> None:
        def effect():
            self._array(dst, count, dtype)[:] = self._array(src, count, dtype)
        self._enqueue("broadcast", stream, root, count, dtype, effect, src, dst)

    def allgather(self, src, dst, count, dtype, stream) -> None:
        def effect():
            self._array(dst, count * self.world_size, dtype)[:] = np.tile(self._array(src, count, dtype), self.world_size)
        self._enqueue("allgather", stream, None, count, dtype, effect, src, dst)

    def reducescatter(self, src, dst, count, dtype, op, stream) -> None:
        factor = self.world_size if op == "sum" else 1
        def effect():
            mine = self._array(src, count * self.world_size, dtype)[self.rank * count:(self.rank + 1) * count]
            self._array(dst, count, dtype)[:] = mine * factor
        self._enqueue("reducescatter", stream, op, count, dtype, effect, src, dst)

    def async_error(self) -> int:
        return self.state

    def abort(self) -> None:
        # ncclCommAbort raises its abort flag first, which ends the NCCL kernels in flight, and
        # then waits for every graph holding a recorded collective to be destroyed (NCCL keeps
        # a reference per recording)
        self.fake.not_ready = False
        deadline = time.monotonic() + 5
        while self.fake.executables:
            assert time.monotonic() < deadline, "ncclCommAbort waits for graphs nobody destroys"
            time.sleep(1e-3)
        self.aborted = True

    def destroy(self) -> None:
        self.destroyed = True


class FakeLibrary:
    """runtime/nccl.py's two entry points, handing out the fake communicator."""

    def __init__(self, communicator: FakeCommunicator) -> None:
        self.communicator = communicator
        self.opened: list[tuple[bytes, int, int]] = []

    def new_unique_id(self) -> bytes:
        return bytes(range(128))

    def open_communicator(self, unique_id: bytes, world_size: int, rank: int) -> FakeCommunicator:
        self.opened.append((unique_id, world_size, rank))
        return self.communicator


def load_on_fake_ranks(tmp_path, text, world_size=2, rank=0, extra_node=None, **kwargs):
    """`text`, saved in `tmp_path`, loaded over the fake driver as rank `rank` of `world_size`:
    (the pipeline, the fake CUDA, the fake communicator)."""
    path = tmp_path / "prog.pipe"
    path.write_text(text)
    driver = fake_driver(path, fake=CapturingCuda)
    communicator = FakeCommunicator(driver.cu, world_size, rank, extra_node=extra_node)
    launch = Launch("torchrun", rank, world_size, rank)

    def ranks(plan, launch):
        return connect(plan, launch, LocalChannel(), FakeLibrary(communicator))
    return load(path, launch=launch, backends=Backends(driver, connect_ranks=ranks), **kwargs), driver.cu, communicator
