"""Library nodes: one vendor-library call (a cuBLASLt matmul, an NCCL collective) recorded into a
graph pipec owns, then added to the step as a child graph node.

This is the only stream capture in pipec, and it is scoped to the one call: a private stream,
capture mode `THREAD_LOCAL` (another thread's work is not affected), begun right before the
call and ended right after it. pipec cannot build a library's nodes itself because it does not
know which kernels the library launches; it can inspect what the library recorded. A recording
holding anything but kernel and memset nodes (a host callback, a copy, an allocation, an event)
is refused, naming what was found: such nodes are the capture pitfalls docs/rules.md forbids in
a pipeline's own nodes. A caller may admit more, each with its reason: runtime/collectives.py
admits NCCL's host node and copies within device memory (on a communicator of one rank NCCL copies
instead of communicating). What makes a copy a pitfall is host memory: one to or from it inside a
replay is the host back in the loop (PC304), while a device-to-device copy the library recorded is
an explicit node of the graph, replayed as pipec's own memcpy nodes are. So a copy is judged by
its ends, which the node's parameters give (a unified address, as `cudaMemcpyDefault` records,
is asked of the driver), and a refused one is named by them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import Error
from ..wording import counted
from .driver import CudaError, Device

ALLOWED_NODE_TYPES = ("KERNEL", "MEMSET")
DEVICE_COPIES = "MEMCPY"  # in `allowed`: copies whose both ends are device memory


class LibraryRecordingError(Error):
    """A library call recorded something a graph replay cannot be trusted with, or failed."""


@dataclass
class Recording:
    graph: object  # the CUgraph holding the call's nodes; destroyed by `close`
    node_types: tuple[str, ...]  # CU_GRAPH_NODE_TYPE_ names without the prefix, in graph order
    kernels: tuple[str, ...]  # the kernels' function names, where the driver reports them
    copies: tuple[tuple[str, str], ...]  # each copy's (source, destination) memory: device, host or array

    def close(self, device: Device) -> None:
        if self.graph is not None:
            device.driver.call("cuGraphDestroy", self.graph)
            self.graph = None


def record_call(device: Device, what: str, call: Callable[[object], object],
                allowed: tuple[str, ...] = ALLOWED_NODE_TYPES) -> Recording:
    """Records `call(stream)` on a private stream into a new graph, and inspects it.

    `what` names the call in errors ("gemm `fc1` (c51_step.pipe:80:5)"). The caller owns the
    recording: `cuGraphAddChildGraphNode` clones it into each graph that embeds it. `allowed`
    widens the node types a library may record, each with its reason at the caller; with
    `DEVICE_COPIES`, copies within device memory only."""
    # One body for the capture's whole life, longer than most: every path through it must end
    # the capture and free the stream and a refused graph, which is easiest seen in one place.
    driver, cu = device.driver, device.driver.cu
    stream = driver.call("cuStreamCreate", cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
    graph = None
    try:
        driver.call("cuStreamBeginCapture", stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        failure: BaseException | None = None
        try:
            call(stream)
        except BaseException as error:  # noqa: BLE001 - the capture must end whatever happened
            failure = error
        # End the capture even when the call failed, or the stream stays unusable.
        graph, ended = _end_capture(driver, stream)
        if isinstance(failure, Error) or (failure is not None and not isinstance(failure, Exception)):
            raise failure  # pipec's own errors name the node already; an interrupt stays one
        if failure is not None:  # the binding's own exception types
            raise LibraryRecordingError(f"{what}: the library call failed: "
                                        f"{type(failure).__name__}: {failure}") from None
        if graph is None:
            raise LibraryRecordingError(f"{what}: the library call could not be recorded: "
                                        f"cuStreamEndCapture failed with {ended} (the call did "
                                        "something stream capture forbids)")
        recording = _inspect(device, graph)
    except BaseException as error:
        if graph is not None:
            driver.call("cuGraphDestroy", graph)
        if isinstance(error, CudaError):  # the driver's, around the call
            raise LibraryRecordingError(f"{what}: recording the library call failed: {error}") from None
        raise
    finally:
        driver.call("cuStreamDestroy", stream)
    refused = _refused(recording, allowed)
    if refused:
        recording.close(device)
        raise LibraryRecordingError(
            f"{what}: the library call recorded {counted(len(refused), 'node')} of another kind "
            f"({', '.join(sorted(set(refused)))}); a library node may hold {_admitted(allowed)} only")
    return recording


def _refused(recording: Recording, allowed: tuple[str, ...]) -> list[str]:
    """The recording's nodes that `allowed` does not admit, each named by its type or, where
    device copies are admitted, a copy that touches other memory by its ends (native/src/library.c
    names them in the same words)."""
    refused = [t.lower() for t in recording.node_types if t not in allowed]
    if DEVICE_COPIES in allowed:
        refused += [f"a copy from {src} to {dst} memory" for src, dst in recording.copies
                    if (src, dst) != ("device", "device")]
    return refused


def _admitted(allowed: tuple[str, ...]) -> str:
    """What a recording may hold, in words: `kernel, memset nodes`, `... and device-to-device copies`."""
    nodes = ", ".join(t.lower() for t in allowed if t != DEVICE_COPIES) + " nodes"
    return f"{nodes} and device-to-device copies" if DEVICE_COPIES in allowed else nodes


def _end_capture(driver, stream) -> tuple[object | None, str]:
    """(the recorded graph, "") or, when the capture was invalidated, (None, the error's name)."""
    result = driver.cu.cuStreamEndCapture(stream)
    if result[0] != driver.success:
        return None, driver.error_name(result[0])
    return result[1], ""


def graph_nodes(call, graph) -> list:
    """The nodes of `graph` (`cuGraphGetNodes`, asked for the count first)."""
    count = call("cuGraphGetNodes", graph, 0)[-1]
    return list(call("cuGraphGetNodes", graph, count)[0])[:count] if count else []


def _inspect(device: Device, graph) -> Recording:
    driver, cu = device.driver, device.driver.cu
    types, kernels, copies = [], [], []
    for node in graph_nodes(driver.call, graph):
        kind = driver.call("cuGraphNodeGetType", node)
        name = cu.CUgraphNodeType(kind).name.removeprefix("CU_GRAPH_NODE_TYPE_")
        types.append(name)
        if name == "KERNEL":
            kernels.append(_kernel_name(driver, node))
        elif name == "MEMCPY":
            params = driver.call("cuGraphMemcpyNodeGetParams", node)
            copies.append((_memory(driver, params.srcMemoryType, params.srcDevice),
                           _memory(driver, params.dstMemoryType, params.dstDevice)))
    return Recording(graph, tuple(types), tuple(k for k in kernels if k), tuple(copies))


def _memory(driver, kind, address) -> str:
    """A copy's end as `device`, `host` or `array`. A unified address (`cudaMemcpyDefault`'s) is
    asked of the driver; one it does not know is pageable host memory."""
    cu = driver.cu
    if int(kind) == cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED:
        found = cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address)
        kind = found[1] if found[0] == driver.success else cu.CUmemorytype.CU_MEMORYTYPE_HOST
    return cu.CUmemorytype(int(kind)).name.removeprefix("CU_MEMORYTYPE_").lower()


def _kernel_name(driver, node) -> str:
    """The kernel's mangled name (`cuFuncGetName`, CUDA 12.3+), or "" where it is unknown."""
    try:
        params = driver.call("cuGraphKernelNodeGetParams", node)
        name = driver.call("cuFuncGetName", params.func)
    except (Error, AttributeError):
        return ""
    return name.decode() if isinstance(name, bytes) else str(name)
