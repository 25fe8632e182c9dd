"""PC313: a launch with no blocks or no threads, or a grid over the device's limits."""

from __future__ import annotations

from .context import CheckContext

MAX_GRID = (2**31 - 1, 65535, 65535)


def invalid_grid(ctx: CheckContext) -> None:
    for node in ctx.launches():
        for what, dims in (("grid", node.grid), ("block", node.block)):
            if any(d <= 0 for d in dims):
                ctx.sink.add("PC313", f"the {what} {dims} is empty", node.config_span,
                             "every grid and block dimension must be at least 1; a launch that "
                             "should do nothing can read a device flag instead")
                break
        else:
            over = [axis for axis, d, limit in zip("xyz", node.grid, MAX_GRID) if d > limit]
            if over:
                ctx.sink.add("PC313", f"grid.{over[0]} = {node.grid['xyz'.index(over[0])]} exceeds the "
                             f"limit {MAX_GRID['xyz'.index(over[0])]}", node.config_span,
                             "launch fewer, larger blocks or loop inside the kernel")
