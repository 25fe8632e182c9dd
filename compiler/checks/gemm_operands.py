"""PC504 a GEMM's element types that cuBLASLt has no kernel for, and PC503 an operand that
starts, or whose rows or matrices start, off a 16-byte boundary (the library's fast kernels,
and its heuristic's default expectation). Checked on the model's GemmNode, one report per node,
types first. The rules the model cannot represent (a GEMM's form, shapes that do not agree,
epilogue options that do not combine, outputs too small) are reported as the resolver builds
the node (compiler/resolve/gemm.py)."""

from __future__ import annotations

from ...wording import counted, with_article
from ..codes import PC503, PC504
from ..model import GemmNode, MatrixView
from .context import CheckContext

ALIGNMENT = 16  # bytes
INPUT_TYPES = ("f32", "f16", "bf16")


def gemm_operands(ctx: CheckContext) -> None:
    for node in ctx.nodes:
        if isinstance(node, GemmNode):
            _check(ctx, node)


def _check(ctx: CheckContext, node: GemmNode) -> None:
    problem = type_problem(node)
    if problem:
        ctx.sink.add(PC504, f"unsupported type combination: {problem}", node.span,
                     "supported: f32, f16 or bf16 operands (f32 accumulation) into the same "
                     "type or f32; TF32 for f32 operands", uses=ctx.uses(node))
        return
    for view in (node.a, node.b, node.c, node.bias, node.aux, node.bias_grad):
        if view is not None and _misaligned(ctx, node, view):
            return


def type_problem(node: GemmNode) -> str | None:
    """What is wrong with the node's element types, or None."""
    ta, tb, tc = node.a.buffer.dtype.name, node.b.buffer.dtype.name, node.c.buffer.dtype.name
    bias = node.bias
    if ta not in INPUT_TYPES or ta != tb:
        return f"operands of {ta} and {tb}: both must be f32, f16 or bf16, the same"
    if tc != ta and not (tc == "f32" and ta != "f32"):
        return f"{ta} operands into {with_article(tc)} target: the target holds {ta}, or f32"
    if node.compute == "tf32" and ta != "f32":
        return f"`compute = tf32` with {ta} operands: TF32 rounds f32 inputs only"
    if bias is not None and bias.buffer.dtype.name != tc:
        return f"{with_article(bias.buffer.dtype.name)} bias for {with_article(tc)} target: the bias has the target's type"
    return None


def _misaligned(ctx: CheckContext, node: GemmNode, view: MatrixView) -> bool:
    """PC503 for the view's first misaligned start (of the view, of a batch's matrices, of
    its rows); whether there was one."""
    size = view.buffer.dtype.size
    if view.start * size % ALIGNMENT:
        message = (f"`{view.span.text}` starts {counted(view.start * size, 'byte')} into `{view.buffer.name}`, "
                   f"not a multiple of {ALIGNMENT}")
        hint = f"start operands at a multiple of {ALIGNMENT // size} elements"
    elif view.batched and view.batch > 1 and view.rows * view.cols * size % ALIGNMENT:
        message = (f"the matrices of `{view.span.text}` are {counted(view.rows * view.cols * size, 'byte')} apart, "
                   f"not a multiple of {ALIGNMENT}")
        hint = f"pad each matrix to a multiple of {ALIGNMENT // size} elements"
    elif view.rows > 1 and view.cols * size % ALIGNMENT:
        message = (f"the rows of `{view.span.text}` are {counted(view.cols * size, 'byte')} apart, not a "
                   f"multiple of {ALIGNMENT}")
        hint = f"pad rows to a multiple of {ALIGNMENT // size} elements"
    else:
        return False
    ctx.sink.add(PC503, message, view.span, hint, uses=ctx.uses(node))
    return True

