"""PC401: an `uninit` buffer read before anything (the init block or an earlier node of the
step) writes the elements read."""

from __future__ import annotations

from ..model import CONTAINERS, Mode
from .context import CheckContext


def _covered(intervals: list[tuple[int, int]], start: int, stop: int) -> bool:
    position = start
    for a, b in sorted(intervals):
        if a > position:
            break
        position = max(position, b)
        if position >= stop:
            return True
    return position >= stop


def read_before_write(ctx: CheckContext) -> None:
    if ctx.program.dropped_statements:
        return  # a statement with an error may have written the buffer first
    written: dict[str, list[tuple[int, int]]] = {}
    reported: set[str] = set()
    for body in ctx.program.bodies():
        for node in body.walk():
            if isinstance(node, CONTAINERS):
                continue  # its nodes follow in the walk
            for access in node.accesses:
                buffer = access.buffer
                if buffer.init.kind != "uninit" or buffer.name in reported:
                    continue
                if access.mode & Mode.READ and not _covered(written.get(buffer.name, []), access.start, access.stop):
                    reported.add(buffer.name)
                    ctx.sink.add("PC401", f"`{buffer.name}` is read here before anything writes it",
                                 access.span, "write it first (a fill, a kernel, or the init block), "
                                 "or give it an initial value instead of `uninit`", label="read")
            for access in node.accesses:
                if access.mode & Mode.WRITE:
                    written.setdefault(access.buffer.name, []).append((access.start, access.stop))
