"""GEMM statements in the unrolling pass: `gemm c = alpha * a.T @ b + bias + beta * c with ...`
becomes a `GemmNode`: operand views, transposes, alpha and beta folded, the epilogue, its
auxiliary outputs, and the checks cuBLASLt would otherwise fail at build time or, worse, not
at all (docs/language.md, "GEMM nodes"): those that leave no node to build are here; element
types (PC504) and alignment (PC503) are checked on the node (compiler/checks/gemm_operands.py).

The expression keeps pipec's ordinary syntax: `@` binds like `*`, so `alpha * a @ b` is one
chain of factors, and the sum around it is one chain of terms. Each node owns a workspace
buffer, `pipec.workspace.<node name>: u8[option gemm_workspace]`: a name no declaration can
take, so that independent GEMMs share no scratch memory and stay concurrent.
"""

from __future__ import annotations

import math

from ...dsl import Span, ast
from ...wording import counted, with_article
from ..codes import PC105, PC501, PC502, PC505, PC506, PC507, PC508
from ..consteval import ConstError, RuntimeValue, evaluate, literal
from ..model import Access, Buffer, Epilogue, GemmNode, Init, MatrixView, Mode
from ...plan.dtypes import DTYPES
from .scope import Abort
from .spelling import did_you_mean
from .unroll import Frame, Unroller
from .views import elements, gemm_error, matrix, operand

WORKSPACE_PREFIX = "pipec.workspace."
ACTIVATIONS = ("relu", "gelu")
# the epilogue of a forward node by (activation, with a bias), of a backward one by gradient
FORWARD: dict[tuple[str, bool], Epilogue] = {
    ("none", False): "none", ("none", True): "bias", ("relu", False): "relu", ("relu", True): "relu_bias",
    ("gelu", False): "gelu", ("gelu", True): "gelu_bias",
}
BACKWARD: dict[str, Epilogue] = {"relu": "drelu", "gelu": "dgelu"}
OPTION_WORDS = {"activation": ("none", *ACTIVATIONS), "gradient": ("none", *ACTIVATIONS),
                "compute": ("f32", "tf32")}
VIEW_OPTIONS = ("aux", "bias_grad")
# cuBLASLt's aux leading dimension (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD): a multiple of 128
# bits for the ReLU mask, of 8 elements for the GELU input.
AUX_LD_MULTIPLE = {"relu": 128, "gelu": 8}


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _chain(expr: ast.Expr, ops: tuple[str, ...]) -> list:
    """The operands and operators of a chain of `ops`, left to right (parentheses are gone by
    now: `alpha * (a @ b)` is the chain `alpha * a @ b`)."""
    out: list = []
    pending: list = [expr]
    while pending:
        item = pending.pop()
        if isinstance(item, ast.Binary) and item.op in ops:
            pending += [item.right, item.op, item.left]
        else:
            out.append(item)
    return out


class _Form:
    """The parts of a GEMM expression, before any is resolved."""

    def __init__(self) -> None:
        self.alpha: list[ast.Expr] = []
        self.a: ast.Expr | None = None
        self.b: ast.Expr | None = None
        self.bias: ast.Expr | None = None
        self.beta: list[ast.Expr] | None = None  # the factors of the accumulated term
        self.accumulated: ast.Expr | None = None


# --- the expression's form --------------------------------------------------------------


def _form(u: Unroller, module, env, stmt: ast.Gemm) -> _Form:
    form = _Form()
    hint = "write `gemm c = alpha * a @ b + bias + beta * c` (each part but `a @ b` optional)"
    for term in _chain(stmt.value, ("+",))[::2]:
        if isinstance(term, ast.Binary) and term.op == "-":
            gemm_error(u, PC501, "a gemm adds its terms; it subtracts none", term.span,
                       "negate the scale instead: `+ -1.0 * c`, or `-1.0 * a @ b`")
        items = _chain(term, ("*", "@"))
        factors, ops = items[::2], items[1::2]
        if "@" in ops:
            at = ops.index("@")
            if form.a is not None or ops.count("@") > 1:
                gemm_error(u, PC501, "a gemm multiplies two matrices once", term.span, hint)
            if at != len(ops) - 1:
                gemm_error(u, PC501, "a gemm's factor `alpha` goes before the product",
                           factors[at + 2].span, "write `alpha * a @ b`")
            form.alpha, form.a, form.b = factors[:at], factors[at], factors[at + 1]
        elif ops or term.span.text == stmt.target.span.text:
            if form.accumulated is not None:
                gemm_error(u, PC501, "a gemm accumulates its target once", term.span, hint)
            form.beta, form.accumulated = factors[:-1], factors[-1]
        elif form.bias is None:
            form.bias = term
        else:
            gemm_error(u, PC501, "a gemm adds one bias", term.span, hint)
    if form.a is None:
        gemm_error(u, PC501, f"`{stmt.value.span.text}` has no matrix product `a @ b`",
                   stmt.value.span, hint)
    return form

# --- alpha, beta and options ------------------------------------------------------------


def _scale(u: Unroller, module, env, factors: list[ast.Expr], what: str) -> float:
    value = 1.0
    for factor in factors:
        try:
            number = evaluate(factor, u.ctx.lookup(module, env, use=f"a GEMM's {what}"))
        except RuntimeValue as rv:
            gemm_error(u, PC507, f"{what} reads {rv.description}, known only on the "
                       "device; a gemm's scales are set when the graph is built", rv.span,
                       "use a constant, or scale the operand with a kernel first")
        except ConstError as error:
            u.ctx.report(error)
            raise Abort from None
        if isinstance(number, (bool, str)):
            gemm_error(u, PC105, f"{what} must be a number, found `{literal(number)}`",
                       factor.span, "use a number")
        value *= float(number)  # integers stay within MAX_INT_BITS, below a double's range
    if factors and not math.isfinite(value):
        span = Span(factors[0].span.source, factors[0].span.start, factors[-1].span.end)
        gemm_error(u, PC105, f"`{what}` must be a finite number, found {value}", span,
                   "the node holds its scale as a number the plan writes out: keep it "
                   "within the range of a double")
    return value


def _gemm_options(u: Unroller, module, env, stmt: ast.Gemm) -> dict:
    chosen: dict = {}
    for option in stmt.options:
        name = option.name.text
        if name in chosen:
            gemm_error(u, PC508, f"option `{name}` given twice", option.span, "give each option once")
        if name in VIEW_OPTIONS:
            chosen[name] = option.value
        elif name in OPTION_WORDS:
            chosen[name] = _word(u, module, env, option, OPTION_WORDS[name])
        else:
            similar = did_you_mean(name, [*OPTION_WORDS, *VIEW_OPTIONS], "gemm options", option.name.span)
            gemm_error(u, PC508, f"unknown gemm option `{name}`", option.name.span, similar.hint, similar.fixes)
    return chosen


def _word(u: Unroller, module, env, option: ast.Keyword, words: tuple[str, ...]) -> str:
    """A bare word (`relu`), or a constant whose value is one (`-D ACT='"gelu"'`)."""
    value = option.value
    if isinstance(value, ast.Name) and value.ident.text in words:
        return value.ident.text
    try:
        word = evaluate(value, u.ctx.lookup(module, env, use=f"a GEMM's `{option.name.text}`"))
    except (ConstError, RuntimeValue):
        word = None
    if word not in words:
        gemm_error(u, PC508, f"`{option.name.text}` cannot be `{value.span.text}`", value.span,
                   f"`{option.name.text}` takes " + ", ".join(f"`{w}`" for w in words))
    return str(word)

# --- the node ---------------------------------------------------------------------------


def resolve_gemm(u: Unroller, f: Frame, stmt: ast.Gemm) -> None:
    module, env = f.module, f.env
    form = _form(u, module, env, stmt)
    options = _gemm_options(u, module, env, stmt)
    c = matrix(u, module, env, stmt.target, "target")
    a, trans_a = operand(u, module, env, form.a, "left operand")
    b, trans_b = operand(u, module, env, form.b, "right operand")
    alpha = _scale(u, module, env, form.alpha, "alpha")
    bias, beta = _bias_and_beta(u, module, env, stmt, form, c)
    m, k = (a.cols, a.rows) if trans_a else (a.rows, a.cols)
    k_b, n = (b.cols, b.rows) if trans_b else (b.rows, b.cols)
    _check_shapes(u, stmt, form, a, b, c, bias, (m, k, k_b, n))
    compute = options.get("compute", "f32")
    epilogue = _epilogue(u, stmt, options, bias)
    aux, aux_ld = _aux(u, module, env, stmt, options, epilogue, c, m, n)
    bias_grad = _bias_grad(u, module, env, stmt, options, epilogue, c, m, n)
    backward = epilogue in ("drelu", "dgelu")
    _check_overlaps(u, (c, *([aux] if aux is not None and not backward else []), bias_grad),
                    (a, b, bias, aux if backward else None))
    name = u.node_name(f.body, f"gemm:{c.buffer.name}")  # named once it stands
    node = GemmNode(name, a, b, c, trans_a, trans_b, m, n, k, c.batch, alpha, beta, compute, epilogue,
                    bias, aux, aux_ld, bias_grad, _workspace(u, name, stmt.span), stmt.span, group=f.group)
    node.accesses = _accesses(node)
    f.body.items.append(node)


def _bias_and_beta(u: Unroller, module, env, stmt: ast.Gemm, form: _Form,
                   c: MatrixView) -> tuple[MatrixView | None, float]:
    """The bias vector, and beta, the scale of the accumulated target (0 without one). A
    `+ c` term that names the target is the accumulated term, not a bias."""
    bias = accumulated = None
    if form.bias is not None:
        bias = matrix(u, module, env, form.bias, "bias", least=1)
        if _same_matrix(bias, c):  # `+ c`, also of a 1-row target: the accumulated term
            form.accumulated, form.beta, accumulated, bias = form.bias, [], bias, None
        elif bias.rows != 1 or bias.batched:
            gemm_error(u, PC501, f"`{form.bias.span.text}` is a matrix, and a gemm "
                       f"accumulates only into its target `{stmt.target.span.text}`",
                       form.bias.span, "add a bias vector, or accumulate the target: "
                       "`+ beta * c` with `c` the target")
    if form.accumulated is None:
        return bias, 0.0
    accumulated = accumulated or matrix(u, module, env, form.accumulated, "accumulated operand")
    if not _same_matrix(accumulated, c):
        gemm_error(u, PC501, f"a gemm accumulates only into its target `{stmt.target.span.text}`, "
                   f"found `{form.accumulated.span.text}`", form.accumulated.span,
                   "write `+ beta * TARGET`; to add another matrix, copy it into the target first")
    return bias, _scale(u, module, env, form.beta or [], "beta")


def _workspace(u: Unroller, node_name: str, span: Span) -> Buffer:
    workspace = Buffer(f"{WORKSPACE_PREFIX}{node_name}", DTYPES["u8"], (u.gemm_workspace,), False, (),
                       Init("uninit"), span)
    u.workspaces[workspace.name] = workspace
    return workspace


def _check_shapes(u: Unroller, stmt, form: _Form, a: MatrixView, b: MatrixView, c: MatrixView,
                  bias: MatrixView | None, mkn: tuple[int, int, int, int]) -> None:
    m, k, k_b, n = mkn
    if k != k_b:
        gemm_error(u, PC502, f"the product's inner dimensions differ: op(a) is {m} x {k}, "
                   f"op(b) {k_b} x {n}", stmt.value.span,
                   "the left operand's columns must equal the right operand's rows "
                   "(after `.T`)")
    if (c.rows, c.cols) != (m, n):
        gemm_error(u, PC502, f"the target is {c.rows} x {c.cols}, the product {m} x {n}",
                   stmt.target.span, f"write into {with_article(f'{m} x {n}')} view")
    for side, expr in ((a, form.a), (b, form.b)):
        if side.batched and (not c.batched or side.batch != c.batch):
            target = f"a batch of {c.batch}" if c.batched else "one matrix"
            gemm_error(u, PC502, f"`{expr.span.text}` is a batch of {side.batch}, the "
                       f"target {target}", expr.span, "batched operands have the target's "
                       "batch; a 2-D operand serves every entry of a batch")
    if bias is not None and bias.cols != n:
        gemm_error(u, PC502, f"the bias holds {counted(bias.cols, 'element')}, the product has "
                   f"{counted(n, 'column')}", bias.span,
                   f"add a bias of {counted(n, 'element')}, one per column of the target")


def _epilogue(u: Unroller, stmt, options: dict, bias) -> Epilogue:
    activation, gradient = options.get("activation", "none"), options.get("gradient", "none")
    problem = None
    if activation != "none" and gradient != "none":
        problem = "`activation` and `gradient` together: a node is a forward or a backward step"
    elif gradient != "none" and bias is not None:
        problem = "a bias with `gradient`: the backward epilogue writes the bias gradient instead"
    elif gradient != "none" and "aux" not in options:
        problem = f"`gradient = {gradient}` without `aux`: it reads the forward node's aux output"
    elif "aux" in options and activation == gradient == "none":
        problem = "`aux` without `activation` or `gradient`: nothing writes or reads it"
    elif "bias_grad" in options and (activation != "none" or bias is not None):
        problem = "`bias_grad` with a forward epilogue"
    if problem:
        gemm_error(u, PC505, f"unsupported epilogue: {problem}", stmt.span,
                   "forward: `activation` with an optional bias and `aux`; backward: "
                   "`gradient` with `aux` and an optional `bias_grad`; or `bias_grad` alone")
    if gradient != "none":
        return BACKWARD[gradient]
    if "bias_grad" in options:
        return "bgrad_a"
    return FORWARD[activation, bias is not None]


def _aux(u: Unroller, module, env, stmt, options, epilogue: str, c: MatrixView, m: int, n: int):
    if "aux" not in options:
        return None, 0
    expr = options["aux"]
    view = elements(u, module, env, expr, "aux output")
    activation = "relu" if "relu" in epilogue else "gelu"
    ld = _round_up(n, AUX_LD_MULTIPLE[activation])
    if activation == "relu":
        dtype, needed = "u8", c.batch * m * ld // 8
        what = f"{with_article(f'{m} x {n}')} ReLU bit-mask (rows of {ld} bits)"
    else:
        dtype, needed = c.buffer.dtype.name, c.batch * m * ld
        what = f"the {m} x {n} GELU input (rows of {counted(ld, 'element')})"
    batch = f" for each of {counted(c.batch, 'matrix')}" if c.batch > 1 else ""
    _check_output(u, expr, view, dtype, needed, f"{what}{batch}")
    return MatrixView(view.buffer, view.start, 1, 1, needed, False, view.span), ld


def _bias_grad(u: Unroller, module, env, stmt, options, epilogue: str, c: MatrixView, m: int, n: int):
    if "bias_grad" not in options:
        return None
    expr = options["bias_grad"]
    if c.batch > 1:
        gemm_error(u, PC505, "unsupported epilogue: a bias gradient of a batch", expr.span,
                   "compute the bias gradient of each matrix in a node of its own")
    view = elements(u, module, env, expr, "bias gradient")
    length = m if epilogue == "bgrad_a" else n
    what = (f"the {length} row sums of op(a)" if epilogue == "bgrad_a"
            else f"the {length} column sums of the result")
    _check_output(u, expr, view, c.buffer.dtype.name, length, what)
    return MatrixView(view.buffer, view.start, 1, 1, length, False, view.span)


def _check_output(u: Unroller, expr, view: MatrixView, dtype: str, needed: int, what: str) -> None:
    if view.buffer.dtype.name != dtype:
        gemm_error(u, PC506, f"`{expr.span.text}` holds {view.buffer.dtype.name}; {what} "
                   f"is {dtype}", expr.span, f"use {with_article(dtype)} buffer")
    if view.count < needed:
        gemm_error(u, PC506, f"`{expr.span.text}` holds {counted(view.count, 'element')}, fewer than "
                   f"the {needed} of {what}", expr.span, f"give it at least {needed} {dtype} elements")


def _check_overlaps(u: Unroller, written: tuple, read: tuple) -> None:
    """cuBLASLt reads its operands while it writes its outputs: a written range may share
    no element with any other operand. The accumulated target is no other operand: it is
    the target itself (D == C), the one overlap the library supports."""
    views = [v for v in (*written, *read) if v is not None]
    for output in (v for v in written if v is not None):
        for other in views:
            if other is not output and other.buffer is output.buffer and \
                    other.start < output.stop and output.start < other.stop:
                gemm_error(u, PC502, f"`{output.span.text}` is written while `{other.span.text}` "
                           f"is read or written: elements {max(output.start, other.start)} to "
                           f"{min(output.stop, other.stop) - 1} of `{output.buffer.name}` are in "
                           "both", output.span, "write into elements no other operand uses; "
                           "only the accumulated target (`+ beta * c`) may be the target")


def _same_matrix(x: MatrixView, y: MatrixView) -> bool:
    return (x.buffer is y.buffer and x.start == y.start and
            (x.batch, x.rows, x.cols) == (y.batch, y.rows, y.cols))


def _accesses(node: GemmNode) -> tuple[Access, ...]:
    """Reads a, b, the bias, c when beta is not 0, aux when backward; writes c, aux when
    forward, the bias gradient and the workspace."""
    def access(view: MatrixView, mode: Mode) -> Access:
        return Access(view.buffer, view.start, view.stop, mode, view.span)

    out = [access(node.a, Mode.READ), access(node.b, Mode.READ)]
    if node.bias is not None:
        out.append(access(node.bias, Mode.READ))
    out.append(access(node.c, Mode.READ_WRITE if node.beta != 0 else Mode.WRITE))
    if node.aux is not None:
        backward = node.epilogue in ("drelu", "dgelu")
        out.append(access(node.aux, Mode.READ if backward else Mode.WRITE))
    if node.bias_grad is not None:
        out.append(access(node.bias_grad, Mode.WRITE))
    workspace = node.workspace
    out.append(Access(workspace, 0, workspace.count, Mode.WRITE, node.span))
    return tuple(out)
