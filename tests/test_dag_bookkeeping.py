"""What compiler/dag.py promises beyond its edges, which tests/test_dag.py checks against brute
force: the cycle collector is off while a DAG is built (and as it was afterwards); `_reduce`
drops each node's ancestor set after its last use, so a long DAG holds a few at a time, not
one per node; a node with many predecessors hands them over to `_many_predecessors`, which
joins the waiting ancestor sets once, when they may matter; and the helpers' node sets in bits
and bytes. They decide what a step of 100,000 nodes costs, not its result: scripts/mutate.py
found them unchecked."""

from __future__ import annotations

import gc

import networkx as nx
import pytest

from pipec.compiler import dag
from pipec.compiler.model import GraphBody

from test_dag import SPAN, _graph, _items


@pytest.mark.parametrize("enabled", [True, False])
def test_a_dag_is_built_with_the_cycle_collector_off_and_left_as_it_was(monkeypatch, enabled):
    seen = []
    hazard_predecessors = dag.hazard_predecessors

    def spy(items):
        seen.append(gc.isenabled())
        return hazard_predecessors(items)

    monkeypatch.setattr(dag, "hazard_predecessors", spy)
    program = [(((0, 0, 8, 2),), None), (((0, 0, 8, 1),), None)]
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        built = dag.build_dag(GraphBody("step", "step", SPAN, _items(program)))
        assert gc.isenabled() == enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False] and built.edges == [(0, 1)]


def test_reduce_holds_a_few_ancestor_sets_at_a_time(monkeypatch):
    # a ladder: node v follows v - 1 and v - 2, so (v - 2, v) is implied, and every node's
    # ancestors are looked up by the next two nodes and then never again. With `_FEW` at 1
    # every node hands over to _many_predecessors, which is given the live ancestor sets.
    held = []
    many_predecessors = dag._many_predecessors

    def spy(w, unseen, base, covered, ancestors, kept):
        held.append(len(ancestors))
        return many_predecessors(w, unseen, base, covered, ancestors, kept)

    monkeypatch.setattr(dag, "_FEW", 1)
    monkeypatch.setattr(dag, "_many_predecessors", spy)
    n = 300
    edges = [(v - 1, v) for v in range(1, n)] + [(v - 2, v) for v in range(2, n)]
    assert dag.transitive_reduction(n, edges) == [(v - 1, v) for v in range(1, n)]
    assert len(held) == n - 1 and 0 < max(held) <= 3


def test_a_node_hands_its_other_predecessors_over_once_it_keeps_few(monkeypatch):
    # node 6 follows six independent nodes: it keeps 5, 4 and 3 itself, then _many_predecessors
    # takes 2, 1 and 0; node 7, after a single node, never hands over
    handed = []
    many_predecessors = dag._many_predecessors

    def spy(w, unseen, base, covered, ancestors, kept):
        unseen = list(unseen)
        handed.append((w, [p for p, v in kept if v == w], unseen))
        return many_predecessors(w, iter(unseen), base, covered, ancestors, kept)

    monkeypatch.setattr(dag, "_FEW", 3)
    monkeypatch.setattr(dag, "_many_predecessors", spy)
    edges = [(p, 6) for p in range(6)] + [(6, 7)]
    assert dag.transitive_reduction(8, edges) == sorted(edges)
    assert handed == [(6, [5, 4, 3], [2, 1, 0])]


def test_node_sets_as_bits_and_bytes(monkeypatch):
    assert dag._bytes(0) == b"" and dag._bytes(0xFF) == b"\xff" and dag._bytes(0x1FF) == b"\xff\x01"
    monkeypatch.setattr(dag, "_WIDE", 8)
    assert dag._bytes_if_wide(0xFF) == b"" and dag._bytes_if_wide(0x100) == b"\x00\x01"
    assert dag._bits([], 5) == 0 and dag._bits([5, 7, 20], 5) == 1 | 1 << 2 | 1 << 15
    # sets (low, bits) from node `base` on: shifted up, or down with the nodes below `base` dropped
    assert dag._union([], 4) == 0
    assert dag._union([(6, 0b101)], 4) == 0b10100
    assert dag._union([(2, 0b10101)], 4) == 0b101
    assert dag._union([(9, 1), (4, 1), (6, 0b11)], 4) == 1 | 0b1100 | 1 << 5


@pytest.mark.parametrize("n, edges, unions", [
    # 9 keeps 8, then 7 and 6, whose ancestors 5 and 4 wait together until 5 comes: one union
    # of two sets; 3 is covered through 8, and 1 and 0 are kept without another union. (Each
    # node ends with a union of what still waits: 6, 7 and 8 of nothing, 9 of nothing.)
    (10, [(4, 6), (5, 7), (3, 8)] + [(p, 9) for p in (8, 7, 6, 5, 3, 1, 0)], [0, 0, 0, 2, 0]),
    # 3 keeps 2 and hands over 1 and 0, with nothing waiting: no union before the last
    (4, [(2, 3), (1, 3), (0, 3)], [0]),
])
def test_ancestors_of_kept_predecessors_join_once_a_predecessor_may_be_among_them(monkeypatch, n, edges, unions):
    """_many_predecessors' batching: the sets of the kept predecessors' ancestors wait, and
    join `covered` all at once when a predecessor at or below the latest node they hold comes,
    not before and not again."""
    sizes = []
    union = dag._union

    def spy(sets, base):
        sizes.append(len(sets))
        return union(sets, base)

    monkeypatch.setattr(dag, "_FEW", 1)
    monkeypatch.setattr(dag, "_union", spy)
    assert set(dag.transitive_reduction(n, edges)) == set(nx.transitive_reduction(_graph(n, edges)).edges)
    assert sizes == unions
