"""What a launch reaches through pointers its kernel loads from memory.

The PTX analysis (ptx/writes.py) tells, per parameter, whether the kernel loads or stores
through a pointer it read from the memory that parameter points to, and whether it loads or
stores through a pointer of unknown origin. Where the launch binds a table of addresses
(`buffer t: ptr[N] = addresses(a, b[0:64], ...)`) to that parameter, those accesses are the
accesses of the buffers the table names, the slice of the table bound choosing which; anywhere
else, a pointer loaded from memory could point anywhere, and the access is one pipec cannot
follow: a store is PC318's (it may write a buffer bound `in`), a load PC324's.
"""

from __future__ import annotations

from typing import Literal

from .model import Access, LaunchNode, Mode, Param, PointerArg, Site


def _tables(node: LaunchNode) -> set[int]:
    """The parameters the launch binds a table of addresses to, and the pointers to pointers it
    binds a plain buffer to (PC203 reports that binding, so PC318 and PC324 leave it alone)."""
    return {param.index for param, arg in zip(node.kernel.params, node.args)
            if isinstance(arg, PointerArg) and (arg.buffer.is_table or param.table)}


def unfollowed_store(node: LaunchNode) -> Site | None:
    """The first store of the launch that could land in any buffer, or None."""
    return _unfollowed(node, node.kernel.unknown_write, "written_through")


def unfollowed_load(node: LaunchNode) -> Site | None:
    """The first load of the launch that could read any buffer, or None."""
    return _unfollowed(node, node.kernel.unknown_read, "read_through")


def _unfollowed(node: LaunchNode, unknown: Site | None,
                through: Literal["written_through", "read_through"]) -> Site | None:
    """`unknown` (an access through a pointer of unknown origin), else the first access through
    a pointer loaded from a parameter the launch binds no table to."""
    if unknown:
        return unknown
    sites = [(p.index, site) for p in node.kernel.params if (site := getattr(p, through))]
    tables = _tables(node) if sites else set()  # most kernels go through no loaded pointer
    return next((site for index, site in sites if index not in tables), None)


def entry_accesses(node: LaunchNode, param: Param, table: PointerArg, stop: int) -> tuple[Access, ...]:
    """The accesses of the buffers a bound table names, from its element `table.start` up to
    `stop`: read where the kernel loads through the pointers it reads from the table, written
    where it stores through them, or where it stores through a pointer it cannot follow (which
    may be one of them)."""
    bits = 0  # Mode is an IntEnum without a member for none: its bits, then the member
    if param.read_through is not None:
        bits |= Mode.READ
    if param.written_through is not None or unfollowed_store(node) is not None:
        bits |= Mode.WRITE
    if not bits:
        return ()
    mode = Mode(bits)
    entries = table.buffer.init.entries[table.start:stop]
    return tuple(Access(entry.buffer, entry.start, entry.stop, mode, table.span) for entry in entries)
