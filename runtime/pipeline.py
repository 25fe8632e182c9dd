"""A pipeline on the GPU, ready to replay, made from a plan and its compiled modules alone.

Building one checks every kernel's launch resources against the device, allocates and
initialises every buffer, runs the `init` block eagerly, and builds and instantiates the step's
graph. After that a step is one `cuGraphLaunch`: no Python work per node. `pipec.load`
(runtime/load.py) compiles a `.pipe` file into the plan and binaries this takes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from ..api_arguments import ArgumentError, constants, file_path, whole_number
from ..plan.gemm_algorithms import file_json
from ..plan.schema import Plan, collective_sequence
from ..wording import counted
from .collectives import CollectiveFailed, Collectives
from .distributed import Distributed
from .driver import CudaError, Device, release_device, wait_for
from .eager import EagerProgram
from .cublaslt import GemmError, GemmSettings
from .gemm_nodes import GemmChoice, Gemms
from .graph import BuiltGraph
from .memory import BufferSet, DeviceBuffer
from .modules import Modules
from .profile_analysis import ProfileError, ReplayProfile
from .profile_collect import profile
from .resources import LaunchLimitsExceeded, check_launch_resources
from .state import load_state, save_state
from .live import live_update, new_values
from .update import UpdateRefused, changed_kernels
from .verify import VerifyReport, Writer, verify
from .views import BufferViews, ClosedError, stream_handle


class Pipeline:
    """The plan made real on `device`, which it takes over (and releases on close), with the
    ranks' connection `distributed` if any. `binaries` holds one compiled module per plan module,
    built for `device.arch`. Raises `LaunchLimitsExceeded` when a kernel node asks for more than
    the device has. `recompile` gives the plan for new constant values (`pipec.load` passes it),
    which `update` compares; without it, `update` applies the plan's live-update record. `gemm` says how GEMM nodes are realised (the cuBLASLt binding, the
    algorithm cache, tuning); raises `GemmError` when one cannot be. `initial` holds
    buffers' initial bytes (a bundle's), uploaded instead of the values computed from their
    declarations."""

    def __init__(self, plan: Plan, binaries: Sequence[bytes], device: Device, *,
                 bind: Mapping[str, object] | None = None, drop_nodes: frozenset[str] = frozenset(),
                 recompile: Callable[[dict[str, object]], Plan] | None = None,
                 gemm: GemmSettings = GemmSettings(), distributed: Distributed | None = None,
                 initial: Mapping[str, bytes] | None = None) -> None:
        self.plan = plan
        self.device = device
        self.driver = device.driver
        self.distributed = distributed
        self.collectives: Collectives | None = None
        self.closed = False
        self._recompile = recompile
        self._defines: dict[str, object] = {}
        self._owned = ExitStack()  # what close() frees, in reverse order of making
        self._own(lambda: release_device(device))
        with ExitStack() as if_it_fails:
            if distributed is not None:  # before the pipeline took it over; after, a no-op
                if_it_fails.callback(distributed.close, failed=True)
            if_it_fails.callback(self.close)
            self._build(binaries, bind, drop_nodes, gemm, initial)
            if_it_fails.pop_all()
        self.buffers = BufferViews(self)
        self._writers = _writer_index(plan)

    def _build(self, binaries: Sequence[bytes], bind: Mapping[str, object] | None,
               drop_nodes: frozenset[str], gemm: GemmSettings, initial: Mapping[str, bytes] | None) -> None:
        """Everything the pipeline makes, in order, each owned as soon as it exists: the stream,
        the modules (checked against the device's limits), the buffers, the communicator, the
        GEMMs, the `init` block run eagerly, the step's eager program and its graph."""
        plan, call = self.plan, self.driver.call
        self.stream = call("cuStreamCreate", self.driver.cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        self._own(lambda: call("cuStreamDestroy", self.stream))
        self.modules = Modules(binaries, self.device)
        self._own(self.modules.close)
        if findings := check_launch_resources(plan, self.modules):
            raise LaunchLimitsExceeded(findings)
        self._buffers = BufferSet(plan, self.driver, bind, self.stream, initial)
        self._own(self._buffers.close)
        if self.distributed is not None:  # the communicator is closed with the pipeline from here on
            self._own(self._close_distributed)
            if self.distributed.communicator is not None:
                self.collectives = Collectives(self.distributed, self._buffers, self.device)
        self.gemms = Gemms(self.device, self._buffers, self.stream, gemm)
        self._own(self.gemms.close)
        if plan.init is not None:
            self._eager_program(plan.init).run(self.stream)
        self.eager = self._eager_program(plan.step)
        self.graph = BuiltGraph(plan, plan.step, self._buffers, self.modules, self.device,
                                self.stream, drop_nodes, gemms=self.gemms, collectives=self.collectives)
        self._own(self.graph.close)
        self.synchronize()

    def _eager_program(self, graph: int) -> EagerProgram:
        return EagerProgram(self.plan, graph, self._buffers, self.modules, self.stream, self.gemms,
                            self.collectives)

    def _own(self, close: Callable[[], None]) -> None:
        self._owned.callback(_free, close)

    def _close_distributed(self) -> None:
        assert self.distributed is not None
        self.distributed.close(failed=self.collectives is not None and self.collectives.failed)

    # --- running ----------------------------------------------------------------------------

    def step(self, n: int = 1, *, stream=None) -> None:
        """Enqueue `n` replays of the step graph (asynchronous; see `synchronize`). With
        `stream` (an object with `__cuda_stream__`, such as PyTorch's or CuPy's streams, or a
        raw handle), the replays come after the work enqueued on that stream so far, and work
        enqueued on it later comes after them: ordered on the device, the host never waits."""
        n = whole_number("step(n)", n)
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
        n = whole_number("run_eager(n)", n)
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
        Returns the kernel nodes changed. A pipeline loaded from a `.pipe` file compiles it again
        with the new values (any `-D` expression) and compares the plans; one from a bundle
        computes them from the plan's live-update record (numbers and booleans). Raises
        `UpdateRefused` (naming the first difference, or the constant's structural use) when the
        values change anything else, `PipelineError` when the file no longer checks with them,
        and `ArgumentError` for a bundle's unknown constant. Nothing changes on a refusal."""
        self._check_open()
        if self._recompile is None:
            plan, changed = live_update(self.plan, new_values("update", values))
            defines = self._defines
        else:
            texts = constants("update", values)
            defines = {**self._defines, **texts}
            plan = self._recompile(defines)
            changed = changed_kernels(self.plan, plan, ", ".join(texts))
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
        return verify(self, whole_number("verify(steps)", steps, 1))

    def profile(self, replays: int = 200) -> ReplayProfile:
        """Per-node times inside `replays` graph replays (CUPTI), the critical path and its
        floor, each node's slack, the replay time per step; leaves the state as it was.
        Not for a plan with collective nodes: the profile flattens library recordings into its
        graph, and NCCL's recorded work lives only as long as its own recording."""
        replays = whole_number("profile(replays)", replays, 1)
        if collective_sequence(self.plan):
            raise ProfileError(f"{self.plan.pipe}: the profile does not cover collective nodes yet; "
                               "profile the pipeline with WORLD_SIZE = 1")
        return profile(self, lambda: BuiltGraph(self.plan, self.plan.step, self._buffers, self.modules,
                                                self.device, self.stream, flatten=True, gemms=self.gemms,
                                                collectives=self.collectives), replays)

    # --- buffers ----------------------------------------------------------------------------

    def buffer(self, name: str) -> DeviceBuffer:
        self._check_open()
        return self._named(name)

    def read(self, name: str) -> np.ndarray:
        """A host copy of a buffer, after everything enqueued so far has finished."""
        self.synchronize()
        return self._named(name).read()

    def write(self, name: str, array) -> None:
        """Values of the buffer's shape (or flat, as many) and a type they convert to without
        loss of kind: no floats into an integer buffer."""
        self.synchronize()
        self._named(name).write(array)

    def snapshot(self) -> dict[str, np.ndarray]:
        self.synchronize()
        return {b.name: self._buffers[b.name].read() for b in self.plan.buffers}

    def restore(self, arrays: dict[str, np.ndarray]) -> None:
        """Buffers' contents from arrays by name (a `snapshot()`, or some of it); all of them
        are checked before any is written. Tables of addresses keep this pipeline's addresses."""
        self.synchronize()
        if not isinstance(arrays, Mapping):
            raise ArgumentError(f"restore(arrays = {type(arrays).__name__}): expected a mapping of "
                                "buffer names to arrays, such as a snapshot()")
        fitting = {name: self._named(name).fitting(array) for name, array in arrays.items()}
        for name, array in fitting.items():
            self._buffers[name].write(array)
        self._buffers.fill_tables()

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
        spec = self._named(buffer).spec
        element = whole_number("writers_of(element)", element)
        if element >= math.prod(spec.shape):
            raise ArgumentError(f"writers_of: `{buffer}` has {counted(math.prod(spec.shape), 'element')}, "
                                f"not an element {element}")
        return [w for start, stop, w in self._writers.get(buffer, ()) if start <= element < stop]

    def save_state(self, folder: str | Path, steps: int = 0) -> Path:
        return save_state(self, file_path("save_state(folder)", folder), steps)

    def load_state(self, folder: str | Path) -> dict[str, str]:
        return load_state(self, file_path("load_state(folder)", folder))

    @property
    def gemm_choices(self) -> tuple[GemmChoice, ...]:
        """How each GEMM node's algorithm was chosen, in the order the nodes were prepared: for a
        bundle, its stored algorithm or the heuristic's and why (what the C runtime's
        `pipec_gemm_at` reports)."""
        return tuple(self.gemms.choices.values())

    def gemm_algorithms(self) -> dict:
        """The algorithm each GEMM node runs on this GPU, as the GEMM algorithms file holds it
        (plan/gemm_algorithms.py): what `piperun --save-gemm-algorithms` writes and `pipec build
        --gemm-algorithms` stores in a bundle. Raises GemmError for a plan without GEMM nodes."""
        self._check_open()
        if not self.gemms.ops:
            raise GemmError(f"{self.plan.pipe} has no GEMM nodes: there are no algorithms to save")
        return file_json(self.gemms.stored(self.plan.pipe))

    def _named(self, name: str) -> DeviceBuffer:
        if not isinstance(name, str) or name not in self._buffers.buffers:
            raise ArgumentError(f"{self.plan.pipe} has no buffer named {name!r} (it has "
                                f"{', '.join(b.name for b in self.plan.buffers) or 'none'})")
        return self._buffers[name]

    # --- lifetime ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError(f"{self.plan.pipe}: the pipeline is closed")

    def close(self) -> None:
        """Free everything the pipeline made, the last made first. A library's own error while
        freeing is raised once the rest is freed too (of several, the last, with the others as
        its context)."""
        self.closed = True
        try:
            self._wait()
        except (CudaError, AttributeError, CollectiveFailed):
            pass  # a faulted context (or an aborted communicator) cannot synchronise; free what can be freed
        self._owned.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _free(close: Callable[[], None]) -> None:
    try:
        close()
    except CudaError:
        pass  # a faulted context: free the rest all the same


def _writer_index(plan: Plan) -> dict[str, list[tuple[int, int, Writer]]]:
    index: dict[str, list[tuple[int, int, Writer]]] = {}
    for node in plan.leaves(plan.step):
        for access in node.accesses:
            if "w" in access.mode:
                index.setdefault(access.buffer, []).append(
                    (access.start, access.stop, Writer(node.name, node.location)))
    return index
