"""PC313: a launch with no blocks or no threads, a grid over the device's limits, or a grid
that does not divide into the clusters the kernel declares (`__cluster_dims__`)."""

from __future__ import annotations

from ..codes import PC313
from ..diagnostics import Label
from .context import CheckContext

MAX_GRID = (2**31 - 1, 65535, 65535)
# Blocks per cluster without the non-portable opt-in (cudaFuncAttributeNonPortableClusterSizeAllowed),
# which pipec does not make: every GPU with clusters runs clusters of this many.
MAX_PORTABLE_CLUSTER = 8


def invalid_grid(ctx: CheckContext) -> None:
    for node in ctx.launches():
        for what, dims in (("grid", node.grid), ("block", node.block)):
            if any(d <= 0 for d in dims):
                ctx.sink.add(PC313, f"the {what} {dims} is empty", node.config_span,
                             "every grid and block dimension must be at least 1; a launch that "
                             "should do nothing can read a device flag instead", uses=ctx.uses(node))
                break
        else:
            over = [axis for axis, d, limit in zip("xyz", node.grid, MAX_GRID) if d > limit]
            if over:
                ctx.sink.add(PC313, f"grid.{over[0]} = {node.grid['xyz'.index(over[0])]} exceeds the "
                             f"limit {MAX_GRID['xyz'.index(over[0])]}", node.config_span,
                             "launch fewer, larger blocks or loop inside the kernel", uses=ctx.uses(node))
            else:
                _check_clusters(ctx, node)


def _check_clusters(ctx: CheckContext, node) -> None:
    cluster = node.kernel.cluster
    if cluster is None:
        return
    declared = (Label(node.kernel.decl_span, "clusters declared here"),)
    size = cluster[0] * cluster[1] * cluster[2]
    if size > MAX_PORTABLE_CLUSTER:
        ctx.sink.add(PC313, f"`{node.kernel.name}` declares clusters of {size} blocks; the launch "
                     f"needs a non-portable opt-in beyond {MAX_PORTABLE_CLUSTER}, which pipec does not make",
                     node.config_span, f"declare at most {MAX_PORTABLE_CLUSTER} blocks per cluster",
                     labels=declared, uses=ctx.uses(node))
        return
    uneven = [axis for axis, d, c in zip("xyz", node.grid, cluster) if d % c]
    if uneven:
        i = "xyz".index(uneven[0])
        ctx.sink.add(PC313, f"grid.{uneven[0]} = {node.grid[i]} is not a multiple of the {cluster[i]} "
                     f"blocks of `{node.kernel.name}`'s clusters along {uneven[0]} (`__cluster_dims__`)",
                     node.config_span, f"launch a multiple of {cluster[i]} blocks along {uneven[0]}",
                     labels=declared, uses=ctx.uses(node))
