"""PC310: the elements a kernel declares it touches (`/// pipec: extent`) exceed the binding."""

from __future__ import annotations

from ..diagnostics import Label
from ..model import PointerArg
from ..resolve import extent_value, scalar_bindings
from .context import CheckContext


def buffer_smaller_than_extent(ctx: CheckContext) -> None:
    for node in ctx.launches():
        if len(node.args) != len(node.kernel.params):
            continue  # argument_count reports it; the extent's inputs are not all bound
        scalars = scalar_bindings(node)
        for param, arg in zip(node.kernel.params, node.args):
            if param.extent is None or not isinstance(arg, PointerArg):
                continue
            needed = extent_value(param, node, scalars)
            extent = Label(param.extent.span, "extent declared here")
            if needed is None:
                ctx.sink.add("PC310", f"cannot compute the extent of {param.describe()} of "
                             f"`{node.kernel.name}` at this launch", arg.span,
                             "the extent may only use scalar parameters bound to constants, "
                             "and gridDim/blockDim", labels=(extent,))
                continue
            held = arg.stop - arg.start
            if needed > held:
                what = f"`{arg.buffer.name}`" + (f"[{arg.start}:{arg.stop}]" if arg.sliced else "")
                ctx.sink.add("PC310", f"`{node.kernel.name}` touches {needed} elements through "
                             f"{param.describe()}, but {what} holds {held}", arg.span,
                             f"bind at least {needed} elements, or launch over fewer",
                             labels=(extent,))
