"""Profiling graph replays with CUPTI, through NVIDIA's cupti-python (imported only here, and
only when a profile is asked for).

The profile builds its own instance of the step graph while subscribed to CUPTI's
`GRAPHNODE_CLONED` resource callback: the build knows the handle of every node it adds
(`BuiltGraph.leaf_nodes`), and the callback reports each copy the driver makes of a node (a
child graph embedded into its parent, the graph instantiated), so every graph node id that an
activity record can carry leads back to a plan node (a GEMM node's recorded nodes are copied
into the profiled graph, `BuiltGraph.library_nodes`, and all lead back to it). The kernel, memset and memcpy activity
records of the profiled replays carry those ids (`graph_node_id`) with GPU start and end
timestamps in nanoseconds. runtime/profile_analysis.py turns them into the profile."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import Error
from .profile_analysis import Collection, NodeRecord, ProfileError, ReplayProfile, analyze, name_graph_nodes

PACKAGE = "cupti-python"
BUFFER_BYTES = 8 << 20
# CUPTI's activity kinds for work that graph nodes do, and the record kind each becomes.
ACTIVITY_KINDS = {"CONCURRENT_KERNEL": "kernel", "MEMSET": "memset", "MEMCPY": "memcpy"}


class ProfilerUnavailable(Error):
    """No CUPTI to profile with: cupti-python missing or not loadable, or CUPTI refusing to
    trace (another subscriber, a driver older than the CUPTI)."""


def load_cupti():
    try:
        from cupti import cupti
    except Exception as error:  # noqa: BLE001 - not installed, or its libcupti or cuda-bindings missing
        raise ProfilerUnavailable(f"profiling needs NVIDIA's CUPTI for Python: pip install 'pipec[profile12]' "
                                  f"(or profile13 for CUDA 13, which installs {PACKAGE}) "
                                  f"({type(error).__name__}: {error})") from None
    return cupti


# The activity buffer callbacks are registered once per process (per `cupti` module) and
# deliver to the tracer in use; the callables are kept here, as CUPTI holds only C pointers.
_registered: dict[object, tuple] = {}


class _Tracer:
    """One CUPTI subscription: clone events while a graph is built and instantiated, activity
    records while it replays. CUPTI calls back from inside driver calls, so a callback only
    copies what it needs; an error in one is raised after the run, never into CUPTI."""

    def __init__(self, cupti) -> None:
        self.cupti = cupti
        self.clones: dict[int, int] = {}  # cloned node id -> the id of the node it copies
        self.records: list[NodeRecord] = []
        self.errors: list[str] = []
        self.kinds = {int(getattr(cupti.ActivityKind, k)): v for k, v in ACTIVITY_KINDS.items()}
        self._callback = self._on_callback  # kept alive while subscribed
        self.subscriber = None
        try:
            self.subscriber = cupti.subscribe(self._callback, None)
            cupti.enable_callback(1, self.subscriber, cupti.CallbackDomain.RESOURCE,
                                  cupti.CallbackIdResource.GRAPHNODE_CLONED)
            if cupti not in _registered:
                tracer: list = [None]
                callbacks = (lambda: (BUFFER_BYTES, 0),  # 0: no limit on the records per buffer
                             lambda activities: tracer[0]._buffer_completed(activities))
                cupti.activity_register_callbacks(*callbacks)
                _registered[cupti] = (tracer, callbacks)
            _registered[cupti][0][0] = self
            for kind in self.kinds:
                cupti.activity_enable(kind)
        except Exception as error:  # noqa: BLE001 - cupti-python's errors: a second subscriber, an old driver
            if self.subscriber is not None:
                cupti.unsubscribe(self.subscriber)
            raise ProfilerUnavailable(f"CUPTI cannot trace here (is another profiler attached?): "
                                      f"{type(error).__name__}: {error}") from None

    def _on_callback(self, userdata, domain, callback_id, data) -> None:
        cupti = self.cupti
        cloned = (cupti.CallbackDomain.RESOURCE, cupti.CallbackIdResource.GRAPHNODE_CLONED)
        if (domain, callback_id) != cloned:
            return
        try:
            if not hasattr(data, "resource_descriptor"):  # a raw CUpti_ResourceData pointer
                data = cupti.ResourceData.from_ptr(int(data))
            graph = cupti.GraphData.from_ptr(int(data.resource_descriptor))
            node_id = cupti.get_graph_node_id
            self.clones[node_id(int(graph.node))] = node_id(int(graph.original_node))
        except Exception as error:  # noqa: BLE001 - nothing may propagate into CUPTI
            self.errors.append(f"{type(error).__name__}: {error}")

    def _buffer_completed(self, activities) -> None:
        try:
            for activity in activities:
                kind = self.kinds.get(int(activity.kind))
                if kind is not None and activity.graph_node_id:  # work done by a graph node
                    self.records.append(NodeRecord(int(activity.graph_node_id), int(activity.start),
                                                   int(activity.end), kind))
        except Exception as error:  # noqa: BLE001 - nothing may propagate into CUPTI
            self.errors.append(f"{type(error).__name__}: {error}")

    def flush(self) -> None:
        self.cupti.activity_flush_all(self.cupti.ActivityFlag.FLUSH_FORCED)  # incomplete buffers too

    def close(self) -> None:
        self.flush()
        for kind in self.kinds:
            self.cupti.activity_disable(kind)
        self.cupti.unsubscribe(self.subscriber)
        if self.errors:
            raise ProfileError(f"a CUPTI callback failed: {self.errors[0]}")


def collect(pipeline, build: Callable, replays: int, warmup: int = 3, cupti=None) -> Collection:
    """Replay a fresh instance of the step graph (`build()`, a `BuiltGraph`) `replays` times
    under CUPTI and return the records of those replays, the names of their graph node ids, and
    the GPU time per replay from CUDA events."""
    tracer = _Tracer(cupti or load_cupti())
    call, stream = pipeline.driver.call, pipeline.stream
    events = []
    try:
        graph = build()
        try:
            for _ in range(warmup):
                call("cuGraphLaunch", graph.exec, stream)
            pipeline.synchronize()
            tracer.flush()
            tracer.records.clear()  # the warm-up replays' records
            events = [call("cuEventCreate", 0) for _ in range(2)]
            call("cuEventRecord", events[0], stream)
            for _ in range(replays):
                call("cuGraphLaunch", graph.exec, stream)
            call("cuEventRecord", events[1], stream)
            call("cuEventSynchronize", events[1])
            event_us = call("cuEventElapsedTime", events[0], events[1]) * 1000 / replays
            tracer.flush()
            node_id = tracer.cupti.get_graph_node_id
            built = {node_id(int(handle)): name for name, handle in graph.leaf_nodes.items()}
            built |= {node_id(int(handle)): name for name, handles in graph.library_nodes.items() for handle in handles}
        finally:
            graph.close()
    finally:
        for event in events:
            call("cuEventDestroy", event)
        tracer.close()
    return Collection(list(tracer.records), name_graph_nodes(built, tracer.clones), replays, event_us)


def profile(pipeline, build: Callable, replays: int = 200, cupti=None) -> ReplayProfile:
    """The replay profile of `pipeline`'s step; leaves every buffer as it was."""
    if replays < 1:
        raise ValueError("profile at least one replay")
    start = pipeline.snapshot()
    try:
        collection = collect(pipeline, build, replays, cupti=cupti)
    finally:
        pipeline.restore(start)
    return analyze(pipeline.plan, collection)
