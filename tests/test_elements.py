"""compiler/elements.py's chunks: the segments of a buffer cut into chunks of a few segments
each give the same DAG as one chunk, on the oracle test's random programs (tests/test_dag.py
compares that one with brute force), and on many slices cut out of order. And `Elements` on
its own: after every access its segments hold, element by element, what an element-wise model
holds, its chunks keep their shape, and a write that leaves segments alike leaves one."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------- Elements against one list per element

SIZE = 12  # elements 0..SIZE-1 are accessed; SIZE stands for every element past them
READ, WRITE = 1, 2


def _flat(e: elements.Elements) -> list[tuple[float, list[int], list[int]]]:
    """(start, writers, readers) of every segment, in order, across chunks."""
    return [seg for c in range(len(e.starts)) for seg in zip(e.starts[c], e.writers[c], e.readers[c])]


def _check_shape(e: elements.Elements) -> None:
    """What the chunks promise whatever the accesses: lists of one length per chunk, none empty
    or over 2 * CHUNK (the first access's three segments may be, with CHUNK = 1), `firsts` their
    first starts, starts rising strictly from _FIRST, a node listed once among a segment's
    readers."""
    assert len(e.starts) == len(e.writers) == len(e.readers) == len(e.firsts)
    for c, starts in enumerate(e.starts):
        assert 0 < len(starts) == len(e.writers[c]) == len(e.readers[c]) <= max(2 * elements.CHUNK, 3)
        assert e.firsts[c] == starts[0]
    flat = _flat(e)
    assert flat[0][0] == elements._FIRST
    assert all(a[0] < b[0] for a, b in pairwise(flat))
    assert all(len(set(readers)) == len(readers) for _, _, readers in flat)


def _per_element(e: elements.Elements) -> list[tuple[list[int], list[int]]]:
    flat = _flat(e)
    return [next((w, r) for start, w, r in reversed(flat) if start <= x) for x in range(SIZE + 1)]


class _Model:
    """Each element's last writers and readers since, by the rule `Elements.add` states."""

    def __init__(self) -> None:
        self.cells: list[tuple[list[int], list[int]]] = [([], []) for _ in range(SIZE + 1)]

    def add(self, start: int, stop: int, mode: int, node: int, block: int) -> None:
        for x in range(start, stop):
            writers, readers = self.cells[x]
            if not mode & WRITE:
                if not readers or readers[-1] != node:
                    readers.append(node)
            elif node == block:
                self.cells[x] = [node], []
            else:
                self.cells[x] = [w for w in writers if w >= block] + [node], [r for r in readers if r >= block]

    def predecessors(self, start: int, stop: int, mode: int) -> list[tuple[int, str]]:
        found: dict[int, str] = {}
        for x in range(start, stop):
            writers, readers = self.cells[x]
            for node in writers:
                found.setdefault(node, "RAW" if mode & READ else "WAW")
            for node in readers if mode & WRITE else ():
                found.setdefault(node, "WAR")
        return list(found.items())


_access = st.tuples(st.integers(0, SIZE - 1), st.integers(1, SIZE), st.sampled_from([READ, WRITE, READ | WRITE])) \
    .map(lambda t: (min(t[0], t[1] - 1), max(t[0] + 1, t[1]), t[2]))
# a program: blocks of nodes (one node, or a parallel block's members), each node a few accesses
_blocks = st.lists(st.lists(st.lists(_access, min_size=1, max_size=3), min_size=1, max_size=3),
                   min_size=1, max_size=14)


def _replay(blocks, chunk: int) -> None:
    """Run the blocks through one Elements and the model, checking after every access."""
    saved, elements.CHUNK = elements.CHUNK, chunk
    try:
        model, e, node = _Model(), None, 0
        for block in blocks:
            first = node
            for accesses in block:  # every member is ordered before any member is added
                for start, stop, mode in accesses:
                    if e is not None:
                        found: dict[int, tuple[str, str]] = {}
                        e.predecessors(start, stop, mode, "a", found)
                        assert [(n, label[0]) for n, label in found.items()] == model.predecessors(start, stop, mode)
                node += 1
            for member, accesses in enumerate(block, first):
                for start, stop, mode in accesses:
                    model.add(start, stop, mode, member, first)
                    if e is None:
                        e = elements.Elements(start, stop, mode, member)
                    else:
                        e.add(start, stop, mode, member, first)
                    _check_shape(e)
                    assert _per_element(e) == model.cells
    finally:
        elements.CHUNK = saved


@settings(max_examples=300)
@given(_blocks, st.sampled_from([1, 2, 1000]))
def test_segments_hold_what_each_element_would(blocks, chunk):
    _replay(blocks, chunk)


@pytest.mark.parametrize("chunk", [1, 2])
def test_a_chunk_splits_past_twice_its_size_into_halves(chunk):
    # one-element writes, left to right, then right to left between them: every cut lands in
    # the last chunk, then in every chunk
    blocks = [[[(x, x + 1, WRITE)]] for x in range(0, SIZE, 2)] + [[[(x, x + 1, WRITE)]] for x in range(SIZE - 1, 0, -2)]
    _replay(blocks, chunk)


def _build(chunk: int) -> elements.Elements:
    saved, elements.CHUNK = elements.CHUNK, chunk
    try:
        e = elements.Elements(0, 1, WRITE, 0)
        for x in range(1, SIZE):
            e.add(x, x + 1, WRITE, x, x)
    finally:
        elements.CHUNK = saved
    return e


@pytest.mark.parametrize("chunk", [1, 2, 1000])
def test_segment_finds_a_segment_exactly_in_any_chunk(chunk):
    e = _build(chunk)
    starts = [start for start, _, _ in _flat(e)]
    assert len(e.starts) > (3 if chunk < 1000 else 0)
    for k, (start, stop) in enumerate(pairwise(starts)):
        c = next(c for c in range(len(e.starts)) if start in e.starts[c])
        assert e._segment(start, stop) == (c, e.starts[c].index(start)), (start, stop)
        assert e._segment(start, stop + 1) is None and e._segment(start, stop - 0.5) is None
        if k:  # inside the segment before: not a segment's start
            assert e._segment(start - 0.5, stop) is None
    assert e._segment(starts[-1], starts[-1] + 1) is None  # the last segment has no end


def test_a_members_write_over_segments_left_alike_leaves_one_segment():
    # a[0:12] by node 0, a[2:4] and a[6:8] by 1 and 2; then a block: node 3 writes a[0:1], its
    # member 4 a[2:10], which holds then only 4's write everywhere: one segment again
    e = elements.Elements(0, SIZE, WRITE, 0)
    e.add(2, 4, WRITE, 1, 1)
    e.add(6, 8, WRITE, 2, 2)
    e.add(0, 1, WRITE, 3, 3)
    e.add(2, 10, WRITE, 4, 3)
    assert [(start, w, r) for start, w, r in _flat(e)] == [
        (elements._FIRST, [], []), (0, [3], []), (1, [0], []), (2, [4], []), (10, [0], []), (SIZE, [], [])]


def test_a_node_reading_a_segment_twice_is_listed_once():
    # node 1 reads a[0:4] after node 0; node 2 reads it twice (two arguments bound to it)
    e = elements.Elements(0, 4, READ, 0)
    for node in (1, 2, 2):
        e.add(0, 4, READ, node, node)
    assert _flat(e)[1] == (0, [], [0, 1, 2])
