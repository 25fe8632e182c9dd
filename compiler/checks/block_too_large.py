"""PC311: a block over the device's limits (1024 threads; 1024 x 1024 x 64), or over the
kernel's own `__launch_bounds__`."""

from __future__ import annotations

from ..codes import PC311
from ..diagnostics import Label
from .context import CheckContext

MAX_THREADS = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)


def block_too_large(ctx: CheckContext) -> None:
    for node in ctx.launches():
        threads = node.threads_per_block
        if any(d <= 0 for d in node.block):
            continue  # reported by invalid_grid
        over_dim = [axis for axis, d, limit in zip("xyz", node.block, MAX_BLOCK_DIMS) if d > limit]
        if threads > MAX_THREADS or over_dim:
            detail = f"{threads} threads" if threads > MAX_THREADS else f"block.{over_dim[0]} = {node.block['xyz'.index(over_dim[0])]}"
            ctx.sink.add(PC311, f"a block with {detail}; a block holds at most {MAX_THREADS} threads "
                         f"and {MAX_BLOCK_DIMS[0]} x {MAX_BLOCK_DIMS[1]} x {MAX_BLOCK_DIMS[2]}",
                         node.config_span, "use more blocks of fewer threads", uses=ctx.uses(node))
        elif node.kernel.max_threads is not None and threads > node.kernel.max_threads:
            ctx.sink.add(PC311, f"a block of {threads} threads, but `{node.kernel.name}` is compiled "
                         f"for at most {node.kernel.max_threads} (`__launch_bounds__`)", node.config_span,
                         f"launch at most {node.kernel.max_threads} threads per block",
                         labels=(Label(node.kernel.decl_span, "declared here"),), uses=ctx.uses(node))
