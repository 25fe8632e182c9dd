"""PC401: an `uninit` buffer read before anything (the init block or an earlier node of the
step) writes the elements read."""

from __future__ import annotations

import bisect

from ..codes import PC401
from ..model import CONTAINERS, Mode
from .context import CheckContext


class _Written:
    """The elements of one buffer written so far, as sorted, disjoint, non-touching
    half-open intervals: a check or an addition costs a search, not a sort of every write."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.stops: list[int] = []

    def covers(self, start: int, stop: int) -> bool:
        i = bisect.bisect_right(self.starts, start) - 1
        return start >= stop or (i >= 0 and self.stops[i] >= stop)

    def add(self, start: int, stop: int) -> None:
        if start >= stop:
            return
        # the intervals this one overlaps or touches: [first, last)
        first = bisect.bisect_left(self.stops, start)
        last = bisect.bisect_right(self.starts, stop)
        if first < last:
            start, stop = min(start, self.starts[first]), max(stop, self.stops[last - 1])
        self.starts[first:last] = [start]
        self.stops[first:last] = [stop]


def read_before_write(ctx: CheckContext) -> None:
    if not ctx.accesses_known:
        return  # a statement or binding with an error may have written the buffer first
    written: dict[str, _Written] = {}
    reported: set[str] = set()
    for node in ctx.nodes:
        if isinstance(node, CONTAINERS):
            continue  # its nodes follow in the walk
        for access in node.accesses:
            buffer = access.buffer
            if buffer.init.kind != "uninit" or buffer.name in reported:
                continue
            if access.mode & Mode.READ and not written.get(buffer.name, _Written()).covers(access.start, access.stop):
                reported.add(buffer.name)
                ctx.sink.add(PC401, f"`{buffer.name}` is read here before anything writes it",
                             access.span, "write it first (a fill, a kernel, or the init block), "
                             "or give it an initial value instead of `uninit`", label="read",
                             uses=ctx.uses(node))
        for access in node.accesses:
            if access.mode & Mode.WRITE:
                written.setdefault(access.buffer.name, _Written()).add(access.start, access.stop)
