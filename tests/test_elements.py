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
