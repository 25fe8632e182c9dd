"""compiler/intervals.py against sets of integers: any sequence of additions and removals, then
every query, agrees with the set it stands for."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from pipec.compiler.intervals import Intervals

RANGES = st.tuples(st.integers(0, 40), st.integers(0, 40))
OPERATIONS = st.lists(st.tuples(st.booleans(), RANGES), max_size=12)


def _built(operations) -> tuple[Intervals, set[int]]:
    intervals, elements = Intervals(), set()
    for adding, (start, stop) in operations:
        if adding:
            intervals.add(start, stop)
            elements |= set(range(start, stop))
        else:
            intervals.remove(start, stop)
            elements -= set(range(start, stop))
    return intervals, elements


def _elements(pieces) -> set[int]:
    return {e for start, stop in pieces for e in range(start, stop)}


@given(OPERATIONS, RANGES)
@example([(True, (0, 10)), (True, (10, 20))], (5, 15))            # touching intervals merge
@example([(True, (0, 10)), (False, (3, 5))], (0, 10))             # a hole cut in the middle
@example([(True, (0, 10)), (False, (0, 10))], (0, 10))            # removed whole
@example([(True, (5, 10)), (True, (20, 30)), (False, (8, 25))], (0, 40))
@example([(True, (5, 10))], (3, 7))                               # starts before the set
@example([(True, (5, 10)), (True, (12, 20))], (6, 15))             # a gap after the first
@example([(True, (0, 2))], (1, 1))                                # an empty query
@example([(True, (0, 2)), (True, (5, 8))], (0, 3))                 # an interval after the query
@example([(True, (0, 2)), (True, (4, 6)), (True, (1, 5))], (0, 8))  # one range joins two, ending in the second
def test_intervals_are_the_set_of_their_elements(operations, query):
    intervals, elements = _built(operations)
    assert _elements(intervals) == elements
    starts, stops = intervals.starts, intervals.stops
    assert all(a < b for a, b in zip(starts, stops)) and all(b < a for b, a in zip(stops, starts[1:]))
    start, stop = query
    wanted = set(range(start, stop))
    missing = sorted(wanted - elements)
    assert intervals.first_gap(start, stop) == (missing[0] if missing else None)
    assert intervals.covers(start, stop) == (not missing)
    after = [s for s, _ in intervals if s > start]
    assert intervals.next_start(start) == (after[0] if after else None)
    inside = intervals.within(start, stop)
    assert _elements(inside) == wanted & elements and all(a < b for a, b in inside)


@given(OPERATIONS, OPERATIONS)
def test_the_intersection_holds_the_elements_both_hold(first, second):
    one, ones = _built(first)
    two, twos = _built(second)
    assert _elements(one.intersection(two)) == ones & twos


def test_an_empty_range_changes_nothing_and_is_covered():
    intervals = Intervals()
    intervals.add(5, 5)
    intervals.add(5, 3)
    intervals.remove(4, 4)
    assert list(intervals) == [] and intervals.covers(7, 7) and intervals.first_gap(7, 3) is None
    intervals.add(0, 4)
    intervals.remove(2, 2)
    assert list(intervals) == [(0, 4)]
