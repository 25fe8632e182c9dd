"""compiler/parallel_conflicts.py beyond tests/test_dag.py's brute-force oracle: a wide block is
swept, not compared pairwise, and a block whose members all overlap is counted up to a bound
linear in its members, the DAG recording it as counted in part."""

from __future__ import annotations

from pipec.compiler.dag import build_dag
from pipec.compiler.model import GraphBody
from pipec.compiler.parallel_conflicts import ROOM, ROOM_PER_MEMBER, sibling_conflicts

from test_dag import SPAN, _items


def test_members_all_writing_one_element_are_counted_up_to_the_bound():
    members = 300
    items = _items([(((0, 0, 1, 2),), 7)] * members + [(((1, 0, 4, 2),), 8)] * 2)
    found, complete = sibling_conflicts(items, 0, members)
    assert not complete and len(found) == ROOM + ROOM_PER_MEMBER * members
    assert [(items.index(c.first_node), items.index(c.second_node)) for c in found[:3]] == [(0, 1), (0, 2), (0, 3)]
    dag = build_dag(GraphBody("step", "step", SPAN, items))
    assert dag.counted_in_part == {7}  # the second block's one pair is all of it


def test_a_wide_block_on_elements_of_its_own_has_no_conflict():
    # members in a strided order, each writing one element and reading the one after it
    members = 64
    order = [(k * 5) % members for k in range(members)]
    items = _items([(((0, e, e + 1, 2), (1, e, e + 1, 1)), 3) for e in order])
    assert sibling_conflicts(items, 0, members) == ([], True)
    items = _items([(((0, e, e + 2, 2),), 3) for e in order])  # now each overlaps its neighbour
    found, complete = sibling_conflicts(items, 0, members)
    assert complete and len(found) == members - 1


def test_the_bound_is_100_plus_2_per_member_and_stops_the_sweep_of_every_buffer():
    # two nodes before the block; members 0 and 1 of it also overlap on `b`, which the sweep
    # of `a` (first seen) never reaches once `a` has used the room up
    both = ((0, 0, 1, 2), (1, 0, 1, 2))
    items = _items([(((1, 9, 10, 1),), None)] * 2 + [(both, 4)] * 2 + [(((0, 0, 1, 2),), 4)] * 298)
    found, complete = sibling_conflicts(items, 2, 302)
    assert not complete and len(found) == 700
    assert {c.first.buffer.name for c in found} == {"a"}


def test_exactly_as_many_pairs_as_the_room_is_all_of_them():
    # 20 members on one element make 190 pairs; with 25 more on elements of their own the
    # room is 100 + 2 * 45 = 190
    items = _items([(((0, 0, 1, 2),), 1)] * 20 + [(((0, e, e + 1, 2),), 1) for e in range(10, 35)])
    found, complete = sibling_conflicts(items, 0, 45)
    assert complete and len(found) == 190
