"""compiler/elements.py's chunks: the segments of a buffer cut into chunks of a few segments
each give the same DAG as one chunk, on the oracle test's random programs (tests/test_dag.py
compares that one with brute force), and on many slices cut out of order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from pipec.compiler import elements
from pipec.compiler.dag import build_dag
from pipec.compiler.model import GraphBody

from test_dag import SPAN, _items, programs


def _dag(program, chunk: int):
    saved = elements.CHUNK
    elements.CHUNK = chunk
    try:
        dag = build_dag(GraphBody("step", "step", SPAN, _items(program)))
    finally:
        elements.CHUNK = saved
    return dag.edges, {pair: (h.kind, h.buffer) for pair, h in dag.hazards.items()}, len(dag.conflicts)


@settings(max_examples=300)
@given(programs(max_nodes=16))
def test_chunks_of_one_or_two_segments_give_the_dag_of_one_chunk(program):
    assert _dag(program, 1) == _dag(program, 1000)


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_strided_slices_then_a_write_over_all_of_them(chunk):
    # one-element writes in a strided order (every cut lands inside a chunk), reads of pairs
    # of them, then one write over every slice (merging segments across chunks), then reads
    order = [(k * 5) % 16 for k in range(16)]
    program = ([(((0, e, e + 1, 2),), None) for e in order]
               + [(((0, e, e + 2, 1), (1, e, e + 1, 2)), None) for e in order[:8]]
               + [(((0, 1, 15, 2),), None), (((0, 0, 16, 1),), None), (((0, 3, 4, 3),), None)])
    assert _dag(program, chunk) == _dag(program, 1000)


def test_a_members_write_over_two_segments_leaves_one_segment_of_its_own():
    # a[0:4] and a[4:8] written apart; a member of a parallel block writes a[0:8] (both
    # segments then hold the same state and become one); a read of a[4:8] follows the member
    program = [(((0, 0, 4, 2),), None), (((0, 4, 8, 2),), None), (((1, 0, 8, 1),), 1), (((0, 0, 8, 2),), 1),
               (((0, 4, 8, 1),), None)]
    edges, hazards, conflicts = _dag(program, 1000)
    assert edges == [(0, 3), (1, 3), (3, 4)] and hazards[3, 4] == ("RAW", "a") and conflicts == 0


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_a_members_write_over_segments_of_several_chunks_that_stay_apart(chunk):
    # three writes cut `a` into chunks; a block's first member writes a[1:3], so its second
    # member's write over a[0:8] leaves segments of one and of two writers, in several chunks;
    # reads of single elements then follow only the members that wrote there
    program = [(((0, 0, 2, 2),), None), (((0, 4, 6, 2),), None), (((0, 6, 7, 2),), None),
               (((0, 1, 3, 2),), 3), (((0, 0, 8, 2),), 3)] + [(((0, e, e + 1, 1),), None) for e in range(9)]
    assert _dag(program, chunk) == _dag(program, 1000)


def test_the_hazard_after_a_write_depends_on_the_later_access():
    # a write after a write is WAW, a read or a read-write after it RAW, a write after a read WAR
    program = [(((0, 0, 4, 2),), None), (((0, 0, 4, 2),), None), (((0, 0, 4, 3),), None),
               (((0, 0, 4, 1),), None), (((0, 0, 4, 2),), None)]
    _, hazards, _ = _dag(program, 1000)
    assert {pair: kind for pair, (kind, _) in hazards.items()} == {
        (0, 1): "WAW", (1, 2): "RAW", (2, 3): "RAW", (3, 4): "WAR"}
