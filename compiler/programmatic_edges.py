"""Which edges of a graph body may be programmatic (programmatic dependent launch), and why the
others may not.

A programmatic edge lets its consumer start while its producer is still running: the consumer
runs up to `griddepcontrol.wait`, which returns once the producer has finished and its writes
are visible. Since the consumer may start before any node it follows has finished (its producer
itself started early), the edge into a kernel node is programmatic only when

- producer and consumer are kernel nodes (the driver's programmatic port exists only there);
- the consumer's kernel waits on every path (compiler/ptx/pdl.py). Then it cannot finish before
  its producers have, so a later node that follows it with an ordinary edge also follows
  everything before it, as the hazard DAG's transitive reduction assumes;
- nothing the consumer touches before its wait overlaps what any earlier node of the body
  touches, one of the two writing (RAW, WAR, WAW). Not only the producer's: the producer may
  itself have started early, so no earlier node is known to be finished when the consumer
  starts. Reading the step's weights before the wait is fine when only a later node (the
  optimiser) writes them.

By induction over program order every node then sees its predecessors' writes after its wait
and never overwrites what they still read. docs/plan.md says why memset, copy, GEMM,
collective, child-graph and conditional nodes keep ordinary edges.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict, deque
from dataclasses import dataclass

from .model import Access, ConditionalNode, EarlyAccess, GraphBody, GraphNode, LaunchNode, Mode, Node, PointerArg
from ..plan.schema import NODE_KINDS, ChildGraphNodeSpec, EdgeKind, GraphSpec, KernelNodeSpec, NodeSpec

_KIND_NAMES = {"memset": "a memset node", "memcpy": "a memcpy node", "graph": "a child graph node",
               "conditional": "a conditional node", "gemm": "a GEMM node (a library call's graph)",
               "collective": "a collective node (NCCL's graph)"}


class _Ranges:
    """A union of element ranges, kept merged: sorted starts and stops."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.stops: list[int] = []

    def overlaps(self, start: int, stop: int) -> bool:
        i = bisect_right(self.starts, start) - 1  # the last range that starts at or before `start`
        if i >= 0 and self.stops[i] > start:
            return True
        return i + 1 < len(self.starts) and self.starts[i + 1] < stop

    def add(self, start: int, stop: int) -> None:
        lo, hi = bisect_left(self.stops, start), bisect_right(self.starts, stop)
        if hi == lo + 1 and self.starts[lo] <= start and stop <= self.stops[lo]:
            return  # held already, as most are: a step's weights, read by every update
        if lo < hi:
            start, stop = min(start, self.starts[lo]), max(stop, self.stops[hi - 1])
        self.starts[lo:hi], self.stops[lo:hi] = [start], [stop]


@dataclass(frozen=True)
class EarlyHazard:
    """An access a kernel makes before its wait to a range an earlier node of the body touches."""

    early: EarlyAccess
    access: Access  # the launch's binding it goes through (its buffer and range)
    earlier_writes: bool  # an earlier node writes the range (else only reads it)


def bound_accesses(node: LaunchNode, early: EarlyAccess) -> list[Access]:
    """The launch's accesses an early access can go through: its pointer parameters' bindings,
    or every binding when its origin is unknown or no pointer (an integer cast to one)."""
    by_param = {}
    accesses = iter(node.accesses)
    for param, arg in zip(node.kernel.params, node.args):
        if param.kind == "pointer" and isinstance(arg, PointerArg):
            if (access := next(accesses, None)) is not None:
                by_param[param.index] = access
    # An address from a pointer and scalars (an offset, an index) stays in the pointer's buffer.
    pointers = [by_param[p] for p in early.params or () if p in by_param]
    return pointers or list(node.accesses)


def early_hazards(items: list[Node]) -> dict[int, list[EarlyHazard]]:
    """Per launch whose kernel asks for programmatic launch (it waits or triggers), by index in
    `items`: what it touches before its wait that an earlier node touches, one of them writing."""
    # per launch that asks, by index: each early access with the bindings it can go through
    asking = {index: [(early, bound_accesses(node, early)) for early in node.kernel.launch_control.early]
              for index, node in enumerate(items)
              if isinstance(node, LaunchNode) and node.kernel.launch_control.asks_for_programmatic_launch}
    # only what they can touch needs the ranges of earlier nodes (a step's learner nodes touch
    # a million ranges, of a few buffers a launch reads before its wait)
    watched = {id(access.buffer) for bound in asking.values() for _, accesses in bound for access in accesses}
    reads: defaultdict[int, _Ranges] = defaultdict(_Ranges)
    writes: defaultdict[int, _Ranges] = defaultdict(_Ranges)
    found: dict[int, list[EarlyHazard]] = {}
    # what nodes after the last launch that asks touch concerns no launch; every range holds an
    # element (an empty slice is PC206, an extent narrows to a positive count)
    for index, node in enumerate(items[:max(asking) + 1] if asking else ()):
        if index in asking:
            found[index] = []
            for early, accesses in asking[index]:
                for access in accesses:
                    key, span = id(access.buffer), (access.start, access.stop)
                    written = key in writes and writes[key].overlaps(*span)
                    read = key in reads and reads[key].overlaps(*span)
                    if written or ("w" in early.mode and read):
                        found[index].append(EarlyHazard(early, access, written))
        # a read-write is kept as a write only: wherever it would make `read` true, so is `written`
        for access in node.accesses:
            if id(access.buffer) in watched:
                ranges = writes if access.mode & Mode.WRITE else reads
                ranges[id(access.buffer)].add(access.start, access.stop)
    return found


def describe(hazard: EarlyHazard, kernel: str) -> str:
    what = {"r": "reads", "w": "writes", "rw": "touches"}[hazard.early.mode]
    other = "writes" if hazard.earlier_writes else "reads"
    return f"`{kernel}` {what} `{hazard.access.buffer.name}` before its wait, and an earlier node {other} it"


def units(body: GraphBody) -> list[Node]:
    """A body's nodes in program order with child graphs opened (the runtime adds their nodes to
    the parent when an edge at their boundary is programmatic); conditional nodes stay whole."""
    found: list[Node] = []
    for node in body.items:
        found += units(node.body) if isinstance(node, GraphNode) else [node]
    return found


def unit_lists(roots) -> list[list[Node]]:
    """`units` of each root body and of every conditional node's body inside them."""
    lists, pending = [], deque(roots)  # a step of 10,000 updates has 40,000 conditional bodies
    while pending:
        items = units(pending.popleft())
        lists.append(items)
        pending += [b for node in items if isinstance(node, ConditionalNode) for b in node.bodies]
    return lists


UnitHazards = list[tuple[list[Node], dict[int, list[EarlyHazard]]]]


def unit_hazards(roots) -> UnitHazards:
    """`early_hazards` of each of `unit_lists`, with the list: what PC323 reports and the
    programmatic edges refuse, found once for both."""
    return [(items, early_hazards(items)) for items in unit_lists(roots)]


def consumer_refusals(hazard_lists: UnitHazards) -> dict[int, str | None]:
    """Per launch (by id), why no programmatic edge may lead into it; None: any may. A launch
    that several bodies share keeps the first refusal."""
    refusals: dict[int, str | None] = {}
    for items, hazards in hazard_lists:
        for index, node in enumerate(items):
            if isinstance(node, LaunchNode):
                refusals[id(node)] = refusals.get(id(node)) or _refusal(node, hazards.get(index, []))
    return refusals


def _refusal(node: LaunchNode, hazards: list[EarlyHazard]) -> str | None:
    kernel = node.kernel
    if kernel.launch_control.waits != "every-path":
        how = "on every path" if kernel.launch_control.waits == "some-paths" else "at all"
        return f"`{kernel.name}` does not wait for its predecessor (griddepcontrol.wait) {how}"
    if hazards:
        return describe(hazards[0], kernel.name)
    return None


Ends = list[tuple[NodeSpec, Node]]


class EdgeDecider:
    """Decides each body's edges as lowering builds it: an edge between child graph nodes joins
    the kernels at the child graphs' ends (their last nodes, the next one's first)."""

    def __init__(self, hazard_lists: UnitHazards) -> None:
        self.refusals = consumer_refusals(hazard_lists)
        self.graphs: dict[int, tuple[GraphSpec, list[Node]]] = {}  # lowered bodies, with their items

    def lowered(self, spec: GraphSpec, items: list[Node]) -> None:
        self.graphs[spec.index] = (spec, items)

    def kinds(self, items: list[Node], specs: tuple[NodeSpec, ...], edges: list[tuple[int, int]],
              ordinary: str | None) -> tuple[EdgeKind, ...]:
        """One decision per edge, in order. `ordinary` is the reason every edge of the body is
        ordinary (the option, the target, a conditional node's body), None when any may not be."""
        if ordinary is not None:
            return tuple(EdgeKind(a, b, False, ordinary) for a, b in edges)
        decided = []
        for a, b in edges:
            why = self._why_not(self._ends(specs[a], items[a], False), self._ends(specs[b], items[b], True))
            decided.append(EdgeKind(a, b, why is None, why or ""))
        return tuple(decided)

    def _why_not(self, producers: Ends | None, consumers: Ends | None) -> str | None:
        if producers is None or consumers is None:
            return "through an empty child graph"
        for spec, _ in producers:
            if not isinstance(spec, KernelNodeSpec):
                return f"from {_KIND_NAMES[NODE_KINDS[type(spec)]]}"
        for spec, node in consumers:
            if not isinstance(spec, KernelNodeSpec):
                return f"to {_KIND_NAMES[NODE_KINDS[type(spec)]]}"
            if not isinstance(node, LaunchNode):
                return f"to `{spec.function}`, a kernel pipec generates without a wait"
            if (why := self.refusals.get(id(node))) is not None:
                return why
        return None

    def _ends(self, spec: NodeSpec, node: Node, entries: bool) -> Ends | None:
        """The nodes an edge into (`entries`) or out of this node joins: itself, or a child
        graph's first (last) nodes, recursively; None for an empty child graph."""
        if not isinstance(spec, ChildGraphNodeSpec):
            return [(spec, node)]
        child, items = self.graphs[spec.graph]
        if not child.nodes:
            return None
        joined = {b if entries else a for a, b in child.edges}
        found: Ends = []
        for inner in child.nodes:
            if inner.id not in joined:
                ends = self._ends(inner, items[inner.id], entries)
                if ends is None:
                    return None
                found += ends
        return found
