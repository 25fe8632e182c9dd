"""Dependency edges from buffer hazards.

Within one graph body, nodes are in program order. A later node depends on an earlier one
when both touch overlapping elements of a buffer and at least one of them writes
(read-after-write, write-after-read, write-after-write). Nodes of one `parallel` block get no
edges among themselves; their conflicts are reported instead (rule PC314). The edges are then
reduced transitively: an edge implied by a longer path is dropped. For the plan, `add_lanes`
bounds how many nodes can run at once.

Every step is meant to cost about linear time and memory when hazards are local (chains,
slices per element, independent nodes): tests/test_dag.py compares all of it with brute force.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise

from .elements import Elements
from .model import GraphBody, Node
from .parallel_conflicts import Conflict, sibling_conflicts, touches


@dataclass(frozen=True)
class Hazard:
    kind: str  # RAW | WAR | WAW
    buffer: str


@dataclass
class Dag:
    body: GraphBody
    edges: list[tuple[int, int]]  # (earlier index, later index) into body.items, reduced
    hazards: dict[tuple[int, int], Hazard]
    conflicts: list[Conflict] = field(default_factory=list)
    # parallel blocks (their `group`) whose conflicts were counted only up to the bound
    counted_in_part: frozenset[int] = frozenset()

    def predecessors(self) -> list[list[int]]:
        preds: list[list[int]] = [[] for _ in self.body.items]
        for a, b in self.edges:
            preds[b].append(a)
        return preds


def hazard_predecessors(items: list[Node]) -> tuple[list[dict[int, tuple[str, str]]], list[Conflict],
                                                   frozenset[int]]:
    """Per node, earlier nodes it must follow, each with the kind and buffer of a hazard between
    them: not reduced, yet not every conflicting pair either (one implied through a later
    write is left out); their transitive closure is that of all conflicting pairs. Also the
    conflicts inside parallel blocks, and the blocks whose conflicts were counted only in part."""
    elements: dict[int, Elements] = {}
    preds: list[dict[int, tuple[str, str]]] = [{} for _ in items]
    conflicts: list[Conflict] = []
    in_part: set[int] = set()
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
                if touches(access) and id(access.buffer) in elements:
                    elements[id(access.buffer)].predecessors(
                        access.start, access.stop, int(access.mode), access.buffer.name, preds[member])
        if end - index > 1:
            found, complete = sibling_conflicts(items, index, end)
            conflicts += found
            if not complete:
                in_part.add(group)
        for member in range(index, end):
            for access in items[member].accesses:
                if not touches(access):
                    continue
                if id(access.buffer) in elements:
                    elements[id(access.buffer)].add(access.start, access.stop, int(access.mode), member, index)
                else:
                    elements[id(access.buffer)] = Elements(access.start, access.stop, int(access.mode), member)
        index = end
    return preds, conflicts, frozenset(in_part)


@contextmanager
def _without_cycle_collection():
    """The edge arithmetic allocates millions of small lists, dicts and tuples and makes no
    cycles; the cyclic collector, triggered by allocation counts, would rescan the whole
    checked program each time (most of the time on 10,000 nodes)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@_without_cycle_collection()
def build_dag(body: GraphBody) -> Dag:
    preds, conflicts, in_part = hazard_predecessors(body.items)
    reduced = _reduce(preds)
    labels: dict[tuple[str, str], Hazard] = {}  # one Hazard per kind and buffer, shared by its edges
    hazards = {}
    for a, b in reduced:
        label = preds[b][a]
        hazards[a, b] = labels.get(label) or labels.setdefault(label, Hazard(*label))
    return Dag(body, reduced, hazards, conflicts, in_part)


def transitive_reduction(n: int, edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Edges of a DAG whose nodes are numbered in topological order, minus every edge implied
    by a longer path. An edge (u, w) is implied when u is an ancestor of another predecessor
    of w. Ancestors are integer bitsets, but only from the lowest node any later test can ask
    about (so a chain's are empty, not quadratic), and each is dropped after its last use."""
    preds: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges:
        preds[b].add(a)
    return _reduce(preds)


def _reduce(unique_preds: Sequence[Iterable[int]]) -> list[tuple[int, int]]:
    """transitive_reduction, from each node's predecessors, without repeats."""
    n = len(unique_preds)
    preds = [sorted(p, reverse=True) for p in unique_preds]
    # lowest[v]: the lowest ancestor of v that is ever looked up, n when none is. w looks up
    # its predecessors in what they reach, and passes on what its own successors look up.
    # last_use[v]: the last node that looks v up (-1: none), seen first as w counts down.
    lowest = [n] * n
    last_use = [-1] * n
    for w in range(n - 1, -1, -1):
        if preds[w]:
            bound = min(preds[w][-1], lowest[w])
            for p in preds[w]:
                if bound < lowest[p]:  # always on p's first sighting: bound <= p < n
                    lowest[p] = bound
                    if last_use[p] < 0:
                        last_use[p] = w
    last_users: list[list[int]] = [[] for _ in range(n)]
    for v, w in enumerate(last_use):
        if w >= 0:
            last_users[w].append(v)
    # v -> (low, bits): bit i for node low + i, trimmed to v's lowest ancestor at or above
    # lowest[v], so a node whose few ancestors lie far back holds a small int, not one as wide
    # as the distance (many slices written, each copied, then all read: quadratic memory)
    ancestors: dict[int, tuple[int, int]] = {}
    kept: list[tuple[int, int]] = []
    for w in range(n):
        if not preds[w]:
            continue
        base = min(preds[w][-1], lowest[w])
        covered = 0
        for p in preds[w]:  # latest first: an earlier one may be an ancestor of a later one
            # a covered p's ancestors are covered already: most of a dense DAG's predecessors
            if not (covered >> (p - base)) & 1:
                kept.append((p, w))
                low, bits = ancestors.get(p, (base, 0))
                covered |= (bits << (low - base) if low >= base else bits >> (base - low)) | 1 << (p - base)
        for p in last_users[w]:
            ancestors.pop(p, None)
        if last_use[w] >= 0 and (bits := covered >> (lowest[w] - base)):
            trim = (bits & -bits).bit_length() - 1
            ancestors[w] = (lowest[w] + trim, bits >> trim)
    return sorted(kept)


class _Reach:
    """Whether one node precedes another, for nodes added in topological order: nodes are put
    in chains greedily, and each node keeps, per chain holding an ancestor of it, its latest
    ancestor there. Narrow DAGs have few chains, so these stay small."""

    def __init__(self) -> None:
        self.chain: list[int] = []
        self.tails: list[int] = []
        self.latest: list[dict[int, int]] = []

    def add(self, node: int, preds: list[int]) -> None:
        latest: dict[int, int] = {}
        for p in preds:
            for chain, u in self.latest[p].items():
                if latest.get(chain, -1) < u:
                    latest[chain] = u
            if latest.get(self.chain[p], -1) < p:
                latest[self.chain[p]] = p
        # a chain whose last node precedes `node`, through any path: joining it keeps the
        # chains as few as the DAG is wide on the shapes pipelines have (fork-joins), and
        # with them each node's dict
        chain = next((c for c, u in latest.items() if self.tails[c] == u), len(self.tails))
        if chain == len(self.tails):
            self.tails.append(node)
        self.tails[chain] = node
        self.chain.append(chain)
        self.latest.append(latest)

    def precedes(self, u: int, v: int) -> bool:
        return self.latest[v].get(self.chain[u], -1) >= u


@_without_cycle_collection()
def add_lanes(n: int, edges: list[tuple[int, int]], lanes: int) -> list[tuple[int, int]]:
    """The DAG's edges plus ordering edges that leave at most `lanes` nodes able to run at once
    (the width: the most nodes no path orders). A DAG that narrow gets no edge. Otherwise the
    nodes are fitted into `lanes` chains in program order: each joins a chain whose last node
    already precedes it when one exists, else the chain that frees up first (one new edge)."""
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        preds[b].append(a)
    chains, fitted = _fewest_chains(n, preds, lanes)
    if fitted == n:
        return transitive_reduction(n, edges)
    lane_of = [0] * n
    for lane, chain in enumerate(chains):
        for v in chain:
            lane_of[v] = lane
    tails = [chain[-1] for chain in chains]
    latest: list[list[int]] = []  # per node, per lane, its latest ancestor there (-1: none)
    depth = [0] * n
    extra: list[tuple[int, int]] = []
    for v in range(n):
        ancestors = [-1] * lanes
        for p in preds[v]:
            ancestors = list(map(max, ancestors, latest[p]))
            ancestors[lane_of[p]] = max(ancestors[lane_of[p]], p)
            depth[v] = max(depth[v], depth[p] + 1)
        if v >= fitted:
            ordered = [lane for lane in range(lanes) if ancestors[lane] == tails[lane]]
            if ordered:
                lane = max(ordered, key=lambda l: depth[tails[l]])
            else:
                lane = min(range(lanes), key=lambda l: depth[tails[l]])
                tail = tails[lane]
                extra.append((tail, v))
                ancestors = list(map(max, ancestors, latest[tail]))
                ancestors[lane] = tail
                depth[v] = max(depth[v], depth[tail] + 1)
            tails[lane], lane_of[v] = v, lane
        latest.append(ancestors)
    return transitive_reduction(n, list(edges) + extra)


def _fewest_chains(n: int, preds: list[list[int]], lanes: int) -> tuple[list[list[int]], int]:
    """A cover of nodes 0 .. fitted-1 by the fewest chains (consecutive members ordered by a
    path), for the longest prefix that `lanes` chains cover; fitted == n when the whole DAG
    is at most `lanes` wide. Each node extends the cover by an augmenting path (Fulkerson's
    proof of Dilworth's theorem), so a new chain opens only when the prefix is that wide."""
    reach = _Reach()
    chains: list[list[int]] = []
    for v in range(n):
        reach.add(v, preds[v])
        if not _augment(v, chains, reach):
            if len(chains) == lanes:
                return chains, v
            chains.append([v])
    return chains, n


def _augment(v: int, chains: list[list[int]], reach: _Reach) -> bool:
    """Fit `v` into the chains without opening one, rearranging them if needed: v follows an
    ancestor u of it, u's former successor x follows another ancestor of x, and so on until
    one of them follows a chain's last node (an augmenting path of the matching "w follows
    u"). Breadth first, trying in each chain only the latest ancestor of x."""
    for chain in chains:
        if reach.precedes(chain[-1], v):
            chain.append(v)
            return True
    reached_from: dict[int, int] = {}  # u -> the node x that would follow it
    follows: dict[int, int] = {}  # x queued -> its present predecessor
    queue = [v]
    for x in queue:
        for chain in chains:
            position = _latest_ancestor(chain, x, reach)
            if position < 0 or chain[position] in reached_from:
                continue
            u = chain[position]
            reached_from[u] = x
            if position == len(chain) - 1:
                _rechain(v, chains, reached_from, follows, u)
                return True
            follows[chain[position + 1]] = u
            queue.append(chain[position + 1])
    return False


def _rechain(v: int, chains: list[list[int]], reached_from: dict[int, int], follows: dict[int, int],
             last: int) -> None:
    """Apply the augmenting path that ends at `last`, a chain's last node; each chain keeps
    its first node."""
    successor = {a: b for chain in chains for a, b in pairwise(chain)}
    u = last
    while True:
        x = reached_from[u]
        successor[u] = x
        if x == v:
            break
        u = follows[x]
    for chain in chains:
        del chain[1:]
        while chain[-1] in successor:
            chain.append(successor[chain[-1]])


def _latest_ancestor(chain: list[int], x: int, reach: _Reach) -> int:
    """The position of the last member of `chain` preceding x, or -1: the members that
    precede x are a prefix of the chain, so a binary search finds it."""
    lo, hi = 0, len(chain)
    while lo < hi:
        mid = (lo + hi) // 2
        if reach.precedes(chain[mid], x):
            lo = mid + 1
        else:
            hi = mid
    return lo - 1
