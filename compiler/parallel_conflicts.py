"""The conflicts among the members of one `parallel` block (rule PC314): two members touching
overlapping elements of one buffer, at least one of them writing.

Found by a sweep over each buffer's accesses in order of their first element, so the cost is
that of sorting the block's accesses plus one step per conflicting pair: a clean block of
100,000 members costs about as much as 100,000 nodes in sequence, where comparing every pair
took quadratic time. A dirty block can hold quadratically many pairs; past a bound linear in
its members (ROOM_PER_MEMBER each, plus ROOM) the sweep stops, and the DAG records the block
as counted only in part (the report then says "at least")."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from .model import Access, Mode, Node

ROOM, ROOM_PER_MEMBER = 100, 2  # pairs kept per block: every pair of a clean-but-for-one block
_WRITE = int(Mode.WRITE)


@dataclass(frozen=True)
class Conflict:
    """Two nodes of one parallel block touching the same data, at least one writing."""

    first: Access
    second: Access
    first_node: Node
    second_node: Node


def touches(access: Access) -> bool:
    """An empty range (a slice or an extent of 0) touches no element, so it conflicts with nothing."""
    return access.start < access.stop


def sibling_conflicts(items: list[Node], start: int, end: int) -> tuple[list[Conflict], bool]:
    """The conflicting pairs among items[start:end], each once, the earlier member first, in
    the order (first member, second member, their accesses' positions), and whether that is
    all of them (False when the bound cut the sweep short)."""
    room = ROOM + ROOM_PER_MEMBER * (end - start)
    by_buffer: dict[int, list[tuple[int, int, int, Access]]] = {}
    for member in range(start, end):
        for position, access in enumerate(items[member].accesses):
            if touches(access):
                by_buffer.setdefault(id(access.buffer), []).append((access.start, member, position, access))
    pairs: list[tuple[int, int, int, int, Access, Access]] = []
    complete = True
    for accesses in by_buffer.values():
        if len(accesses) > 1 and not _sweep(sorted(accesses, key=lambda e: e[:3]), pairs, room):
            complete = False
            break
    pairs.sort(key=lambda p: p[:4])
    return [Conflict(a, b, items[i], items[j]) for i, j, _, _, a, b in pairs[:room]], complete


def _sweep(accesses: list[tuple[int, int, int, Access]], pairs: list, room: int) -> bool:
    """Add to `pairs` the conflicts among one buffer's accesses, sorted by first element: each
    overlaps exactly the accesses still open where it starts. False once past `room` pairs."""
    open_reads: dict[int, tuple[int, int, Access]] = {}  # index -> (member, position, access)
    open_writes: dict[int, tuple[int, int, Access]] = {}
    closing: list[tuple[int, int]] = []  # (stop, index) of every open access
    for index, (first, member, position, access) in enumerate(accesses):
        while closing and closing[0][0] <= first:
            _, done = heapq.heappop(closing)
            open_reads.pop(done, None)
            open_writes.pop(done, None)
        writes = int(access.mode) & _WRITE
        for others in (open_writes, open_reads) if writes else (open_writes,):
            for other_member, other_position, other in others.values():
                if other_member != member:
                    pairs.append((other_member, member, other_position, position, other, access)
                                 if other_member < member else
                                 (member, other_member, position, other_position, access, other))
        if len(pairs) > room:
            return False
        (open_writes if writes else open_reads)[index] = (member, position, access)
        heapq.heappush(closing, (access.stop, index))
    return True
