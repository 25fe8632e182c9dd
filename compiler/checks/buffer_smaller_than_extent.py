"""PC310: the elements a kernel declares it touches (`/// pipec: extent`) exceed the binding."""

from __future__ import annotations

from collections.abc import Iterator

from ...wording import counted
from ..codes import PC106, PC310
from ..consteval import representable
from ..diagnostics import Label
from ..model import LaunchNode, PointerArg, ValueArg
from ..ranges import Extents
from .context import CheckContext


def buffer_smaller_than_extent(ctx: CheckContext) -> None:
    extents = Extents()
    for node in ctx.launches():
        if len(node.args) != len(node.kernel.params):
            continue  # argument_count reports it; the extent's inputs are not all bound
        findings = list(_findings(node, extents))
        # scalar_out_of_range reports a value the kernel would never see; asked only here, as
        # almost every launch has no finding (a million scalars on a 100,000-node step)
        if findings and not any(p.kind == "scalar" and p.dtype is not None and isinstance(a, ValueArg)
                                and representable(a.value, p.dtype) for p, a in zip(node.kernel.params, node.args)):
            for code, message, span, hint, labels in findings:
                ctx.sink.add(code, message, span, hint, labels=labels, uses=ctx.uses(node))


def _findings(node: LaunchNode, extents: Extents) -> Iterator[tuple]:
    """(code, message, span, hint, labels) of each problem with the launch's extents."""
    for param, arg, needed in zip(node.kernel.params, node.args, extents.of_launch(node)):
        if param.extent is None or not isinstance(arg, PointerArg):
            continue
        if needed is None:
            scalars_bound = all(isinstance(a, ValueArg) for p, a in zip(node.kernel.params, node.args)
                                if p.kind == "scalar")
            if scalars_bound:  # otherwise a binding rule already reports the launch
                yield (PC106, f"the extent of `{param.name}` in `{node.kernel.name}` uses something other "
                       "than its scalar parameters", param.extent.span,
                       "an extent may use the kernel's scalar parameters, gridDim and blockDim", ())
            continue
        held = arg.stop - arg.start
        if needed > held:
            what = f"`{arg.buffer.name}" + (f"[{arg.start}:{arg.stop}]" if arg.sliced else "") + "`"
            yield (PC310, f"`{node.kernel.name}` touches {counted(needed, 'element')} through "
                   f"{param.describe()}, but {what} holds {held}", arg.span,
                   f"bind at least {counted(needed, 'element')}, or launch over fewer",
                   (Label(param.extent.span, "extent declared here"),))
