"""PC312: dynamic shared memory over what one block may have on the target architecture."""

from __future__ import annotations

from ..codes import PC312
from .context import CheckContext

# Largest dynamic shared memory per block (opt-in limit), by compute capability.
SHARED_LIMITS = {
    "sm_70": 98304, "sm_72": 98304, "sm_75": 65536, "sm_80": 166912, "sm_86": 101376,
    "sm_87": 166912, "sm_89": 101376, "sm_90": 232448, "sm_100": 232448, "sm_120": 101376,
}
DEFAULT_LIMIT = 49152  # what every architecture allows without opting in


def shared_limit(arch: str) -> int:
    """The most dynamic shared memory a block may have on `arch`."""
    return SHARED_LIMITS.get(arch.removesuffix("a"), DEFAULT_LIMIT)


def shared_memory_over_limit(ctx: CheckContext) -> None:
    limit = shared_limit(ctx.arch)
    for node in ctx.launches():
        if node.shared_bytes > limit:
            ctx.sink.add(PC312, f"{node.shared_bytes} bytes of dynamic shared memory; a block on "
                         f"{ctx.arch} has at most {limit}", node.config_span,
                         "use less shared memory per block, or split the work across blocks",
                         uses=ctx.uses(node))
        elif node.shared_bytes < 0:
            ctx.sink.add(PC312, f"{node.shared_bytes} bytes of dynamic shared memory",
                         node.config_span, "shared memory is a byte count, 0 or more", uses=ctx.uses(node))
