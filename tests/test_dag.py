"""The hazard DAG, its transitive reduction and its lanes, against brute force.

The oracle test builds random programs (two small buffers, nodes reading and writing random
element ranges, some in parallel blocks) and compares every stage with the pairs of accesses
that conflict, found by comparing every pair. Checked by mutation, by hand: each of these
changes to the segment bookkeeping in compiler/dag.py fails it: `starts[i] < stop` made
`<=`, `bisect_right(starts, start) - 1` without the `- 1`, `self._cut(stop)` made
`self._cut(stop - 1)` or `self._cut(start + 1)`, `w[0] >= block` or `r >= block` made `>`,
and merging segments whose states differ. On the former live-access list, retiring entries
by `t[2]` instead of `t[1]` drops the read-after-write edge of the issue's program below,
which the fixed test and the oracle both catch. `w[0] >= 0` survives, and is equivalent:
writes that are kept longer are still real conflicts, reduced away."""

from __future__ import annotations

import random
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipec.compiler import dag as dag_module
from pipec.compiler.dag import add_lanes, build_dag, hazard_predecessors, transitive_reduction
from pipec.compiler.model import DTYPES, Access, Buffer, FillNode, GraphBody, Init, Mode
from pipec.dsl.source import SourceFile, Span

from stage_helpers import check_text

SPAN = Span(SourceFile(Path("t.pipe"), ""), 0, 0)
BUFFERS = [Buffer(name, DTYPES["f32"], (64,), False, (), Init("zeros"), SPAN) for name in "ab"]


def _items(program) -> list[FillNode]:
    """Nodes from (accesses, parallel block or None), each access (buffer, start, stop, mode);
    what kind of node they are does not matter."""
    return [FillNode("n", BUFFERS[0], 0, 0, 0, SPAN,
                     tuple(Access(BUFFERS[b], start, stop, Mode(mode), SPAN) for b, start, stop, mode in accesses),
                     group)
            for accesses, group in program]


@st.composite
def programs(draw, max_nodes=12):
    """Nodes with one to three accesses over small ranges of two buffers; some nodes join the
    previous node's parallel block."""
    groups, nodes = [], []
    for _ in range(draw(st.integers(1, max_nodes))):
        accesses = []
        for _ in range(draw(st.integers(1, 3))):
            start = draw(st.integers(0, 7))
            stop = draw(st.integers(start, 8))
            accesses.append((draw(st.integers(0, 1)), start, stop, draw(st.sampled_from([1, 2, 3]))))
        joins = groups and draw(st.booleans()) and draw(st.booleans())
        groups.append(groups[-1] if joins else len(groups))
        nodes.append(tuple(accesses))
    # a block of one node is no block
    return [(accesses, g if groups.count(g) > 1 else None) for accesses, g in zip(nodes, groups)]


def _conflicts(items) -> dict[tuple[int, int], set[tuple[str, str]]]:
    """Every pair of nodes in program order, outside one parallel block, with the hazards
    between any two of their accesses: (kind, buffer)."""
    found: dict[tuple[int, int], set[tuple[str, str]]] = {}
    for j, later in enumerate(items):
        for i in range(j):
            if later.group is not None and items[i].group == later.group:
                continue
            for a in items[i].accesses:
                for b in later.accesses:
                    if a.buffer is b.buffer and set(range(a.start, a.stop)) & set(range(b.start, b.stop)):
                        kinds = {kind for kind, ok in (("RAW", a.mode & Mode.WRITE and b.mode & Mode.READ),
                                                       ("WAW", a.mode & Mode.WRITE and b.mode & Mode.WRITE),
                                                       ("WAR", a.mode & Mode.READ and b.mode & Mode.WRITE)) if ok}
                        found.setdefault((i, j), set()).update((kind, a.buffer.name) for kind in kinds)
    return {pair: kinds for pair, kinds in found.items() if kinds}


def _sibling_conflicts(items) -> list[tuple[int, int, int, int]]:
    """Every pair of accesses of two nodes of one parallel block that touch a common element,
    at least one writing: (node, its access, later node, its access), in program order."""
    return [(i, x, j, y)
            for j, later in enumerate(items) for i in range(j)
            if later.group is not None and items[i].group == later.group
            for x, a in enumerate(items[i].accesses) for y, b in enumerate(later.accesses)
            if a.buffer is b.buffer and set(range(a.start, a.stop)) & set(range(b.start, b.stop))
            and (a.mode | b.mode) & Mode.WRITE]


def _graph(n: int, edges) -> nx.DiGraph:
    graph = nx.DiGraph(list(edges))
    graph.add_nodes_from(range(n))
    return graph


def _closure(n: int, edges) -> set[tuple[int, int]]:
    return set(nx.transitive_closure_dag(_graph(n, edges)).edges)


def _width(n: int, edges) -> int:
    """The most nodes no path orders (what can run at once): by Dilworth's theorem, n minus a
    maximum matching between earlier and later ends of the transitive closure."""
    bipartite = nx.Graph()
    bipartite.add_nodes_from(("early", v) for v in range(n))
    bipartite.add_nodes_from(("late", v) for v in range(n))
    bipartite.add_edges_from((("early", a), ("late", b)) for a, b in _closure(n, edges))
    matching = nx.bipartite.hopcroft_karp_matching(bipartite, top_nodes=[("early", v) for v in range(n)])
    return n - len(matching) // 2


def _assert_lanes(n: int, edges, lanes: int) -> None:
    planned = add_lanes(n, edges, lanes)
    assert _closure(n, planned) >= _closure(n, edges), "a dependency is no longer implied"
    assert _width(n, planned) <= lanes
    assert set(planned) == set(transitive_reduction(n, planned)), "the planned edges are not reduced"
    if _width(n, edges) <= lanes:
        assert set(planned) == set(transitive_reduction(n, edges)), "a DAG within the bound was serialised"


@settings(max_examples=200)
@given(programs())
# Three lanes hold this DAG only if a chain is rearranged twice along one augmenting path.
@example([(((0, 0, 2, 1),), None), (((0, 0, 1, 1),), None), (((0, 0, 1, 2),), None),
          (((0, 0, 1, 1),), None), (((0, 0, 0, 1),), None), (((1, 0, 1, 1), (0, 0, 1, 2)), 5),
          (((0, 0, 1, 1),), 5), (((0, 0, 1, 2),), None), (((1, 0, 1, 2),), None)])
# Rearranging the chains keeps each chain's first node and relinks the rest.
@example([(((0, 7, 7, 2), (1, 5, 8, 2)), 0), (((0, 0, 7, 3), (0, 4, 6, 2), (0, 7, 8, 2)), 0),
          (((0, 0, 4, 2), (0, 2, 7, 3), (1, 3, 6, 2)), 2), (((1, 7, 8, 1),), 2),
          (((0, 0, 1, 2), (0, 4, 4, 3), (0, 4, 4, 3)), 4), (((1, 3, 4, 1),), 4),
          (((0, 6, 7, 2), (0, 0, 0, 3), (1, 5, 7, 2)), 4), (((1, 4, 8, 3),), None)])
def test_the_dag_orders_exactly_the_conflicting_accesses(program):
    items = _items(program)
    n = len(items)
    conflicts = _conflicts(items)
    preds, _, _ = hazard_predecessors(items)
    unreduced = {(a, b): hazard for b, (latest_first, hazards) in enumerate(preds)
                 for a, hazard in zip(latest_first, hazards, strict=True)}
    assert all(p == sorted(set(p), reverse=True) for p, _ in preds), "predecessors are not latest first, once"
    for pair, hazard in unreduced.items():
        assert hazard in conflicts.get(pair, ()), f"{pair} is not a {hazard} conflict"
    assert _closure(n, unreduced) == _closure(n, conflicts), "conflicting accesses left unordered"
    dag = build_dag(GraphBody("step", "step", SPAN, items))
    assert set(dag.edges) == set(nx.transitive_reduction(_graph(n, conflicts)).edges)
    node_at = {id(node): i for i, node in enumerate(items)}
    access_at = {id(a): x for node in items for x, a in enumerate(node.accesses)}
    reported = sorted((node_at[id(c.first_node)], access_at[id(c.first)], node_at[id(c.second_node)],
                       access_at[id(c.second)]) for c in dag.conflicts)
    assert reported == sorted(_sibling_conflicts(items)), "parallel members' conflicts differ"
    for pair, hazard in dag.hazards.items():
        assert (hazard.kind, hazard.buffer) in conflicts[pair]
    for lanes in (1, 2, 3):
        _assert_lanes(n, dag.edges, lanes)


def test_a_write_that_covers_another_does_not_hide_an_older_one():
    """The issue's program: write a[0:32], write a[32:64] twice, then read a[0:32]."""
    items = _items([([(0, 0, 32, 2)], None), ([(0, 32, 64, 2)], None), ([(0, 32, 64, 2)], None),
                    ([(0, 0, 32, 1)], None)])
    dag = build_dag(GraphBody("step", "step", SPAN, items))
    assert dag.edges == [(0, 3), (1, 2)]
    assert dag.hazards[0, 3].kind == "RAW"


def test_parallel_members_conflict_only_where_one_writes_an_element_the_other_touches():
    # two readers of a[0:8], a writer of a[6:10], an empty write a[8:8], a reader of b
    items = _items([([(0, 0, 8, 1)], 1), ([(0, 0, 8, 1)], 1), ([(0, 6, 10, 2)], 1), ([(0, 8, 8, 2)], 1),
                    ([(1, 0, 8, 1)], 1)])
    dag = build_dag(GraphBody("step", "step", SPAN, items))
    node_at = {id(node): i for i, node in enumerate(items)}
    assert [(node_at[id(c.first_node)], node_at[id(c.second_node)]) for c in dag.conflicts] == [(0, 2), (1, 2)]


def test_a_members_write_keeps_the_reads_of_the_members_before_it():
    # a block reads a[3:6] and writes a[4:5]; a later write to a[4:5] follows both members
    items = _items([([(0, 3, 6, 1)], 0), ([(0, 4, 5, 2)], 0), ([(0, 4, 5, 3)], None)])
    assert build_dag(GraphBody("step", "step", SPAN, items)).edges == [(0, 2), (1, 2)]


def test_a_parallel_block_is_followed_by_every_member_that_wrote():
    items = _items([([(0, 0, 8, 2)], 1), ([(0, 0, 8, 2)], 1), ([(0, 0, 8, 1)], None)])
    dag = build_dag(GraphBody("step", "step", SPAN, items))
    assert dag.edges == [(0, 2), (1, 2)]
    assert len(dag.conflicts) == 1


@st.composite
def dags(draw, max_nodes=40):
    n = draw(st.integers(1, max_nodes))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    return n, sorted({(a, b) for a, b in edges if a < b})


@settings(max_examples=200)
@given(dags())
def test_transitive_reduction_matches_networkx(dag):
    n, edges = dag
    assert set(transitive_reduction(n, edges)) == set(nx.transitive_reduction(_graph(n, edges)).edges)


def test_transitive_reduction_of_a_dense_dag_with_long_edges():
    """Like the benchmark's `random` shape: each node follows dozens of nodes, some far back,
    so most predecessors are covered by a later one (and the reduction skips them)."""
    rng = random.Random(7)
    n = 400
    edges = sorted({(a, b) for b in range(1, n) for a in rng.sample(range(b), min(b, 30))})
    assert set(transitive_reduction(n, edges)) == set(nx.transitive_reduction(_graph(n, edges)).edges)


@pytest.mark.parametrize("wide", [8, 1 << 12])
def test_transitive_reduction_of_a_node_that_keeps_hundreds_of_predecessors(monkeypatch, wide):
    """Like the benchmark's `slices` shape: k writers of one slice each (after a root), k copies
    of them, and a reader of every copy and of the root's successors. The reader keeps more
    than dag._FEW predecessors, each with an ancestor of its own; with `wide` 8 its covered
    set is tested in bytes from the start."""
    monkeypatch.setattr(dag_module, "_WIDE", wide)
    k = 300
    rng = random.Random(3)
    writers = list(range(1, k + 1))
    edges = [(0, w) for w in writers] + [(w, w + k) for w in writers]
    edges += [(c, 2 * k + 1) for c in range(k + 1, 2 * k + 1)] + [(w, 2 * k + 1) for w in writers]
    edges += [(a, b) for a, b in zip(rng.sample(writers, 40), rng.sample(writers, 40)) if a < b]
    n = 2 * k + 2
    assert set(transitive_reduction(n, edges)) == set(nx.transitive_reduction(_graph(n, edges)).edges)


@st.composite
def dense_dags(draw, max_nodes=30):
    """DAGs whose nodes follow many earlier ones, near and far: with `_FEW` lowered, most
    nodes go through `_many_predecessors`, covered and kept predecessors interleaved, and
    later nodes look up what those found."""
    n = draw(st.integers(2, max_nodes))
    follows = draw(st.lists(st.booleans(), min_size=n * (n - 1) // 2, max_size=n * (n - 1) // 2))
    return n, [edge for edge, chosen in zip(((a, b) for b in range(n) for a in range(b)), follows) if chosen]


@settings(max_examples=200)
@given(dense_dags(), st.sampled_from([1, 2, 3]), st.sampled_from([0, 8, 1 << 12]))
# 5 keeps 4, then 3 and 2 past `_FEW`; 1 is covered through 2's ancestors, and 0 still kept
@example((6, [(1, 2), (0, 5), (1, 5), (2, 5), (3, 5), (4, 5)]), 1, 1 << 12)
def test_the_reduction_of_nodes_with_many_predecessors_matches_networkx(dag, few, wide):
    """`_many_predecessors`, `_union`, `_bits` and the covered set tested in its bytes, on
    every node that keeps more than `few` predecessors (`wide` 0: in bytes from the start)."""
    n, edges = dag
    saved = dag_module._FEW, dag_module._WIDE
    dag_module._FEW, dag_module._WIDE = few, wide
    try:
        reduced = transitive_reduction(n, edges)
    finally:
        dag_module._FEW, dag_module._WIDE = saved
    assert set(reduced) == set(nx.transitive_reduction(_graph(n, edges)).edges)


@settings(max_examples=300)
@given(dags(max_nodes=14), st.integers(1, 5))
@example((6, [(0, 2), (1, 3), (2, 3), (2, 4)]), 3)  # greedy chains once needed a 4th lane here
# Three chains cover this DAG only after a chain is rearranged along an augmenting path.
@example((10, [(0, 1), (0, 3), (0, 4), (0, 9), (1, 3), (1, 4), (1, 7), (2, 3), (3, 9)]), 3)
def test_lanes_bound_the_width_and_keep_every_dependency(dag, lanes):
    _assert_lanes(*dag, lanes)
    _assert_lanes(*dag, _width(*dag))  # exactly as many lanes as the DAG is wide: no edge


def test_lanes_add_no_edge_to_a_dag_within_the_bound():
    """Chains {0, 2, 4}, {1, 3}, {5} fit 3 lanes; taking the nodes greedily in program order
    put 3 after 2 and then needed an edge for 5."""
    edges = [(0, 2), (1, 3), (2, 3), (2, 4)]
    assert add_lanes(6, edges, lanes=3) == edges


def test_lanes_order_a_wider_dag():
    assert add_lanes(4, [], lanes=2) == [(0, 2), (1, 3)]


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
