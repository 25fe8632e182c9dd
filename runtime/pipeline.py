"""A pipeline on the GPU, ready to replay, made from a plan and its compiled modules alone.

Building one checks every kernel's launch resources against the device, allocates and
initialises every buffer, runs the `init` block eagerly, and builds and instantiates the step's
graph. After that a step is one `cuGraphLaunch`: no Python work per node. `pipec.load`
(runtime/load.py) compiles a `.pipe` file into the plan and binaries this takes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..compiler.plan_schema import Plan
from .driver import CudaError, Device, release_device
from .eager import EagerProgram
from .graph import BuiltGraph
from .memory import BufferSet, DeviceBuffer
from .modules import Modules
from .profile import ReplayProfile
from .profile_cupti import profile
from .resources import LaunchLimitsExceeded, check_launch_resources
from .state import load_state, save_state
from .verify import VerifyReport, Writer, verify


class CupyBuffers(Mapping):
    """`pipeline.buffers[name]`: CuPy arrays over the pipeline's own memory (no copy). bf16
    buffers appear as uint16 (CuPy has no bfloat16); `torch.from_dlpack` takes any of them."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self._arrays: dict[str, object] = {}

    def __getitem__(self, name: str):
        if name not in self._arrays:
            import cupy

            buffer = self._pipeline.buffer(name)
            memory = cupy.cuda.UnownedMemory(buffer.device_ptr, buffer.spec.nbytes, owner=self._pipeline,
                                             device_id=self._pipeline.device.ordinal)
            self._arrays[name] = cupy.ndarray(buffer.spec.shape, dtype=buffer.numpy_dtype,
                                              memptr=cupy.cuda.MemoryPointer(memory, 0))
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(b.name for b in self._pipeline.plan.buffers)

    def __len__(self) -> int:
        return len(self._pipeline.plan.buffers)


class Pipeline:
    """The plan made real on `device`, which it takes over (and releases on close).
    `binaries` holds one compiled module per plan module, built for `device.arch`. Raises
    `LaunchLimitsExceeded` when a kernel node asks for more than the device has."""

    def __init__(self, plan: Plan, binaries: Sequence[bytes], device: Device, *,
                 bind: dict[str, object] | None = None, drop_nodes: frozenset[str] = frozenset()) -> None:
        self.plan = plan
        self.device = device
        self.driver = device.driver
        call = self.driver.call
        self._closers: list = [lambda: release_device(self.device)]
        try:
            self.stream = call("cuStreamCreate", self.driver.cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
            self._closers.append(lambda: call("cuStreamDestroy", self.stream))
            self.modules = Modules(binaries, self.device)
            self._closers.append(self.modules.close)
            if findings := check_launch_resources(plan, self.modules):
                raise LaunchLimitsExceeded(findings)
            self._buffers = BufferSet(plan, self.driver, bind)
            self._closers.append(self._buffers.close)
            if plan.init is not None:
                EagerProgram(plan, plan.init, self._buffers, self.modules, self.stream).run(self.stream)
            self.eager = EagerProgram(plan, plan.step, self._buffers, self.modules, self.stream)
            self.graph = BuiltGraph(plan, plan.step, self._buffers, self.modules, self.device,
                                    self.stream, drop_nodes)
            self._closers.append(self.graph.close)
            self.synchronize()
        except BaseException:
            self.close()
            raise
        self.buffers = CupyBuffers(self)
        self._writers = _writer_index(plan)

    # --- running ----------------------------------------------------------------------------

    def step(self, n: int = 1) -> None:
        """Enqueue `n` replays of the step graph (asynchronous; see `synchronize`)."""
        launch, graph_exec, stream = self.driver.cu.cuGraphLaunch, self.graph.exec, self.stream
        success = self.driver.success
        for _ in range(n):
            (err,) = launch(graph_exec, stream)
            if err != success:
                raise CudaError("cuGraphLaunch", self.driver.error_name(err))

    def run_eager(self, n: int = 1, *, synchronize_each: bool = False) -> None:
        """Run the same nodes `n` times, launched one by one in program order."""
        for _ in range(n):
            self.eager.run(self.stream, synchronize_each=synchronize_each)

    def synchronize(self) -> None:
        self.driver.call("cuStreamSynchronize", self.stream)

    def verify(self, steps: int) -> VerifyReport:
        """`steps` eager steps against `steps` graph replays from the same state, bit for bit;
        leaves the state as it was."""
        return verify(self, steps)

    def profile(self, replays: int = 200) -> ReplayProfile:
        """Per-node times inside `replays` graph replays (CUPTI), the critical path and its
        floor, each node's slack, the replay time per step; leaves the state as it was."""
        return profile(self, lambda: BuiltGraph(self.plan, self.plan.step, self._buffers, self.modules,
                                                self.device, self.stream, flatten=True), replays)

    # --- buffers ----------------------------------------------------------------------------

    def buffer(self, name: str) -> DeviceBuffer:
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

    def close(self) -> None:
        try:
            self.driver.call("cuStreamSynchronize", self.stream)
        except (CudaError, AttributeError):
            pass  # a faulted context cannot synchronise; free what can be freed
        while self._closers:
            closer = self._closers.pop()
            try:
                closer()
            except CudaError:
                pass

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
