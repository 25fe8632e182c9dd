"""Spin waits: loops (cfg.py) whose way out depends on memory another block writes.

A loop is a spin wait when the condition of one of its exits depends, through the dependence
graph of its body (flow.py: registers, local and shared memory, barrier reductions, calls), on
a poll: a read of memory other blocks can write (global memory, or a generic address that is
not provably shared or local) that the loop makes, or that another thread of the block made
and left in shared memory or passed to a barrier reduction. Loads of global memory are polls
whatever else the loop does; which polls make a wait:

- an ordered one (`ld.volatile`, `ld.relaxed.gpu`, `ld.acquire`, `ld.global.cv`), made in the
  loop by this thread or by another of the block in the same loop (thread 0 reads the flag,
  stores it to `__shared__`, and every thread loops on the shared copy; a `__syncthreads_and`
  of a predicate thread 0 computes from what it read) or by a helper the loop calls: such a
  load is re-read every iteration by definition, so the loop waits even beside a counter (a
  timeout) and whatever it stores;
- a plain one (a plain or generic load, an atomic's old value, a helper's read returned
  directly or through a reference, a polled value some thread of the block left in shared
  memory or passed to a barrier anywhere in the kernel) when nothing in the exit's dependence
  is carried from one iteration to the next (a counter, an index, a compare-and-swap's
  expected value, a word of shared memory the loop itself advances, an atomic add that moves
  the memory it reads): every iteration then reads the same memory in the same way
  (`while (data[idx[0]] == 0)`, `while (peek(flag) == 0)`), so only a write from elsewhere can
  end the loop.

Carried means a cycle of definite dependences: through registers, calls, and words of memory
the addresses pin down; a dependence that exists only because two addresses may overlap (a
pointer, an unknown offset) is no progress, and neither are stores to global memory (the
analysis cannot tell whether they alias what is read). A loop with no exit at all never ends
once entered, which is a spin too. Waits on shared memory whose value comes from no global
read (one warp raising a flag another waits on) stay inside the block, and are no spin
between blocks.
"""

from __future__ import annotations

from dataclasses import replace

from .cfg import exits, loops
from .flow import Dependence, ModuleFlow, Node
from .graph import components
from .ir import Finding, Function, PtxModule


def spin_waits(module: PtxModule) -> dict[str, list[Finding]]:
    """The spin waits of every function with a body."""
    flow = ModuleFlow(module)
    return {name: _waits(flow, function) for name, function in module.functions.items() if function.has_body}


def _waits(flow: ModuleFlow, function: Function) -> list[Finding]:
    taint = flow.taint[function.name]
    findings = []
    for loop in loops(function):
        conditions, has_exit = exits(function, loop)
        if not has_exit:
            findings.append(function.instructions[loop.latch].finding("spin-wait"))  # the branch back
            continue
        graph = Dependence(flow, function, sorted(loop.body),
                           lambda cell: [("poll", "plain")] if taint.reads(cell) else [])
        polls = _polls(graph, conditions)
        if polls:
            findings.append(_finding(function, polls, loop.latch))
    return findings


def _finding(function: Function, polls: list[int], latch: int) -> Finding:
    """The first poll with a source line; a load the compiler made up (hoisted out of a helper,
    `.loc 1 0`) is shown at the loop's branch back."""
    lined = [p for p in polls if (location := function.instructions[p].location) and location.line > 0]
    poll = function.instructions[min(lined or polls)]
    if lined:
        return poll.finding("spin-wait")
    return replace(poll.finding("spin-wait"), location=function.instructions[latch].location)


def _polls(graph: Dependence, conditions: list[str]) -> list[int]:
    """The positions of the polls that make the loop a wait (ordered ones when there are any),
    none if it is bounded."""
    reached: set[Node] = set()
    stack: list[Node] = list(conditions)
    while stack:
        node = stack.pop()
        if node not in reached:
            reached.add(node)
            stack.extend(graph.edges.get(node, ()))
    polls: dict[str, list[int]] = {"ordered": [], "plain": []}
    for node in reached:
        for label in graph.labels.get(node, ()):
            if label[0] == "poll":
                polls[label[1]].append(_position(node))
    if polls["ordered"]:
        return polls["ordered"]
    if not polls["plain"] or _carried(graph, reached):
        return []
    return polls["plain"]


def _position(node: Node) -> int:
    """The instruction of a read or write node, or of the reader of what others leave."""
    return _position(node[1]) if node[0] == "outside" else int(node[1])


def _definite(node: Node) -> bool:
    """Whether a node is one value, not a gathering of memory that may overlap."""
    if isinstance(node, str) or node[0] in ("read", "write", "param"):
        return True
    cell = node[1]  # of a ("cell", c); ("all", ...) and ("outside", reader) gather
    return node[0] == "cell" and (cell[0] == "barrier" or cell[0] in ("shared", "local") and cell[-1] is not None)


def _carried(graph: Dependence, reached: set[Node]) -> bool:
    """Whether a value the exit depends on depends, definitely, on its own previous value."""
    definite = [node for node in reached if _definite(node)]
    inside = set(definite)

    def following(node: Node) -> list[Node]:
        return [n for n in graph.edges.get(node, ()) if n in inside]

    return any(len(members) > 1 or members[0] in following(members[0])
               for members in components(definite, following))
