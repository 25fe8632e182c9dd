"""One buffer's elements as the hazard DAG sees them: cut into segments that every access so
far covers whole or misses, each with its last write and the reads since.

The segments are kept in chunks of at most 2 * CHUNK, each a sorted run of segment starts with
the first start of every chunk in `firsts`, so cutting a segment costs a bisection and an
insert into one chunk. One flat list made each cut move every later segment: with many
slices of one buffer cut out of order (a strided write per node) the check grew with
exponent 1.8 between 300,000 and 1,000,000 nodes."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from functools import cache
from typing import Any

from .model import Mode

CHUNK = 512  # a chunk splits in two when it holds more than 2 * CHUNK segments
_FIRST = float("-inf")  # the start of every buffer's first segment, before its elements
_READ, _WRITE = int(Mode.READ), int(Mode.WRITE)  # plain ints: this is the compiler's hottest loop


@cache
def _labels(mode: int, buffer: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """A later access's hazard after a segment's last write and after its reads. After a write
    it depends on the later access only (a read is RAW, a write WAW, whatever the write was).
    One tuple per kind and buffer, shared by every edge it labels (there can be millions) and
    by every graph body (a step of 10,000 updates has 40,000)."""
    return ("RAW" if mode & _READ else "WAW", buffer), ("WAR", buffer)


class Elements:
    """Per segment: the nodes of its last write (several only for members of one
    parallel block) and the nodes that read it since. A later access conflicts with nothing
    older there: every older access is ordered before that last write. Chunk c holds
    segments starts[c][i], each [starts[c][i], the next start)."""

    def __init__(self, start: int, stop: int, mode: int, node: int) -> None:
        """The buffer as its first access, `node`'s, leaves it: three segments, before, in and
        after [start, stop). Built directly, not by `add` cutting an empty buffer twice: in a
        small graph most accesses are the first to their buffer."""
        self.starts: list[list[float]] = [[_FIRST, start, stop]]
        writes = bool(mode & _WRITE)
        self.writers: list[list[list[int]]] = [[[], [node] if writes else [], []]]
        self.readers: list[list[list[int]]] = [[[], [] if writes else [node], []]]
        self.firsts: list[float] = [_FIRST]  # starts[c][0] of every chunk c

    def predecessors(self, start: int, stop: int, mode: int, buffer: str,
                     found: dict[int, tuple[str, str]]) -> None:
        """Add to `found` every node an access to [start, stop) must follow, with its hazard."""
        after_write, after_read = _labels(mode, buffer)
        for c, i, j in self._runs(start, stop):
            writers, readers = self.writers[c], self.readers[c]
            for k in range(i, j):
                for node in writers[k]:
                    if node not in found:
                        found[node] = after_write
                if mode & _WRITE:
                    for node in readers[k]:
                        if node not in found:
                            found[node] = after_read

    def add(self, start: int, stop: int, mode: int, node: int, block: int) -> None:
        """Record `node`'s access; `block` is the first node of its parallel block (or itself),
        whose members' entries a write keeps: later nodes follow every member."""
        whole = self._segment(start, stop)
        if whole is None:
            self._cut(start)
            self._cut(stop)
            runs = self._runs(start, stop)
        else:  # most accesses repeat a range: a whole buffer, a slice read after its write
            runs = [(whole[0], whole[1], whole[1] + 1)]
        if not mode & _WRITE:
            for c, i, j in runs:
                for segment in self.readers[c][i:j]:
                    if not segment or segment[-1] != node:
                        segment.append(node)
            return
        if node == block:  # outside a parallel block, a write leaves only itself: one segment
            c, i, _ = runs[0]
            self.writers[c][i], self.readers[c][i] = [node], []
            if whole is None:  # a repeat of one segment has nothing to delete (and is the most common)
                self._delete(c, i + 1, runs[-1][0], runs[-1][2])
            return
        writers = [[w for w in self.writers[c][k] if w >= block] + [node]
                   for c, i, j in runs for k in range(i, j)]
        readers = [[r for r in self.readers[c][k] if r >= block] for c, i, j in runs for k in range(i, j)]
        if all(w == writers[0] for w in writers) and all(r == readers[0] for r in readers):
            c, i, _ = runs[0]  # one segment again
            self.writers[c][i], self.readers[c][i] = writers[0], readers[0]
            self._delete(c, i + 1, runs[-1][0], runs[-1][2])
            return
        done = 0
        for c, i, j in runs:
            self.writers[c][i:j] = writers[done:done + j - i]
            self.readers[c][i:j] = readers[done:done + j - i]
            done += j - i

    def _segment(self, start: int, stop: int) -> tuple[int, int] | None:
        """(chunk, index) of the segment that is [start, stop) exactly, None when none is."""
        c = bisect_right(self.firsts, start) - 1
        starts = self.starts[c]
        i = bisect_right(starts, start) - 1
        if starts[i] != start:
            return None
        if i + 1 < len(starts):
            return (c, i) if starts[i + 1] == stop else None
        return (c, i) if c + 1 < len(self.starts) and self.starts[c + 1][0] == stop else None

    def _runs(self, start: int, stop: int) -> list[tuple[int, int, int]]:
        """(chunk, first, end) per chunk, for the segments that overlap [start, stop)."""
        c = bisect_right(self.firsts, start) - 1
        i = bisect_right(self.starts[c], start) - 1
        runs = []
        while c < len(self.starts):
            starts = self.starts[c]
            j = bisect_left(starts, stop, i)
            runs.append((c, i, j))
            if j < len(starts):
                break
            c, i = c + 1, 0
        return runs

    def _cut(self, at: int) -> None:
        """Make a segment start at `at`, cutting the one holding it if needed."""
        c = bisect_right(self.firsts, at) - 1
        starts = self.starts[c]
        i = bisect_right(starts, at) - 1
        if starts[i] == at:
            return
        starts.insert(i + 1, at)
        # both halves hold what the segment held: the first gets a copy of its lists, the second them
        self.writers[c].insert(i, list(self.writers[c][i]))
        self.readers[c].insert(i, list(self.readers[c][i]))
        if len(starts) > 2 * CHUNK:
            for lists in self._chunked():
                lists.insert(c + 1, lists[c][CHUNK:])
                del lists[c][CHUNK:]
            self.firsts.insert(c + 1, self.starts[c + 1][0])

    def _chunked(self) -> tuple[list[Any], list[Any], list[Any]]:
        """The three lists of chunks that are cut and joined together, alike."""
        return self.starts, self.writers, self.readers

    def _delete(self, c: int, i: int, last: int, end: int) -> None:
        """Delete the segments from chunk c's i-th up to chunk `last`'s end-th (excluded), none
        when they are the same. Both chunks stay non-empty: c keeps its segments before i (i > 0),
        and `last` the segment starting at the access's stop, which every write has cut."""
        for lists in self._chunked():
            if c == last:
                del lists[c][i:end]
            else:
                del lists[last][:end], lists[c][i:]
                del lists[c + 1:last]
        if c != last:
            del self.firsts[c + 1:last]
            self.firsts[c + 1] = self.starts[c + 1][0]  # chunk `last`, now next to c
