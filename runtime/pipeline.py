"""A pipeline on the GPU, ready to replay, made from a plan and its compiled modules alone.

Building one checks every kernel's launch resources against the device, allocates and
initialises every buffer, runs the `init` block eagerly, and builds and instantiates the step's
graph. After that a step is one `cuGraphLaunch`: no Python work per node. `pipec.load`
(runtime/load.py) compiles a `.pipe` file into the plan and binaries this takes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..compiler.plan_schema import Plan, collective_sequence
from .collectives import CollectiveFailed, Collectives
from .distributed import Distributed
from .driver import CudaError, Device, release_device, wait_for
from .eager import EagerProgram
from .gemm import GemmSettings
from .gemms import Gemms
from .graph import BuiltGraph
from .memory import BufferSet, DeviceBuffer
from .modules import Modules
from .profile import ProfileError, ReplayProfile
from .profile_cupti import profile
from .resources import LaunchLimitsExceeded, check_launch_resources
from .state import load_state, save_state
from .update import UpdateRefused, changed_kernels
from .verify import VerifyReport, Writer, verify
from .views import BufferViews, ClosedError, stream_handle


class Pipeline:
    """The plan made real on `device`, which it takes over (and releases on close).
    `binaries` holds one compiled module per plan module, built for `device.arch`. Raises
    `LaunchLimitsExceeded` when a kernel node asks for more than the device has. `recompile`
    gives the plan for new constant values (`pipec.load` passes it): what `update` needs.
    `gemm` says how GEMM nodes are realised (the cuBLASLt binding, the algorithm cache, tuning);
    raises `GemmError` when one cannot be. `initial` holds buffers' initial bytes (a bundle's),
    uploaded instead of the values computed from their declarations."""

    def __init__(self, plan: Plan, binaries: Sequence[bytes], device: Device, *,
                 bind: dict[str, object] | None = None, drop_nodes: frozenset[str] = frozenset(),
                 recompile: Callable[[dict[str, object]], Plan] | None = None,
                 gemm: GemmSettings = GemmSettings(), distributed: Distributed | None = None,
                 initial: dict[str, bytes] | None = None) -> None:
        self.plan = plan
        self.device = device
        self.driver = device.driver
        self.closed = False
        self._recompile = recompile
        self._defines: dict[str, object] = {}
        call = self.driver.call
        self._closers: list = [lambda: release_device(self.device)]
        owns_distributed = False
        try:
            self.stream = call("cuStreamCreate", self.driver.cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
            self._closers.append(lambda: call("cuStreamDestroy", self.stream))
            self.modules = Modules(binaries, self.device)
            self._closers.append(self.modules.close)
            if findings := check_launch_resources(plan, self.modules):
                raise LaunchLimitsExceeded(findings)
            self._buffers = BufferSet(plan, self.driver, bind, self.stream, initial)
            self._closers.append(self._buffers.close)
            # The communicator (if any) belongs to the pipeline from here on: closed with it.
            self.distributed = distributed
            self.collectives = None
            if distributed is not None:
                self._closers.append(lambda: distributed.close(failed=self.collectives is not None
                                                               and self.collectives.failed))
                owns_distributed = True
            if distributed is not None and distributed.communicator is not None:
                self.collectives = Collectives(distributed, self._buffers, self.device)
            self.gemms = Gemms(self.device, self._buffers, self.stream, gemm)
            self._closers.append(self.gemms.close)
            if plan.init is not None:
                EagerProgram(plan, plan.init, self._buffers, self.modules, self.stream,
                             self.gemms, self.collectives).run(self.stream)
            self.eager = EagerProgram(plan, plan.step, self._buffers, self.modules, self.stream,
                                      self.gemms, self.collectives)
            self.graph = BuiltGraph(plan, plan.step, self._buffers, self.modules, self.device,
                                    self.stream, drop_nodes, gemms=self.gemms,
                                    collectives=self.collectives)
            self._closers.append(self.graph.close)
            self.synchronize()
        except BaseException:
            self.close()
            if distributed is not None and not owns_distributed:  # failed before taking it over
                distributed.close(failed=True)
            raise
        self.buffers = BufferViews(self)
        self._writers = _writer_index(plan)

    # --- running ----------------------------------------------------------------------------

    def step(self, n: int = 1, *, stream=None) -> None:
        """Enqueue `n` replays of the step graph (asynchronous; see `synchronize`). With
        `stream` (an object with `__cuda_stream__`, such as PyTorch's or CuPy's streams, or a
        raw handle), the replays come after the work enqueued on that stream so far, and work
        enqueued on it later comes after them: ordered on the device, the host never waits."""
        self._check_open()
        if stream is not None:
            handle = stream_handle(stream)
            wait_for(self.driver, self.stream, handle)
        launch, graph_exec, own = self.driver.cu.cuGraphLaunch, self.graph.exec, self.stream
        success = self.driver.success
        for _ in range(n):
            (err,) = launch(graph_exec, own)
            if err != success:
                raise CudaError("cuGraphLaunch", self.driver.error_name(err))
        if stream is not None:
            wait_for(self.driver, handle, self.stream)

    def run_eager(self, n: int = 1, *, synchronize_each: bool = False, stream=None) -> None:
        """Run the same nodes `n` times, launched one by one in program order; `stream` as for
        `step`."""
        self._check_open()
        if stream is not None:
            handle = stream_handle(stream)
            wait_for(self.driver, self.stream, handle)
        for _ in range(n):
            self.eager.run(self.stream, synchronize_each=synchronize_each)
        if stream is not None:
            wait_for(self.driver, handle, self.stream)

    def order_before(self, stream) -> None:
        """Make `stream` (a raw handle or stream object) wait for everything enqueued here so far."""
        wait_for(self.driver, stream_handle(stream), self.stream)

    def update(self, **values) -> list[str]:
        """New values for constants of the file (`update(GAMMA=0.95)`) that only reach kernel
        scalar arguments and launch shapes: the executable graph's kernel nodes and the eager
        launches change in place for the launches enqueued from now on, with no new graph.
        Returns the kernel nodes changed. Raises `UpdateRefused` (naming the first difference)
        when the values change anything else, and `PipelineError` when the file no longer
        checks with them."""
        self._check_open()
        if self._recompile is None:
            raise UpdateRefused("this pipeline was not loaded from a .pipe file; nothing to compile again")
        defines = {**self._defines, **values}
        plan = self._recompile(defines)
        changed = changed_kernels(self.plan, plan, ", ".join(values))
        if findings := check_launch_resources(plan, self.modules):
            raise UpdateRefused("; ".join(f"{f.location}: {f.message}" for f in findings))
        scopes = {node.name: graph.scope for graph in plan.graph_tree(plan.step) for node in graph.nodes}
        for node in changed:
            self.graph.update_kernel(node, scopes[node.name])
            self.eager.update_kernel(node, self._buffers, self.modules, self.stream)
        self.plan = self.graph.plan = plan
        self._defines = defines
        return [node.name for node in changed]

    def synchronize(self) -> None:
        self._check_open()
        self._wait()

    def _wait(self) -> None:
        """Wait for the stream; with collectives, without hanging on a failed rank."""
        if self.collectives is not None:
            self.collectives.wait(self.stream)
        else:
            self.driver.call("cuStreamSynchronize", self.stream)

    def verify(self, steps: int) -> VerifyReport:
        """`steps` eager steps against `steps` graph replays from the same state, bit for bit;
        leaves the state as it was."""
        return verify(self, steps)

    def profile(self, replays: int = 200) -> ReplayProfile:
        """Per-node times inside `replays` graph replays (CUPTI), the critical path and its
        floor, each node's slack, the replay time per step; leaves the state as it was.
        Not for a plan with collective nodes: the profile flattens library recordings into its
        graph, and NCCL's recorded work lives only as long as its own recording."""
        if collective_sequence(self.plan):
            raise ProfileError(f"{self.plan.pipe}: the profile does not cover collective nodes yet; "
                               "profile the pipeline with WORLD_SIZE = 1")
        return profile(self, lambda: BuiltGraph(self.plan, self.plan.step, self._buffers, self.modules,
                                                self.device, self.stream, flatten=True, gemms=self.gemms,
                                                collectives=self.collectives), replays)

    # --- buffers ----------------------------------------------------------------------------

    def buffer(self, name: str) -> DeviceBuffer:
        self._check_open()
        return self._buffers[name]

    def read(self, name: str) -> np.ndarray:
        """A host copy of a buffer, after everything enqueued so far has finished."""
        self.synchronize()
        return self._buffers[name].read()

    def write(self, name: str, array) -> None:
        self.synchronize()
        self._buffers[name].write(np.asarray(array))

    def snapshot(self) -> dict[str, np.ndarray]:
        self.synchronize()
        return {b.name: self._buffers[b.name].read() for b in self.plan.buffers}

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        self.synchronize()
        for name, array in arrays.items():
            self._buffers[name].write(array)

    def readback(self) -> dict[str, float]:
        """The labelled elements of the mapped buffers, by label (or `buffer[i]`)."""
        values: dict[str, float] = {}
        for spec in self.plan.buffers:
            if spec.memory != "mapped":
                continue
            flat = self._buffers[spec.name].host_view().reshape(-1)
            for i, label in enumerate(spec.labels or [f"{spec.name}[{i}]" for i in range(min(flat.size, 8))]):
                values[label] = flat[i].item()
        return values

    def writers_of(self, buffer: str, element: int) -> list[Writer]:
        """The step's nodes that write `buffer[element]`."""
        return [w for start, stop, w in self._writers.get(buffer, ()) if start <= element < stop]

    def save_state(self, folder: str | Path, steps: int = 0) -> Path:
        return save_state(self, Path(folder), steps)

    def load_state(self, folder: str | Path) -> dict[str, str]:
        return load_state(self, Path(folder))

    # --- lifetime ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"{self.plan.pipe}: the pipeline is closed")

    def close(self) -> None:
        self.closed = True
        try:
            self._wait()
        except (CudaError, AttributeError, CollectiveFailed):
            pass  # a faulted context (or an aborted communicator) cannot synchronise; free what can be freed
        first_error: Exception | None = None
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except CudaError:
                pass  # a faulted context: free the rest all the same
            except Exception as error:  # a library's own error: the rest is still freed, then it is raised
                first_error = first_error or error
        if first_error is not None:
            raise first_error

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _writer_index(plan: Plan) -> dict[str, list[tuple[int, int, Writer]]]:
    index: dict[str, list[tuple[int, int, Writer]]] = {}
    for node in plan.leaves(plan.step):
        for access in node.accesses:
            if "w" in access.mode:
                index.setdefault(access.buffer, []).append(
                    (access.start, access.stop, Writer(node.name, node.location)))
    return index
