"""Branches in the unrolling pass. A compile-time `if` unrolls the branch its constant
condition takes. Device control flow, `if FLAG`, `switch FLAG`, `every N`, `while FLAG` and
`repeat K`, becomes conditional nodes, each preceded by the generated kernel that decides it.

A device condition is one element of an integer buffer, written `flag[i]` with a constant `i`;
any other expression that involves device data stays a host branch (PC301). Every conditional
gets a control buffer of its own, `pipec.control.K: u32[2]` (the decision, then the counter of
`every` and `repeat`): a name no declaration can take, zero-initialised like any buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...dsl import Span, ast
from ...wording import counted
from ..codes import PC105, PC320
from ..consteval import literal, names_read
from ..live import LiveTerm
from ..model import (
    Access, Buffer, ConditionalKind, ConditionalNode, Construct, DecideNode, DecideRole, GraphBody, Init,
    Mode,
)
from ...plan.dtypes import DTYPES
from .context import Env
from .ranks import check_rank_decision, reads_rank
from .scope import Abort, BufferSymbol, LoadedModule
from .unroll import Frame, Unroller

CONTROL_PREFIX = "pipec.control."
MAX_SWITCH_CASES = 1024  # a switch node has one body per value up to its largest case
# the period of `every` and the count of `repeat`: a u32 argument of the deciding kernels
OPERAND_RANGE = {"every": (1, (1 << 32) - 1), "repeat": (0, (1 << 32) - 1)}

@dataclass(frozen=True)
class _Conditional:
    """One device construct to build: its name, the CUDA conditional node type, how its
    decision is made (role, operand, flag) and its bodies by name suffix."""

    construct: Construct
    kind: ConditionalKind
    role: DecideRole
    operand: int
    flag: Access | None
    blocks: Sequence[tuple[str, ast.Block | None]]
    reason: str | None = None  # why the decision may differ between ranks, if it may
    operand_live: LiveTerm | None = None  # the operand's live-update term (compiler/live.py)


def resolve_if(u: Unroller, f: Frame, stmt: ast.If) -> None:
    flag = device_flag(u, f.module, f.env, stmt.cond)
    if flag is not None:
        _device_if(u, f, stmt, flag)
    else:
        _host_if(u, f, stmt)


def _host_if(u: Unroller, f: Frame, stmt: ast.If) -> None:
    cond = u.ctx.eval(f.module, f.env, stmt.cond, context="branch", use="a compile-time `if`")
    if not isinstance(cond, bool):
        u.ctx.sink.add(PC105, f"a condition must be a boolean, found `{literal(cond)}`",
                       stmt.cond.span, "compare explicitly, for example `N > 0`")
        raise Abort
    chosen = stmt.then if cond else stmt.orelse
    skipped = stmt.orelse if cond else stmt.then
    if skipped is not None and id(skipped) not in u.skipped_branches:  # other constants take
        u.skipped_branches.add(id(skipped))  # it: its buffers are not unused
        u.names_in_skipped_branches.update(names_read(skipped))
    check_rank_decision(u.ctx.sink, f.module, f.env, stmt.cond, "a condition depends on the rank",
                        stmt.cond.span, [stmt.then, stmt.orelse], u.names_read(stmt.cond))
    if isinstance(chosen, ast.If):
        u.statement(f, chosen)
    elif chosen is not None:
        u.block(f, chosen)


def device_flag(u: Unroller, module: LoadedModule, env: Env, expr: ast.Expr) -> Access | None:
    """The buffer element `expr` names (`flag[i]`), or None when `expr` is not one."""
    if not (isinstance(expr, ast.Index) and isinstance(expr.base, ast.Name)):
        return None
    name = expr.base.ident.text
    symbol = None if name in env else module.scope.get(name)
    if not isinstance(symbol, BufferSymbol):
        return None
    buffer = symbol.buffer
    index = u.ctx.integer(module, env, expr.index, "a condition's element index")
    if buffer.dtype.kind not in "iu":
        u.ctx.sink.add(PC320, f"a device condition reads an integer, but `{name}` holds "
                       f"{buffer.dtype.name}", expr.span,
                       "keep flags and counters in an integer buffer (i32, u32, i64, u64 or u8)")
        raise Abort
    if not 0 <= index < buffer.count:
        u.ctx.sink.add(PC320, f"element {index} of `{name}` lies outside its "
                       f"{counted(buffer.count, 'element')}", expr.span, f"element indices run from 0 to {buffer.count - 1}")
        raise Abort
    return Access(buffer, index, index + 1, Mode.READ, expr.span)


def _device_flag_required(u: Unroller, f: Frame, expr: ast.Expr, construct: str) -> Access:
    flag = device_flag(u, f.module, f.env, expr)
    if flag is None:
        u.ctx.sink.add(PC320, f"`{construct}` decides on the device, so its condition must be "
                       f"one element of an integer buffer, found `{expr.span.text}`", expr.span,
                       f"write the decision into a buffer and name its element: `{construct} flag[0] {{ }}`")
        raise Abort
    return flag


def _device_if(u: Unroller, f: Frame, stmt: ast.If, flag: Access) -> None:
    blocks: list[tuple[str, ast.Block | None]] = [("then", stmt.then)]
    if isinstance(stmt.orelse, ast.If):
        # `else if` nests: the second condition is decided inside the else body
        blocks.append(("else", ast.Block((stmt.orelse,), stmt.orelse.span)))
    elif stmt.orelse is not None:
        blocks.append(("else", stmt.orelse))
    _conditional(u, f, stmt, _Conditional("if", "if", "flag", 0, flag, blocks))


def device_switch(u: Unroller, f: Frame, stmt: ast.Switch) -> None:
    flag = _device_flag_required(u, f, stmt.flag, "switch")
    cases: dict[int, ast.Case] = {}
    for case in stmt.cases:
        value = u.ctx.integer(f.module, f.env, case.value, "a case value")
        if not 0 <= value < MAX_SWITCH_CASES or value in cases:
            problem = "appears twice" if value in cases else f"lies outside 0 to {MAX_SWITCH_CASES - 1}"
            u.ctx.sink.add(PC320, f"case {value} {problem}", case.value.span,
                           "cases are distinct small non-negative integers: the node has one "
                           "body per value up to the largest")
            raise Abort
        cases[value] = case
    size = max(cases, default=-1) + 1
    blocks = [(f"case{v}", cases[v].body if v in cases else None) for v in range(size)]
    _conditional(u, f, stmt, _Conditional("switch", "switch", "flag", 1, flag, blocks))


def device_loop(u: Unroller, f: Frame, stmt: ast.DeviceLoop) -> None:
    body = [("body", stmt.body)]
    if stmt.kind == "while":
        flag = _device_flag_required(u, f, stmt.operand, "while")
        _conditional(u, f, stmt, _Conditional("while", "while", "flag", 0, flag, body))
        return
    what = "the period of `every`" if stmt.kind == "every" else "the count of `repeat`"
    # the operand is the deciding kernels' scalar argument: a live-update site
    operand, term = u.ctx.live_integer(f.module, f.env, stmt.operand, what, "branch")
    least, most = OPERAND_RANGE[stmt.kind]
    if not least <= operand <= most:
        u.ctx.sink.add(PC105, f"{what} must lie between {least} and {most}, found {operand}",
                       stmt.operand.span, "use a constant in that range")
        raise Abort
    # a period or count computed from the rank runs the body a different number of times per rank
    reason = (f"{what}, `{stmt.operand.span.text}`, reads the rank"
              if reads_rank(f.module, f.env, stmt.operand) else None)
    if stmt.kind == "every":
        _conditional(u, f, stmt, _Conditional("every", "if", "every", operand, None, body, reason, term))
    else:
        _conditional(u, f, stmt, _Conditional("repeat", "while", "repeat-start", operand, None, body, reason, term))


def _conditional(u: Unroller, f: Frame, stmt, c: _Conditional) -> None:
    if f.group is not None:
        u.ctx.sink.add(PC320, "device control flow cannot be a member of a `parallel` block",
                       stmt.span, "move it out of the block, or into a graph the block uses")
        raise Abort
    index, control = _control_buffer(u, stmt.span)
    _decide(u, f.body, c, c.role, index, control, stmt.span)
    name = u.node_name(f.body, c.construct)
    bodies = []
    reason = c.reason
    # A flag may hold different values on different ranks unless it is declared replicated.
    if c.flag is not None and not c.flag.buffer.replicated:
        reason = f"`{c.flag.buffer.name}` decides on the device"
    with u.diverging(reason, stmt.span):
        for suffix, block in c.blocks:
            child = GraphBody(f"{name}/{suffix}", c.construct, (block or stmt).span, uses=f.body.uses)
            if block is not None:
                u.block(Frame(f.module, f.env, child, None, f.stack), block)
            bodies.append(child)
    if c.kind == "while":  # the loop decides again at the end of every iteration
        again: DecideRole = "flag" if c.construct == "while" else "repeat-next"
        _decide(u, bodies[0], c, again, index, control, stmt.span)
    f.body.items.append(ConditionalNode(name, c.construct, c.kind, index, c.flag, control, bodies, stmt.span))


def _control_buffer(u: Unroller, span: Span) -> tuple[int, Buffer]:
    index = len(u.control_buffers)
    name = f"{CONTROL_PREFIX}{index}"
    buffer = Buffer(name, DTYPES["u32"], (2,), False, (), Init("zeros"), span)
    u.control_buffers[name] = buffer
    return index, buffer


def _decide(u: Unroller, body: GraphBody, c: _Conditional, role: DecideRole, index: int, control: Buffer,
            span: Span) -> None:
    control_mode = Mode.WRITE if role in ("flag", "repeat-start") else Mode.READ_WRITE
    stop = 1 if role == "flag" else 2
    node = DecideNode(u.node_name(body, f"decide:{c.construct}"), role, index, c.flag, control,
                      c.operand, span, operand_live=c.operand_live)
    decision = Access(control, 0, stop, control_mode, span)
    node.accesses = ((c.flag,) if c.flag is not None else ()) + (decision,)
    body.items.append(node)
