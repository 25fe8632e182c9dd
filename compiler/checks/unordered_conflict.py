"""PC314: two nodes of a `parallel` block touch the same elements, at least one writing, with
no path between them in the graph."""

from __future__ import annotations

from ..diagnostics import Label
from .context import CheckContext


def unordered_conflict(ctx: CheckContext) -> None:
    for dag in ctx.dags:
        for c in dag.conflicts:
            buffer = c.second.buffer.name
            overlap = (max(c.first.start, c.second.start), min(c.first.stop, c.second.stop))
            ctx.sink.add("PC314", f"`{c.first_node.name}` {c.first.mode.describe()} and "
                         f"`{c.second_node.name}` {c.second.mode.describe()} `{buffer}`"
                         f"[{overlap[0]}:{overlap[1]}] with no ordering between them", c.second.span,
                         "give them disjoint slices, or move one out of the `parallel` block so an "
                         "edge orders them", label=c.second.mode.describe().split()[-1],
                         labels=(Label(c.first.span, c.first.mode.describe()),))
