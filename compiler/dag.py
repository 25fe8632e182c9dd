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


_READ, _WRITE = int(Mode.READ), int(Mode.WRITE)
# (earlier mode, later mode) -> hazard, on plain ints: this is the compiler's hottest loop.
_HAZARDS = {
    (earlier, later): ("RAW" if earlier & _WRITE and later & _READ else
                       "WAW" if earlier & _WRITE and later & _WRITE else
                       "WAR" if earlier & _READ and later & _WRITE else None)
    for earlier in (1, 2, 3) for later in (1, 2, 3)
}


class _Live:
    """Per buffer, the accesses a later access may still conflict with, as (node index,
    start, stop, mode) tuples. A write that covers an earlier access's range retires it:
    anything that conflicts with the earlier access on those elements conflicts with the
    covering write too, which is already ordered after it."""

    def __init__(self) -> None:
        self.by_buffer: dict[int, list[tuple[int, int, int, int]]] = {}

    def predecessors(self, access: Access, member: int, found: dict[int, tuple[str, str]]) -> None:
        """Add to `found` every earlier node `access` conflicts with: index -> (kind, buffer)."""
        start, stop, mode = access.start, access.stop, int(access.mode)
        for index, e_start, e_stop, e_mode in self.by_buffer.get(id(access.buffer), ()):
            if e_start < stop and start < e_stop and index not in found and index != member:
                kind = _HAZARDS[e_mode, mode]
                if kind:
                    found[index] = (kind, access.buffer.name)

    def add(self, index: int, accesses: tuple[Access, ...]) -> None:
        for access in accesses:
            entries = self.by_buffer.setdefault(id(access.buffer), [])
            start, stop, mode = access.start, access.stop, int(access.mode)
            if mode & _WRITE and any(i != index and start <= s and e <= stop for i, s, e, _ in entries):
                entries[:] = [t for t in entries if t[0] == index or not (start <= t[1] and t[2] <= stop)]
            entries.append((index, start, stop, mode))


def build_dag(body: GraphBody) -> Dag:
    items = body.items
    live = _Live()
    preds: list[dict[int, tuple[str, str]]] = [{} for _ in items]
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
                live.predecessors(access, member, preds[member])
        conflicts += _sibling_conflicts(items, index, end)
        for member in range(index, end):
            live.add(member, items[member].accesses)
        index = end
    edges = [(earlier, member) for member, found in enumerate(preds) for earlier in found]
    reduced = transitive_reduction(len(items), edges)
    return Dag(body, reduced, {(a, b): Hazard(*preds[b][a]) for a, b in reduced}, conflicts)


def _sibling_conflicts(items: list[Node], start: int, end: int) -> list[Conflict]:
    found = []
    for i in range(start, end):
        for j in range(i + 1, end):
            for a in items[i].accesses:
                for b in items[j].accesses:
                    if a.overlaps(b) and (int(a.mode) | int(b.mode)) & _WRITE:
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


def add_lanes(n: int, edges: list[tuple[int, int]], lanes: int) -> list[tuple[int, int]]:
    """The DAG's edges plus the fewest ordering edges (greedily) that leave at most `lanes`
    nodes able to run at once: each node joins a chain whose last node already precedes it
    when one exists, otherwise the chain that frees up first."""
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        preds[b].append(a)
    ancestors = [0] * n
    depth = [0] * n
    tails: list[int | None] = [None] * lanes
    extra: list[tuple[int, int]] = []
    for v in range(n):
        for p in preds[v]:
            ancestors[v] |= ancestors[p] | (1 << p)
            depth[v] = max(depth[v], depth[p] + 1)
        ordered = [lane for lane, t in enumerate(tails) if t is not None and (ancestors[v] >> t) & 1]
        free = [lane for lane, t in enumerate(tails) if t is None]
        if ordered:
            lane = max(ordered, key=lambda l: depth[tails[l]])
        elif free:
            lane = free[0]
        else:
            lane = min(range(lanes), key=lambda l: depth[tails[l]])
            tail = tails[lane]
            extra.append((tail, v))
            ancestors[v] |= ancestors[tail] | (1 << tail)
            depth[v] = max(depth[v], depth[tail] + 1)
        tails[lane] = v
    return transitive_reduction(n, list(edges) + extra)
