"""PC314: two nodes of a `parallel` block touch the same elements, at least one writing, with
no path between them in the graph."""

from __future__ import annotations

from ...wording import counted
from ..codes import PC314
from ..diagnostics import Label
from ..parallel_conflicts import ROOM, ROOM_PER_MEMBER
from .context import CheckContext


def unordered_conflict(ctx: CheckContext) -> None:
    for dag in ctx.dags:
        # A `parallel for` repeats one statement: its iterations conflict pairwise through the
        # same two source locations. Report each pair of locations once, with the count.
        by_location: dict[tuple, list] = {}
        for c in dag.conflicts:
            key = (id(c.first.span.source), c.first.span.start, c.second.span.start, c.second.buffer.name)
            by_location.setdefault(key, []).append(c)
        for conflicts in by_location.values():
            c = conflicts[0]
            buffer = c.second.buffer.name
            overlap = (max(c.first.start, c.second.start), min(c.first.stop, c.second.stop))
            in_part = c.first_node.group in dag.counted_in_part
            more = "at least " * in_part
            notes: tuple[str, ...] = ((f"{more}{counted(len(conflicts) - 1, 'more pair')} of nodes from these "
                      "lines conflict the same way",) if len(conflicts) > 1 else ())
            if in_part:
                notes += (f"pipec counts at most {ROOM_PER_MEMBER} conflicting pairs per member of a block, "
                          f"plus {ROOM}",)
            ctx.sink.add(PC314, f"`{c.first_node.name}` ({c.first.mode.describe()}) and "
                         f"`{c.second_node.name}` ({c.second.mode.describe()}) touch "
                         f"`{buffer}[{overlap[0]}:{overlap[1]}]` with no ordering between them",
                         c.second.span,
                         "give them disjoint slices, or move one out of the `parallel` block so an "
                         "edge orders them", label=c.second.mode.describe().split()[-1],
                         labels=(Label(c.first.span, c.first.mode.describe()),), notes=notes,
                         uses=ctx.uses(c.second_node))
