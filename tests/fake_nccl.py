"""Collectives on CPU: a `FakeCuda` that can record one call on a capturing stream (what
runtime/library.py's `record_call` does), and a fake NCCL communicator whose calls act on the
fake device memory as if every other rank held the same data as this one (so a sum over W
ranks is W times this rank's values, a gather W copies)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from fake_cuda import CUresult, FakeCuda, FakeGraph, KernelLaunch
from pipec.compiler.dtypes import DTYPES


class CUresultWithQuery(enum.IntEnum):
    CUDA_SUCCESS = CUresult.CUDA_SUCCESS
    CUDA_ERROR_INVALID_VALUE = CUresult.CUDA_ERROR_INVALID_VALUE
    CUDA_ERROR_OUT_OF_MEMORY = CUresult.CUDA_ERROR_OUT_OF_MEMORY
    CUDA_ERROR_NOT_READY = 600


class CUgraphNodeType(enum.IntEnum):
    CU_GRAPH_NODE_TYPE_KERNEL = 0
    CU_GRAPH_NODE_TYPE_MEMCPY = 1
    CU_GRAPH_NODE_TYPE_MEMSET = 2
    CU_GRAPH_NODE_TYPE_HOST = 3
    CU_GRAPH_NODE_TYPE_GRAPH = 4
    CU_GRAPH_NODE_TYPE_EMPTY = 5
    CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7
    CU_GRAPH_NODE_TYPE_CONDITIONAL = 13


class CUstreamCaptureMode(enum.IntEnum):
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1


@dataclass
class CapturingCuda(FakeCuda):
    CUresult = CUresultWithQuery
    CUgraphNodeType = CUgraphNodeType
    CUstreamCaptureMode = CUstreamCaptureMode

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.capturing: dict = {}  # stream -> the graph its capture records into
        self.not_ready = False  # cuStreamQuery answers NOT_READY (a step that never finishes)

    def cuStreamBeginCapture(self, stream, mode):
        assert mode == CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        graph = FakeGraph(self._handle("graph"))
        self.graphs[graph.handle] = graph
        self.capturing[stream] = graph
        return (CUresult.CUDA_SUCCESS,)

    def cuStreamEndCapture(self, stream):
        return (CUresult.CUDA_SUCCESS, self.capturing.pop(stream).handle)

    def cuStreamQuery(self, stream):
        return (CUresultWithQuery.CUDA_ERROR_NOT_READY if self.not_ready else CUresult.CUDA_SUCCESS,)

    def cuGraphGetNodes(self, graph, count):
        handles = [n.handle for n in self.graphs[graph].nodes]
        return (CUresult.CUDA_SUCCESS, handles[:count], len(handles))

    def cuGraphNodeGetType(self, node):
        kind = next(n.kind for g in self.graphs.values() for n in g.nodes if n.handle == node)
        return (CUresult.CUDA_SUCCESS, getattr(CUgraphNodeType, f"CU_GRAPH_NODE_TYPE_{kind.upper()}"))

    def enqueue_collective(self, stream, name: str, effect, extra: str | None = None) -> None:
        """A library call's kernel: recorded when `stream` captures (after a node of kind
        `extra`, as NCCL's host callback or event record), else run now."""
        work = KernelLaunch(name, (1, 1, 1), (1, 1, 1), 0, (), run=effect)
        if stream in self.capturing:
            if extra is not None:
                self._add(self.capturing[stream].handle, [], 0, extra)
            self._add(self.capturing[stream].handle, [], 0, "kernel", work)
        else:
            self._execute(work)


@dataclass
class FakeCommunicator:
    """Rank `rank` of `world_size`, over the memory of `fake`."""

    fake: CapturingCuda
    world_size: int = 2
    rank: int = 0
    backend: str = "fake"
    calls: list = field(default_factory=list)  # (collective, count, dtype, op or root, captured)
    state: int = 0  # what async_error answers
    aborted: bool = False
    destroyed: bool = False
    extra_node: str | None = None  # a node kind each recorded call adds before its kernel

    def _array(self, address: int, count: int, dtype: str) -> np.ndarray:
        numpy = np.dtype(DTYPES[dtype].numpy)
        return self.fake._memory(address, count * numpy.itemsize).view(numpy)

    def _enqueue(self, what, stream, detail, count, dtype, effect) -> None:
        handle = next(s for s in self.fake.streams if int(s) == stream)
        self.calls.append((what, count, dtype, detail, handle in self.fake.capturing))
        self.fake.enqueue_collective(handle, f"ncclDevKernel_{what}", effect, self.extra_node)

    def allreduce(self, src, dst, count, dtype, op, stream) -> None:
        factor = self.world_size if op == "sum" else 1
        def effect():
            self._array(dst, count, dtype)[:] = self._array(src, count, dtype) * factor
        self._enqueue("allreduce", stream, op, count, dtype, effect)

    def broadcast(self, src, dst, count, dtype, root, stream) -> None:
        def effect():
            self._array(dst, count, dtype)[:] = self._array(src, count, dtype)
        self._enqueue("broadcast", stream, root, count, dtype, effect)

    def allgather(self, src, dst, count, dtype, stream) -> None:
        def effect():
            self._array(dst, count * self.world_size, dtype)[:] = np.tile(self._array(src, count, dtype), self.world_size)
        self._enqueue("allgather", stream, None, count, dtype, effect)

    def reducescatter(self, src, dst, count, dtype, op, stream) -> None:
        factor = self.world_size if op == "sum" else 1
        def effect():
            mine = self._array(src, count * self.world_size, dtype)[self.rank * count:(self.rank + 1) * count]
            self._array(dst, count, dtype)[:] = mine * factor
        self._enqueue("reducescatter", stream, op, count, dtype, effect)

    def async_error(self) -> int:
        return self.state

    def abort(self) -> None:
        self.aborted = True

    def destroy(self) -> None:
        self.destroyed = True
