"""PC308: with `option share_modules = true`, a kernel launched by two child graphs, or by a
graph and by the eager init block, would use one CUfunction in both."""

from __future__ import annotations

from ..diagnostics import Label
from ..model import ConditionalNode, GraphBody, GraphNode, Kernel, LaunchNode
from .context import CheckContext


def _owners(body: GraphBody, owner: str, found: dict[Kernel, list[tuple[str, LaunchNode]]]) -> None:
    for item in body.items:
        if isinstance(item, LaunchNode):  # keyed by the kernel, not its name: one CUfunction each
            found.setdefault(item.kernel, []).append((owner, item))
        elif isinstance(item, GraphNode):
            _owners(item.body, item.body.name, found)
        elif isinstance(item, ConditionalNode):  # bodies belong to the graph that holds the node
            for branch in item.bodies:
                _owners(branch, owner, found)


def shared_cufunction(ctx: CheckContext) -> None:
    options = ctx.program.options
    if not options.share_modules:
        return
    found: dict[Kernel, list[tuple[str, LaunchNode]]] = {}
    if ctx.program.init is not None:
        _owners(ctx.program.init, "eager init", found)
    if ctx.program.step is not None:
        _owners(ctx.program.step, "step", found)
    for kernel, uses in found.items():
        owners: list[tuple[str, LaunchNode]] = []
        for owner, node in uses:
            if owner not in [o for o, _ in owners]:
                owners.append((owner, node))
        if len(owners) < 2:
            continue
        (first_owner, first), (second_owner, second) = owners[0], owners[1]
        labels = [Label(first.span, f"used by `{first_owner}` here")]
        if options.share_modules_span is not None:
            labels.append(Label(options.share_modules_span, "modules shared here"))
        ctx.sink.add("PC308", f"kernel `{kernel.name}` would share one CUfunction between `{first_owner}` "
                     f"and `{second_owner}`", second.span,
                     "remove `option share_modules = true`: each child graph then loads its own "
                     "module instance, and eager launches yet another", labels=tuple(labels))
