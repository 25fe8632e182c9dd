"""The step's profile from inside graph replays: each node's in-graph time, the dependency
latency between nodes, the critical path and its floor, each node's slack, and where a
replay's time goes. Pure analysis of `NodeRecord`s; runtime/profile_collect.py collects them
with CUPTI, and tests feed it synthetic ones.

Definitions, per replay r: a node's duration is its record's end minus start; its dependency
latency is its start minus the end of its latest-finishing predecessor (sources have none); the
replay's span runs from its first node's start to its last node's end. A library node (a GEMM)
may launch several kernels: its record in a replay spans them, from the first one's start to
the last one's end. The critical path is the longest path of the DAG under the median
durations and latencies. The floor is the median over
replays of that path's own length in each replay (its durations plus its latencies): in every
replay the path fits inside the span, so the floor never exceeds the median span. Over a
programmatic edge a node starts before its predecessor ends: its duration includes its wait
(`griddepcontrol.wait`) and its latency is negative, the overlap the edge buys, so the node
time on the path can exceed the floor."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..plan.schema import ChildGraphNodeSpec, GemmNodeSpec, Location, Plan
from ..errors import Error
from ..wording import counted, verb


class ProfileError(Error):
    """The profile cannot be made: records that do not describe the plan's step (a node
    without one record per replay, an id of no node), or a failed CUPTI callback."""


@dataclass(frozen=True)
class NodeRecord:
    """One execution of one graph node, as the activity records give it."""
    graph_node_id: int
    start_ns: int
    end_ns: int
    kind: str  # kernel | memset | memcpy


@dataclass(frozen=True)
class Collection:
    """What a profiling run hands to the analysis."""
    records: list[NodeRecord]
    node_names: dict[int, str]  # graph node id -> plan node name
    replays: int
    event_us: float  # GPU time per replay from CUDA events around the profiled replays


@dataclass(frozen=True)
class NodeProfile:
    name: str
    location: Location
    kind: str
    graph_node_id: int
    microseconds: float  # median in-graph duration
    latency_us: float  # median dependency latency before it starts
    slack_us: float  # latest start minus earliest start under the median times
    critical: bool


@dataclass
class ReplayProfile:
    nodes: list[NodeProfile]  # slowest first
    critical_path: list[str]
    critical_path_us: float  # the floor for one step
    kernel_us: float  # of the floor: kernel, memset and memcpy time on the critical path
    replay_us: float  # median span of a replay, from the records
    event_us: float  # GPU time per replay from CUDA events (includes the gaps between replays)
    replays: int
    timeline: list[dict[str, NodeRecord]]  # each replay's record of each node, by node name

    @property
    def node_count(self) -> int:
        return len(self.nodes)

    @property
    def latency_us(self) -> float:
        """Of the floor: dependency latency on the critical path."""
        return self.critical_path_us - self.kernel_us

    @property
    def idle_us(self) -> float:
        """Of a replay: time beyond the floor (waiting on nodes off the path, launch)."""
        return self.replay_us - self.critical_path_us

    @property
    def replay_over_floor(self) -> float:
        return self.replay_us / self.critical_path_us if self.critical_path_us else float("nan")


@dataclass
class LeafDag:
    """A DAG over node names, in the order the nodes were added: the little of a graph library
    the profile needs."""

    _successors: dict[str, dict[str, None]] = field(default_factory=dict)
    _predecessors: dict[str, dict[str, None]] = field(default_factory=dict)

    def add_node(self, name: str) -> None:
        self._successors.setdefault(name, {})
        self._predecessors.setdefault(name, {})

    def add_edges_from(self, edges: Iterable[tuple[str, str]]) -> None:
        for a, b in edges:
            self.add_node(a)
            self.add_node(b)
            self._successors[a][b] = self._predecessors[b][a] = None

    def __iter__(self) -> Iterator[str]:
        return iter(self._successors)

    @property
    def nodes(self) -> list[str]:
        return list(self._successors)

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [(a, b) for a, successors in self._successors.items() for b in successors]

    def predecessors(self, name: str) -> Iterator[str]:
        return iter(self._predecessors[name])

    def successors(self, name: str) -> Iterator[str]:
        return iter(self._successors[name])

    def in_degree(self, name: str) -> int:
        return len(self._predecessors[name])

    def out_degree(self, name: str) -> int:
        return len(self._successors[name])

    def has_edge(self, a: str, b: str) -> bool:
        return b in self._successors.get(a, {})

    def topological_order(self) -> list[str]:
        """Generation by generation (the sources, then the nodes whose last predecessor was in
        the one before), each in the order its nodes became ready: networkx's order, which
        decides between critical paths of equal length."""
        waiting = {n: len(p) for n, p in self._predecessors.items() if p}
        order, generation = [], [n for n, p in self._predecessors.items() if not p]
        while generation:
            order += generation
            ready = []
            for node in generation:
                for child in self._successors[node]:
                    waiting[child] -= 1
                    if not waiting[child]:
                        ready.append(child)
                        del waiting[child]
            generation = ready
        return order


def leaf_dag(plan: Plan, graph: int) -> LeafDag:
    """The step's DAG over kernel, memset and memcpy nodes, child graphs expanded: an edge into
    a child graph reaches its first nodes, an edge out of it leaves from its last ones."""
    dag = LeafDag()

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


def name_graph_nodes(built: dict[int, str], clones: dict[int, int]) -> dict[int, str]:
    """Plan node names for graph node ids: the ids of the nodes as built, and every clone of
    them (a child graph embedded in its parent, an instantiated graph's nodes), each clone
    followed back through `clones` (clone id -> original id) to a node that was built."""
    names = dict(built)
    for clone in clones:
        origin, seen = clone, set()
        while origin not in built and origin in clones and origin not in seen:
            seen.add(origin)
            origin = clones[origin]
        if origin in built:
            names[clone] = built[origin]
    return names


def replays_by_node(plan: Plan, collection: Collection) -> list[dict[str, NodeRecord]]:
    """Each replay's record of each step node. Replays on one stream do not overlap, so the
    i-th execution of a node belongs to the i-th replay."""
    by_name: dict[str, list[NodeRecord]] = {}
    unnamed = set()
    for record in collection.records:
        name = collection.node_names.get(record.graph_node_id)
        if name is None:
            unnamed.add(record.graph_node_id)
        else:
            by_name.setdefault(name, []).append(record)
    strangers = (f"{counted(len(unnamed), 'graph node id')} in the records "
                 f"{verb('matches', len(unnamed))} no node of the plan")
    for node in plan.leaves(plan.step):
        records = by_name.get(node.name, [])
        if isinstance(node, GemmNodeSpec) and records and len(records) % collection.replays == 0:
            by_name[node.name] = _library_spans(records, len(records) // collection.replays)
    wrong = [(n.name, len(by_name.get(n.name, ()))) for n in plan.leaves(plan.step)
             if len(by_name.get(n.name, ())) != collection.replays]
    if wrong:
        name, count = wrong[0]
        raise ProfileError(f"{counted(len(wrong), 'node')} without one record per replay: `{name}` has {count} "
                           f"for {counted(collection.replays, 'replay')}" + (f"; {strangers}" if unnamed else ""))
    if unnamed:
        raise ProfileError(f"{strangers} (for example {min(unnamed)})")
    for records in by_name.values():
        records.sort(key=lambda r: r.start_ns)
    return [{name: records[i] for name, records in by_name.items()} for i in range(collection.replays)]


def _library_spans(records: list[NodeRecord], per_replay: int) -> list[NodeRecord]:
    """A library node's records (each of the kernels its call launched, `per_replay` in every
    replay) as one record per replay, from its first kernel's start to its last one's end."""
    ordered = sorted(records, key=lambda r: r.start_ns)
    groups = [ordered[i:i + per_replay] for i in range(0, len(ordered), per_replay)]
    return [NodeRecord(g[0].graph_node_id, g[0].start_ns, max(r.end_ns for r in g), "kernel") for g in groups]


def _latencies(dag: LeafDag, replay: dict[str, NodeRecord]) -> dict[str, int]:
    return {node: replay[node].start_ns - max(replay[p].end_ns for p in dag.predecessors(node))
            for node in dag if dag.in_degree(node)}


def _schedule(dag: LeafDag, duration: dict[str, float], latency: dict[str, float]):
    """Earliest and latest starts under `duration` and `latency` (before a node with
    predecessors), and the longest path, first node first."""
    order = dag.topological_order()
    earliest: dict[str, float] = {}
    binding: dict[str, str | None] = {}
    for node in order:
        finish, prev = max(((earliest[p] + duration[p], p) for p in dag.predecessors(node)),
                           default=(0.0, None))
        earliest[node] = finish + latency.get(node, 0.0)
        binding[node] = prev
    makespan = max((earliest[n] + duration[n] for n in order), default=0.0)
    latest: dict[str, float] = {}
    for node in reversed(order):
        bound = min((latest[s] - latency.get(s, 0.0) for s in dag.successors(node)), default=makespan)
        latest[node] = bound - duration[node]
    path, node = [], max(order, key=lambda n: earliest[n] + duration[n], default=None)
    while node is not None:
        path.append(node)
        node = binding[node]
    return earliest, latest, path[::-1]


def analyze(plan: Plan, collection: Collection) -> ReplayProfile:
    if collection.replays < 1:
        raise ProfileError("no replay to analyse")
    timeline = replays_by_node(plan, collection)
    dag = leaf_dag(plan, plan.step)
    durations = [{n: r.end_ns - r.start_ns for n, r in replay.items()} for replay in timeline]
    latencies = [_latencies(dag, replay) for replay in timeline]
    duration = {n: statistics.median(d[n] for d in durations) / 1000 for n in dag}
    latency = {n: statistics.median(g[n] for g in latencies) / 1000 for n in latencies[0]}
    earliest, latest, path = _schedule(dag, duration, latency)
    # The path's own length in each replay telescopes to at most that replay's span.
    path_ns = [sum(d[n] + g.get(n, 0) for n in path) for d, g in zip(durations, latencies)]
    kernel_ns = [sum(d[n] for n in path) for d in durations]
    spans = [max(r.end_ns for r in replay.values()) - min(r.start_ns for r in replay.values())
             for replay in timeline]
    first = timeline[0]
    nodes = sorted(
        (NodeProfile(n.name, n.location, first[n.name].kind, first[n.name].graph_node_id, duration[n.name],
                     latency.get(n.name, 0.0), max(0.0, latest[n.name] - earliest[n.name]), n.name in path)
         for n in plan.leaves(plan.step)),
        key=lambda p: -p.microseconds)
    return ReplayProfile(nodes, path, statistics.median(path_ns) / 1000, statistics.median(kernel_ns) / 1000,
                         statistics.median(spans) / 1000, collection.event_us, collection.replays, timeline)
