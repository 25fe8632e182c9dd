"""PC323: a kernel that asks for programmatic launch (it executes `griddepcontrol.wait` or
`griddepcontrol.launch_dependents`) but touches, before its wait, a buffer range that an earlier
node touches (child graphs opened, as the runtime adds their nodes for programmatic edges),
one of the two writing. pipec then keeps every edge into the launch ordinary
(compiler/programmatic_edges.py), so nothing races; the rule says why the launch gains nothing and where: at the kernel's line that makes the access, once per kernel, line and buffer."""

from __future__ import annotations

from ..codes import PC323
from ..diagnostics import Label
from ..model import LaunchNode, Mode, Node
from ..programmatic_edges import EarlyHazard
from .context import CheckContext


def early_access_before_wait(ctx: CheckContext) -> None:
    reported: set[tuple] = set()
    for items, found in ctx.unit_hazards:
        for index, hazards in found.items():
            node = items[index]
            assert isinstance(node, LaunchNode)
            for hazard in hazards:
                key = (id(node.kernel), hazard.early.span, hazard.access.buffer.name)
                if key not in reported:
                    reported.add(key)
                    _report(ctx, node, hazard, _earlier_toucher(items[:index], hazard))


def _earlier_toucher(earlier: list[Node], hazard: EarlyHazard) -> Node:
    """The latest earlier node whose access conflicts with the early one."""
    target = hazard.access
    for node in reversed(earlier):
        for access in node.accesses:
            if access.overlaps(target) and (access.mode & Mode.WRITE or "w" in hazard.early.mode):
                return node
    raise AssertionError("early_hazards found a conflicting earlier node")


def _report(ctx: CheckContext, node: LaunchNode, hazard: EarlyHazard, earlier: Node) -> None:
    kernel, buffer = node.kernel, hazard.access.buffer.name
    what = {"r": "reads", "w": "writes", "rw": "reads and writes"}[hazard.early.mode]
    other = "writes" if hazard.earlier_writes else "reads"
    waits = ("before it waits for its predecessor (`griddepcontrol.wait`)"
             if kernel.launch_control.waits != "never" else "and never waits for its predecessor")
    ctx.sink.add(
        PC323, f"kernel `{kernel.name}` asks for programmatic launch but {what} `{buffer}` {waits}, "
        f"which `{earlier.name}` {other} earlier: no edge into `{node.name}` can be programmatic",
        hazard.early.span,
        "move the access after `pipec_wait_for_producer()` (kernels/pdl.cuh); before it, touch only "
        "what no earlier node of the graph writes (constants, weights that a later node updates)",
        labels=(Label(node.span, "launched here"), Label(earlier.span, f"{other} `{buffer}` here"),
                *hazard.early.trail), uses=ctx.uses(node))
