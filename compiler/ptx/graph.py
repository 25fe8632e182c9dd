"""Strongly connected components of a directed graph, for the analyses that follow cycles: the
loops of a function's control flow (cfg.py), recursion in the call graph and values that depend
on themselves (flow.py, spin.py).

Tarjan's algorithm without recursion (a function of 100,000 instructions is a path that deep):
linear in nodes and edges.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import TypeVar

Node = TypeVar("Node", bound=Hashable)


def components(nodes: Iterable[Node], successors: Callable[[Node], Iterable[Node]]) -> list[list[Node]]:
    """The strongly connected components reachable from `nodes`, each listed after every
    component it reaches (so a component's successors are done when it comes)."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    stack: list[Node] = []
    on_stack: set[Node] = set()
    found: list[list[Node]] = []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(successors(root)))]
        while work:
            node, pending = work[-1]
            for following in pending:
                if following not in index:
                    index[following] = low[following] = len(index)
                    stack.append(following)
                    on_stack.add(following)
                    work.append((following, iter(successors(following))))
                    break
                if following in on_stack:
                    low[node] = min(low[node], index[following])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(component)
    return found
