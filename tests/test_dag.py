"""Hazard edges, transitive reduction and lanes, against networkx on random DAGs."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from pipec.compiler.dag import transitive_reduction
from pipec.compiler.dag import add_lanes

from stage_helpers import check_text


@st.composite
def dags(draw, max_nodes=40):
    n = draw(st.integers(1, max_nodes))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    return n, sorted({(a, b) for a, b in edges if a < b})


@settings(max_examples=200, deadline=None)
@given(dags())
def test_transitive_reduction_matches_networkx(dag):
    n, edges = dag
    graph = nx.DiGraph(edges)
    graph.add_nodes_from(range(n))
    assert set(transitive_reduction(n, edges)) == set(nx.transitive_reduction(graph).edges)


def _width(n: int, edges) -> int:
    """The largest set of nodes no path orders: what can run at once."""
    graph = nx.DiGraph(edges)
    graph.add_nodes_from(range(n))
    closure = nx.transitive_closure_dag(graph)
    comparable = nx.Graph()
    comparable.add_nodes_from(range(n))
    comparable.add_edges_from(closure.edges)
    return max(len(c) for c in nx.find_cliques(nx.complement(comparable)))


@settings(max_examples=100, deadline=None)
@given(dags(max_nodes=14), st.integers(1, 5))
def test_lanes_bound_the_width_and_keep_every_dependency(dag, lanes):
    n, edges = dag
    planned = add_lanes(n, edges, lanes)
    graph = nx.DiGraph(planned)
    graph.add_nodes_from(range(n))
    closure = nx.transitive_closure_dag(graph)
    for a, b in edges:
        assert closure.has_edge(a, b), "a hazard edge is no longer implied"
    assert _width(n, planned) <= lanes
    if _width(n, edges) <= lanes:
        assert set(planned) == set(transitive_reduction(n, edges)), "a DAG within the bound was serialised"


def test_hazard_kinds_and_ranges():
    result = check_text("""
        buffer a: f32[64]
        buffer b: f32[64]
        step {
            launch writer<<<1, 64>>>(out a, 64)          # 0
            launch copier<<<1, 64>>>(in a, out b, 64)     # 1: RAW a
            launch writer<<<1, 64>>>(out a[0:32], 32)     # 2: WAR a (1 reads), WAW a (0)
            launch writer<<<1, 64>>>(out a[32:64], 32)    # 3: independent of 2 (disjoint)
            launch copier<<<1, 64>>>(in b, out a[32:64], 32)  # 4: RAW b, WAW a[32:64]
        }
    """)
    dag = next(d for d in result.checked.dags if d.body.name == "step")
    kinds = {(a, b): (h.kind, h.buffer) for (a, b), h in dag.hazards.items()}
    # 1 -> 4 (RAW b) is implied by 1 -> 3 -> 4 and reduced away
    assert kinds == {(0, 1): ("RAW", "a"), (1, 2): ("WAR", "a"), (1, 3): ("WAR", "a"),
                     (3, 4): ("WAW", "a")}


def test_a_child_graph_is_one_node_with_its_nodes_accesses():
    result = check_text("""
        buffer a: f32[64]
        buffer b: f32[64]
        graph produce { launch writer<<<1, 64>>>(out a, 64) }
        step {
            produce
            launch copier<<<1, 64>>>(in a, out b, 64)
        }
    """)
    plan = result.plan
    step = plan.graphs[plan.step]
    assert [n.name for n in step.nodes] == ["step/produce", "step/copier"]
    assert step.edges == ((0, 1),)
