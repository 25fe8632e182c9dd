"""Which ordering edges `add_lanes` (compiler/dag.py) adds, exactly, for what scripts/mutate.py
found unchecked: tests/test_dag.py proves every result keeps the dependencies and bounds the
width, but any valid choice of lane passes that. The choice documented in add_lanes is pinned
here: a node joins a lane whose last node already precedes it (the deepest such), else the
lane that frees up first (the shallowest last node), the first of equals. The equivalent
survivors are listed in CONTRIBUTING.md ("Mutation testing")."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings

from pipec.compiler.dag import _Reach, add_lanes, build_dag
from pipec.compiler.model import GraphBody

from test_dag import SPAN, _closure, _items, dags


@pytest.mark.parametrize("n, edges, lanes, expected", [
    # independent nodes fill the lanes round-robin: each lane frees up in turn
    (4, [], 2, [(0, 2), (1, 3)]),
    # the short lane frees up first, not the long chain
    (5, [(0, 1), (1, 2)], 2, [(0, 1), (1, 2), (3, 4)]),
    # a node already ordered after one lane's tail joins it without a new edge
    (6, [(0, 2), (1, 2), (2, 3)], 2, [(0, 2), (1, 2), (1, 4), (2, 3), (4, 5)]),
    (7, [(0, 3), (1, 4), (2, 5)], 2, [(0, 2), (0, 3), (1, 3), (1, 4), (2, 4), (2, 5), (3, 5), (4, 6)]),
    # one lane: program order
    (6, [(0, 1), (2, 3), (1, 4), (3, 5)], 1, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]),
    (5, [(0, 2), (0, 3), (1, 4)], 2, [(0, 2), (0, 3), (1, 3), (1, 4), (2, 4)]),
    # 4 is the first node past the cover (a new edge from 0), 5 and 6 join its lane; 7 follows
    # 2, the last node of another lane, through 5: it joins that lane without an edge
    (8, [(0, 5), (2, 5), (2, 6), (4, 5), (5, 6), (5, 7)], 4, [(0, 4), (2, 5), (4, 5), (5, 6), (5, 7)]),
])
def test_lanes_add_the_documented_edges(n, edges, lanes, expected):
    assert add_lanes(n, edges, lanes) == expected


def test_a_dag_within_the_bound_comes_back_reduced():
    assert add_lanes(3, [(0, 1), (1, 2), (0, 2)], 2) == [(0, 1), (1, 2)]


def test_a_dag_lists_each_nodes_predecessors():
    items = _items([([(0, 0, 8, 2)], None), ([(0, 0, 8, 1)], None), ([(1, 0, 8, 2)], None),
                    ([(0, 0, 4, 1), (1, 0, 4, 1)], None)])
    dag = build_dag(GraphBody("step", "step", SPAN, items))
    assert dag.predecessors() == [[], [0], [], [0, 2]]


@settings(max_examples=200)
@given(dags(max_nodes=14))
@example((4, [(0, 1), (0, 2), (2, 3)]))  # 0 reaches 3 only through 2, which opened a chain of its own
def test_reach_tells_whether_a_path_leads_from_one_node_to_another(dag):
    """`_Reach` is the ordering `add_lanes` builds its chains on: it must be the DAG's closure."""
    n, edges = dag
    reach = _Reach()
    for v in range(n):
        reach.add(v, [a for a, b in edges if b == v])
    assert {(u, v) for v in range(n) for u in range(v) if reach.precedes(u, v)} == _closure(n, edges)
