"""Library nodes: one vendor-library call (a cuBLASLt matmul, an NCCL collective) recorded into a
graph pipec owns, then added to the step as a child graph node.

This is the only stream capture in pipec, and it is scoped to the one call: a private stream,
capture mode `THREAD_LOCAL` (another thread's work is not affected), begun right before the
call and ended right after it. pipec cannot build a library's nodes itself because it does not
know which kernels the library launches; it can inspect what the library recorded. A recording
holding anything but kernel and memset nodes (a host callback, a copy, an allocation, an event)
is refused, naming what was found: such nodes are the capture pitfalls docs/rules.md forbids in
a pipeline's own nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import Error
from ..wording import counted
from .driver import CudaError, Device

ALLOWED_NODE_TYPES = ("KERNEL", "MEMSET")


class LibraryRecordingError(Error):
    """A library call recorded something a graph replay cannot be trusted with, or failed."""


@dataclass
class Recording:
    graph: object  # the CUgraph holding the call's nodes; destroyed by `close`
    node_types: tuple[str, ...]  # CU_GRAPH_NODE_TYPE_ names without the prefix, in graph order
    kernels: tuple[str, ...]  # the kernels' function names, where the driver reports them

    def close(self, device: Device) -> None:
        if self.graph is not None:
            device.driver.call("cuGraphDestroy", self.graph)
            self.graph = None


def record_call(device: Device, what: str, call: Callable[[object], object],
                allowed: tuple[str, ...] = ALLOWED_NODE_TYPES) -> Recording:
    """Records `call(stream)` on a private stream into a new graph, and inspects it.

    `what` names the call in errors ("gemm `fc1` (c51_step.pipe:80:5)"). The caller owns the
    recording: `cuGraphAddChildGraphNode` clones it into each graph that embeds it. `allowed`
    widens the node types a library may record, each with its reason at the caller."""
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
    refused = [t for t in recording.node_types if t not in allowed]
    if refused:
        recording.close(device)
        raise LibraryRecordingError(
            f"{what}: the library call recorded {counted(len(refused), 'node')} of another kind "
            f"({', '.join(sorted(set(refused))).lower()}); a library node may hold "
            f"{', '.join(allowed).lower()} nodes only")
    return recording


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
    types, kernels = [], []
    for node in graph_nodes(driver.call, graph):
        kind = driver.call("cuGraphNodeGetType", node)
        name = cu.CUgraphNodeType(kind).name.removeprefix("CU_GRAPH_NODE_TYPE_")
        types.append(name)
        if name == "KERNEL":
            kernels.append(_kernel_name(driver, node))
    return Recording(graph, tuple(types), tuple(k for k in kernels if k))


def _kernel_name(driver, node) -> str:
    """The kernel's mangled name (`cuFuncGetName`, CUDA 12.3+), or "" where it is unknown."""
    try:
        params = driver.call("cuGraphKernelNodeGetParams", node)
        name = driver.call("cuFuncGetName", params.func)
    except (Error, AttributeError):
        return ""
    return name.decode() if isinstance(name, bytes) else str(name)
