"""Sets of a buffer's elements as sorted, disjoint, non-touching half-open intervals, for the
data rules that ask which elements something wrote (PC401, PC403): adding, testing and
removing a range costs a bisection and the intervals it meets, not a sort of every write."""

from __future__ import annotations

import bisect


class Intervals:
    """Elements as intervals [starts[i], stops[i]), sorted, disjoint and not touching."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.stops: list[int] = []

    def __iter__(self):
        return iter(zip(self.starts, self.stops))

    def add(self, start: int, stop: int) -> None:
        if start >= stop:
            return
        # the intervals this one overlaps or touches: [first, last)
        first = bisect.bisect_left(self.stops, start)
        last = bisect.bisect_right(self.starts, stop)
        if last == first + 1 and self.starts[first] <= start and stop <= self.stops[first]:
            return  # held already, as most writes are in a step that repeats its updates
        if first < last:
            start, stop = min(start, self.starts[first]), max(stop, self.stops[last - 1])
        self.starts[first:last] = [start]
        self.stops[first:last] = [stop]

    def remove(self, start: int, stop: int) -> None:
        if start >= stop:
            return
        # the intervals this one overlaps: [first, last); what sticks out of it stays
        first = bisect.bisect_right(self.stops, start)
        last = bisect.bisect_left(self.starts, stop)
        if first >= last:
            return
        kept = [(s, e) for s, e in ((self.starts[first], start), (stop, self.stops[last - 1])) if s < e]
        self.starts[first:last] = [s for s, _ in kept]
        self.stops[first:last] = [e for _, e in kept]

    def first_gap(self, start: int, stop: int) -> int | None:
        """The first element of [start, stop) outside the set, None when it covers them all."""
        if start >= stop:
            return None
        i = bisect.bisect_right(self.starts, start) - 1
        if i < 0 or self.stops[i] <= start:
            return start
        return self.stops[i] if self.stops[i] < stop else None

    def next_start(self, element: int) -> int | None:
        """The first element of the set after `element` that starts an interval, or None."""
        i = bisect.bisect_right(self.starts, element)
        return self.starts[i] if i < len(self.starts) else None

    def covers(self, start: int, stop: int) -> bool:
        return self.first_gap(start, stop) is None

    def within(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The set's elements in [start, stop), as intervals cut to it."""
        if start >= stop:
            return []
        first = bisect.bisect_right(self.stops, start)
        last = bisect.bisect_left(self.starts, stop)
        return [(max(s, start), min(e, stop)) for s, e in zip(self.starts[first:last], self.stops[first:last])]

    def intersection(self, other: Intervals) -> Intervals:
        both = Intervals()
        for start, stop in self:
            for piece in other.within(start, stop):
                both.add(*piece)
        return both
