"""Per-node GPU times from eager runs timed with events, the critical path of the planned
DAG under those times (the floor no schedule can beat), and the measured replay time."""

from __future__ import annotations

import ctypes
import statistics
from dataclasses import dataclass

import networkx as nx

from ..compiler.plan_schema import ChildGraphNodeSpec, Location, Plan
from .driver import Driver


@dataclass(frozen=True)
class NodeTime:
    name: str
    location: Location
    microseconds: float


@dataclass
class ProfileReport:
    nodes: list[NodeTime]  # slowest first
    node_count: int
    critical_path: list[str]
    critical_path_us: float
    replay_us: float  # measured GPU time per replayed step
    eager_us: float  # sum of node times

    @property
    def replay_over_floor(self) -> float:
        return self.replay_us / self.critical_path_us if self.critical_path_us else float("nan")


def leaf_dag(plan: Plan, graph: int) -> nx.DiGraph:
    """The step's DAG over kernel, memset and memcpy nodes, child graphs expanded: an edge into
    a child graph reaches its first nodes, an edge out of it leaves from its last ones."""
    dag = nx.DiGraph()

    def expand(index: int) -> tuple[list[str], list[str]]:
        spec = plan.graphs[index]
        heads, tails = {}, {}
        for node in spec.nodes:
            if isinstance(node, ChildGraphNodeSpec):
                heads[node.id], tails[node.id] = expand(node.graph)
            else:
                dag.add_node(node.name)
                heads[node.id] = tails[node.id] = [node.name]
        for a, b in spec.edges:
            dag.add_edges_from((t, h) for t in tails[a] for h in heads[b])
        has_pred = {b for _, b in spec.edges}
        has_succ = {a for a, _ in spec.edges}
        sources = [n.id for n in spec.nodes if n.id not in has_pred]
        sinks = [n.id for n in spec.nodes if n.id not in has_succ]
        return [h for s in sources for h in heads[s]], [t for s in sinks for t in tails[s]]

    expand(graph)
    return dag


def critical_path(dag: nx.DiGraph, weight: dict[str, float]) -> tuple[list[str], float]:
    best: dict[str, tuple[float, str | None]] = {}
    for node in nx.topological_sort(dag):
        preds = [(best[p][0], p) for p in dag.predecessors(node)]
        length, prev = max(preds, default=(0.0, None))
        best[node] = (length + weight.get(node, 0.0), prev)
    if not best:
        return [], 0.0
    end = max(best, key=lambda n: best[n][0])
    path, node = [], end
    while node is not None:
        path.append(node)
        node = best[node][1]
    return path[::-1], best[end][0]


class _Gate:
    """Holds the stream until every node of a run is enqueued, so the events time the
    kernels back to back rather than the host's launch rate."""

    def __init__(self, driver: Driver, stream) -> None:
        self.driver, self.stream = driver, stream
        cu, call = driver.cu, driver.call
        flags = cu.CU_MEMHOSTALLOC_DEVICEMAP | cu.CU_MEMHOSTALLOC_PORTABLE
        self.host = call("cuMemHostAlloc", 4, flags)
        self.device = call("cuMemHostGetDevicePointer", self.host, 0)
        self.view = ctypes.c_uint32.from_address(int(self.host))

    def close_gate(self) -> None:
        self.view.value = 0
        self.driver.call("cuStreamWaitValue32", self.stream, self.device, 1,
                         self.driver.cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ)

    def open_gate(self) -> None:
        self.view.value = 1

    def free(self) -> None:
        self.driver.call("cuMemFreeHost", self.host)


def profile(pipeline, repeats: int = 20, warmup: int = 3, replays: int = 200) -> ProfileReport:
    plan, stream, eager = pipeline.plan, pipeline.stream, pipeline.eager
    call = pipeline.driver.call
    events = [call("cuEventCreate", 0) for _ in range(len(eager.ops) + 1)]
    samples: list[list[float]] = [[] for _ in eager.ops]
    gate = _Gate(pipeline.driver, stream)
    start = pipeline.snapshot()
    try:
        for repeat in range(warmup + repeats):
            gate.close_gate()
            eager.run(stream, between=lambda i: call("cuEventRecord", events[i], stream))
            call("cuEventRecord", events[-1], stream)
            gate.open_gate()
            call("cuEventSynchronize", events[-1])
            if repeat >= warmup:
                for i in range(len(eager.ops)):
                    samples[i].append(call("cuEventElapsedTime", events[i], events[i + 1]) * 1000)
        pipeline.step(warmup)
        call("cuEventRecord", events[0], stream)
        pipeline.step(replays)
        call("cuEventRecord", events[1], stream)
        call("cuEventSynchronize", events[1])
        replay_us = call("cuEventElapsedTime", events[0], events[1]) * 1000 / replays
    finally:
        gate.free()
        for event in events:
            call("cuEventDestroy", event)
        pipeline.restore(start)
    times = {op.node.name: statistics.median(s) for op, s in zip(eager.ops, samples)}
    path, length = critical_path(leaf_dag(plan, plan.step), times)
    nodes = sorted((NodeTime(op.node.name, op.node.location, times[op.node.name]) for op in eager.ops),
                   key=lambda t: -t.microseconds)
    return ProfileReport(nodes, len(nodes), path, length, replay_us, sum(times.values()))
