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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import wraps
from itertools import pairwise
from typing import ParamSpec, TypeVar

from .elements import Elements
from .model import CONTAINERS, GraphBody, Node
from .parallel_conflicts import Conflict, sibling_conflicts, touches

P = ParamSpec("P")
R = TypeVar("R")


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


Predecessors = tuple[list[int], list[tuple[str, str]]]  # latest first, and the hazard of each


def hazard_predecessors(items: list[Node]) -> tuple[list[Predecessors], list[Conflict], frozenset[int]]:
    """Per node, earlier nodes it must follow, latest first, each with the kind and buffer of a
    hazard between them: not reduced, yet not every conflicting pair either (one implied through
    a later write is left out); their transitive closure is that of all conflicting pairs. Also
    the conflicts inside parallel blocks, and the blocks whose conflicts were counted only in
    part. Two lists a node, not the dict that finds them: a dense DAG has a hundred
    predecessors a node (the benchmark's `random` shape, 8 GB in dicts at a million nodes)."""
    preds: list[Predecessors] = [([], []) for _ in items]
    if len(items) < 2:  # nothing to order: many of an unrolled program's child graphs
        return preds, [], frozenset()
    elements: dict[int, Elements] = {}
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
        touched = [_touched(items[member]) for member in range(index, end)]
        for member, accesses in enumerate(touched, index):
            found: dict[int, tuple[str, str]] = {}
            for key, start, stop, mode, buffer in accesses:
                if (segments := elements.get(key)) is not None:
                    segments.predecessors(start, stop, mode, buffer, found)
            latest_first = sorted(found, reverse=True)
            preds[member] = latest_first, list(map(found.__getitem__, latest_first))
        if end - index > 1:
            found_conflicts, complete = sibling_conflicts(items, index, end)
            conflicts += found_conflicts
            if not complete:
                in_part.add(group)
        for member, accesses in enumerate(touched, index):
            for key, start, stop, mode, _ in accesses:
                if (segments := elements.get(key)) is not None:
                    segments.add(start, stop, mode, member, index)
                else:
                    elements[key] = Elements(start, stop, mode, member)
        index = end
    return preds, conflicts, frozenset(in_part)


def _touched(node: Node) -> list[tuple[int, int, int, int, str]]:
    """(id of the buffer, start, stop, mode, buffer name) of each access of `node` that touches
    an element, in order. A child graph's or a conditional's accesses are its nodes', which
    repeat one another (each node of a graph reading the same weights): a repeat is left out,
    since it would find and record only what the first did."""
    touched = [(id(a.buffer), a.start, a.stop, int(a.mode), a.buffer.name) for a in node.accesses if touches(a)]
    return list(dict.fromkeys(touched)) if isinstance(node, CONTAINERS) else touched


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


def _collector_off(function: Callable[P, R]) -> Callable[P, R]:
    """`function` run as in _without_cycle_collection, at no cost when the collector is off
    already (the compiler turns it off for all of a compile, which calls these once per graph
    body: tens of thousands of times)."""
    @wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return function(*args, **kwargs)
        with _without_cycle_collection():
            return function(*args, **kwargs)
    return run


@_collector_off
def build_dag(body: GraphBody) -> Dag:
    preds, conflicts, in_part = hazard_predecessors(body.items)
    reduced = _reduce([latest_first for latest_first, _ in preds])
    sources: dict[int, list[int]] = {}  # per node, its kept predecessors, earliest first
    for a, b in reduced:
        sources.setdefault(b, []).append(a)
    labels: dict[tuple[str, str], Hazard] = {}  # one Hazard per kind and buffer, shared by its edges
    found: dict[tuple[int, int], Hazard] = {}
    for b, kept in sources.items():
        # both in order: one walk finds each kept predecessor's hazard, on a node that keeps
        # a hundred thousand as on one that keeps one
        latest_first, kinds = preds[b]
        earliest_first = zip(reversed(latest_first), reversed(kinds))
        for a in kept:
            for p, label in earliest_first:
                if p == a:
                    break
            found[a, b] = labels.get(label) or labels.setdefault(label, Hazard(*label))
    return Dag(body, reduced, {edge: found[edge] for edge in reduced}, conflicts, in_part)


def transitive_reduction(n: int, edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Edges of a DAG whose nodes are numbered in topological order, minus every edge implied
    by a longer path. An edge (u, w) is implied when u is an ancestor of another predecessor
    of w. Ancestors are integer bitsets, but only from the lowest node any later test can ask
    about (so a chain's are empty, not quadratic), and each is dropped after its last use."""
    preds: list[set[int]] = [set() for _ in range(n)]
    for a, b in edges:
        preds[b].add(a)
    return _reduce([sorted(p, reverse=True) for p in preds])


def _reduce(preds: Sequence[list[int]]) -> list[tuple[int, int]]:
    """transitive_reduction, from each node's predecessors, latest first, without repeats."""
    n = len(preds)
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
        covered = 0  # w's ancestors found so far, bit i for node base + i
        # covered in bytes, made again for the first test after a change: a test there is an
        # index, where a shift of the int would copy its bits above p (a dense DAG tests a
        # hundred predecessors a node and keeps three); the bytes cost what the change did
        view: bytes | None = b""  # covered is empty
        unseen = iter(preds[w])
        count = 0
        for p in unseen:  # latest first: an earlier one may be an ancestor of a later one
            # a covered p's ancestors are covered already: most of a dense DAG's predecessors
            k = p - base
            if view is None:
                view = _bytes(covered)
            # once a predecessor is kept, view holds its bit, above those of the ones still to test
            if not view or not view[k >> 3] >> (k & 7) & 1:
                kept.append((p, w))
                low, bits = ancestors.get(p, (base, 0))
                covered |= _shifted(bits, low, base) | 1 << k
                view = None
                count += 1
                if count == _FEW:  # the rest are _many_predecessors'
                    covered = _many_predecessors(w, unseen, base, covered, ancestors, kept)
                    break
        for p in last_users[w]:
            ancestors.pop(p, None)
        if last_use[w] >= 0 and (bits := covered >> (lowest[w] - base)):
            trim = (bits & -bits).bit_length() - 1
            ancestors[w] = (lowest[w] + trim, bits >> trim)
    return sorted(kept)


_FEW = 64  # predecessors a node keeps before _many_predecessors takes over
_WIDE = 1 << 12  # bits of a covered set past which it is tested in its bytes


def _many_predecessors(w: int, unseen: Iterator[int], base: int, covered: int,
                       ancestors: dict[int, tuple[int, int]], kept: list[tuple[int, int]]) -> int:
    """_reduce's loop for a node that keeps many predecessors (one reading a hundred thousand
    slices, each written or copied by a node of its own): the rest of them, and `covered` with
    them and their ancestors. Adding each one's ancestors to `covered` would copy the whole
    int each time: they wait until they reach the next predecessor to test, and then join all
    at once (`_union`); the kept predecessors join only at the end (they test nothing); and
    once wide, `covered` is tested in its bytes, where a shift would copy it per test."""
    wide = _bytes_if_wide(covered)
    waiting: list[tuple[int, int]] = []
    reach = -1  # the latest node of a waiting set
    direct = []
    for p in unseen:
        if reach >= p:
            covered |= _union(waiting, base)
            waiting, reach = [], -1
            wide = _bytes_if_wide(covered)
        k = p - base
        if wide:  # holding the bit of the main loop's last kept predecessor, above p's
            if wide[k >> 3] >> (k & 7) & 1:
                continue
        elif covered >> k & 1:
            continue
        kept.append((p, w))
        direct.append(p)
        if (entry := ancestors.get(p)) is not None:
            waiting.append(entry)
            reach = max(reach, entry[0] + entry[1].bit_length() - 1)
    return covered | _union(waiting, base) | _bits(direct, base)


def _bytes_if_wide(bits: int) -> bytes:
    """`bits` in bytes, little end first, once it is wider than _WIDE; else none."""
    return _bytes(bits) if bits.bit_length() > _WIDE else b""


def _bytes(bits: int) -> bytes:
    """`bits` in bytes, little end first: bit k is byte k >> 3's bit k & 7 (none past the end)."""
    return bits.to_bytes((bits.bit_length() + 7) >> 3, "little")


def _union(sets: list[tuple[int, int]], base: int) -> int:
    """The union of node sets (low, bits), as bits from node `base` (lower nodes dropped),
    merged pairwise in order of `low`: k sets spread over a width W cost about W log k, not
    the k W of adding each to the whole."""
    if not sets:
        return 0
    sets = sorted(sets)
    while len(sets) > 1:
        merged = [(low, bits | more << (other - low))
                  for (low, bits), (other, more) in zip(sets[::2], sets[1::2])]
        sets = merged + sets[-1:] if len(sets) % 2 else merged
    low, bits = sets[0]
    return _shifted(bits, low, base)


def _shifted(bits: int, low: int, base: int) -> int:
    """A node set as bits from node `low`, as bits from node `base` (lower nodes dropped)."""
    return bits << (low - base) if low >= base else bits >> (base - low)


def _bits(nodes: list[int], base: int) -> int:
    """`nodes`, all at or above `base`, as bits from `base`, through bytes: adding each to the
    whole would copy it each time."""
    if not nodes:
        return 0
    ones = bytearray(((max(nodes) - base) >> 3) + 1)
    for v in nodes:
        ones[(v - base) >> 3] |= 1 << ((v - base) & 7)
    return int.from_bytes(ones, "little")


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


@_collector_off
def add_lanes(n: int, edges: list[tuple[int, int]], lanes: int) -> list[tuple[int, int]]:
    """The DAG's edges plus ordering edges that leave at most `lanes` nodes able to run at once
    (the width: the most nodes no path orders), transitively reduced. A DAG that narrow gets no
    edge. Otherwise the nodes are fitted into `lanes` chains in program order: each joins a
    chain whose last node already precedes it when one exists, else the chain that frees up
    first (one new edge).

    The chains also decide the reduction: an ancestor of a node on a chain precedes every
    member before it there, so a node's ancestors are its latest ancestor on each chain, and
    an edge (u, w) is implied when u is at or before the latest ancestor on u's chain of a
    later predecessor of w. That costs the number of chains per kept edge, where the bitsets
    of `transitive_reduction` would grow as long as the distance to a node every later one
    follows (the root of a fan ordered into lanes: quadratic)."""
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        preds[b].append(a)
    chains, fitted = _fewest_chains(n, preds, lanes)
    lane_of = [0] * n
    for lane, chain in enumerate(chains):
        for v in chain:
            lane_of[v] = lane
    tails = [chain[-1] for chain in chains]
    width = len(chains)
    latest: list[list[int]] = []  # per node, per chain, its latest ancestor there (-1: none)
    depth = [0] * n
    kept: list[tuple[int, int]] = []
    for v in range(n):
        direct, ancestors = _sweep(sorted(set(preds[v]), reverse=True), lane_of, latest, width)
        depth[v] = max([depth[p] + 1 for p in direct], default=0)
        if v >= fitted:
            ordered = [lane for lane in range(lanes) if ancestors[lane] == tails[lane]]
            if ordered:
                lane = max(ordered, key=lambda l: depth[tails[l]])
            else:
                lane = min(range(lanes), key=lambda l: depth[tails[l]])
                tail = tails[lane]  # no ancestor of v's predecessors, so never implied
                direct, ancestors = _sweep(sorted(direct + [tail], reverse=True), lane_of, latest, width)
                depth[v] = max(depth[v], depth[tail] + 1)
            tails[lane], lane_of[v] = v, lane
        kept += [(p, v) for p in direct]
        latest.append(ancestors)
    return sorted(kept)


def _sweep(candidates: list[int], lane_of: list[int], latest: list[list[int]],
           width: int) -> tuple[list[int], list[int]]:
    """Of a node's predecessors (`candidates`, latest first), those no later one follows, and
    the node's latest ancestor on each chain. A predecessor that another follows adds nothing
    to the node's ancestors: they are all the kept ones' too."""
    reach = [-1] * width
    direct = []
    for p in candidates:
        lane = lane_of[p]
        if reach[lane] >= p:
            continue
        direct.append(p)
        reach = list(map(max, reach, latest[p]))
        reach[lane] = p  # p's own ancestors on its chain come before it
    return direct, reach


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
