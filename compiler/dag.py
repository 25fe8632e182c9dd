"""Dependency edges from buffer hazards.

Within one graph body, nodes are in program order. A later node depends on an earlier one
when both touch overlapping elements of a buffer and at least one of them writes
(read-after-write, write-after-read, write-after-write). Nodes of one `parallel` block get no
edges among themselves; their conflicts are reported instead (rule PC314). The edges are then
reduced transitively: an edge implied by a longer path is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import Access, GraphBody, Mode, Node


@dataclass(frozen=True)
class Hazard:
    kind: str  # RAW | WAR | WAW
    buffer: str


@dataclass(frozen=True)
class Conflict:
    """Two nodes of one parallel block touching the same data, at least one writing."""

    first: Access
    second: Access
    first_node: Node
    second_node: Node


@dataclass
class Dag:
    body: GraphBody
    edges: list[tuple[int, int]]  # (earlier index, later index) into body.items, reduced
    hazards: dict[tuple[int, int], Hazard]
    conflicts: list[Conflict] = field(default_factory=list)

    def predecessors(self) -> list[list[int]]:
        preds: list[list[int]] = [[] for _ in self.body.items]
        for a, b in self.edges:
            preds[b].append(a)
        return preds


def _hazard(earlier: Mode, later: Mode) -> str | None:
    if earlier & Mode.WRITE and later & Mode.READ:
        return "RAW"
    if earlier & Mode.WRITE and later & Mode.WRITE:
        return "WAW"
    if earlier & Mode.READ and later & Mode.WRITE:
        return "WAR"
    return None


class _Live:
    """Per buffer, the accesses a later access may still conflict with. A write that covers an
    earlier access's range retires it: anything that conflicts with the earlier access on
    those elements conflicts with the covering write too, which is already ordered after it."""

    def __init__(self) -> None:
        self.by_buffer: dict[int, list[tuple[int, Access]]] = {}

    def conflicts(self, access: Access):
        for index, earlier in self.by_buffer.get(id(access.buffer), ()):
            if earlier.start < access.stop and access.start < earlier.stop:
                kind = _hazard(earlier.mode, access.mode)
                if kind:
                    yield index, kind

    def add(self, index: int, accesses: tuple[Access, ...]) -> None:
        for access in accesses:
            entries = self.by_buffer.setdefault(id(access.buffer), [])
            if access.mode & Mode.WRITE:
                entries[:] = [
                    (i, e) for i, e in entries
                    if i == index or not (access.start <= e.start and e.stop <= access.stop)
                ]
            entries.append((index, access))


def build_dag(body: GraphBody) -> Dag:
    items = body.items
    live = _Live()
    edges: dict[tuple[int, int], Hazard] = {}
    conflicts: list[Conflict] = []
    index = 0
    while index < len(items):
        group = items[index].group
        end = index + 1
        if group is not None:
            while end < len(items) and items[end].group == group:
                end += 1
        # Every member of a parallel block depends on what came before the block, not on
        # its siblings; the block's accesses join the live set only once it is complete.
        for member in range(index, end):
            for access in items[member].accesses:
                for earlier, kind in live.conflicts(access):
                    if earlier != member:
                        edges.setdefault((earlier, member), Hazard(kind, access.buffer.name))
        conflicts += _sibling_conflicts(items, index, end)
        for member in range(index, end):
            live.add(member, items[member].accesses)
        index = end
    reduced = transitive_reduction(len(items), list(edges))
    return Dag(body, reduced, {e: edges[e] for e in reduced}, conflicts)


def _sibling_conflicts(items: list[Node], start: int, end: int) -> list[Conflict]:
    found = []
    for i in range(start, end):
        for j in range(i + 1, end):
            for a in items[i].accesses:
                for b in items[j].accesses:
                    if a.overlaps(b) and (a.mode | b.mode) & Mode.WRITE:
                        found.append(Conflict(a, b, items[i], items[j]))
    return found


def transitive_reduction(n: int, edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Edges of a DAG whose nodes are numbered in topological order, minus every edge implied
    by a longer path. Reachability is kept as one integer bitset per node."""
    successors: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        successors[a].append(b)
    reach = [0] * n
    kept: list[tuple[int, int]] = []
    for node in range(n - 1, -1, -1):
        covered = 0
        for succ in sorted(set(successors[node])):
            if not (covered >> succ) & 1:
                kept.append((node, succ))
            covered |= reach[succ] | (1 << succ)
        reach[node] = covered
    return sorted(kept)
