"""Device control flow in the unrolling pass: `if FLAG`, `switch FLAG`, `every N`, `while FLAG`
and `repeat K` become conditional nodes, each preceded by the generated kernel that decides it.

A device condition is one element of an integer buffer, written `flag[i]` with a constant `i`;
any other expression that involves device data stays a host branch (PC301). Every conditional
gets a control buffer of its own, `pipec.control.K: u32[2]` (the decision, then the counter of
`every` and `repeat`): a name no declaration can take, zero-initialised like any buffer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ContextManager

from ...dsl import ast
from ..codes import PC105, PC320
from ..model import (
    Access, Buffer, ConditionalNode, DecideNode, GraphBody, Init, Mode,
)
from ...plan.dtypes import DTYPES
from .scope import Abort, LoadedModule, Scope

CONTROL_PREFIX = "pipec.control."
MAX_SWITCH_CASES = 1024  # a switch node has one body per value up to its largest case


class ControlFlow(Scope):
    """Mixed into the unrolling pass; uses its `_block` and `_node_name`."""

    control_buffers: dict[str, Buffer]
    if TYPE_CHECKING:  # the unrolling pass's, which this is mixed into
        _block: Callable[..., None]
        _node_name: Callable[[GraphBody, str], str]
        diverging: Callable[..., ContextManager[None]]
        reads_rank: Callable[..., bool]

    def device_flag(self, module: LoadedModule, env: dict, expr: ast.Expr) -> Access | None:
        """The buffer element `expr` names (`flag[i]`), or None when `expr` is not one."""
        if not (isinstance(expr, ast.Index) and isinstance(expr.base, ast.Name)):
            return None
        name = expr.base.ident.text
        symbol = None if name in env else module.scope.get(name)
        if symbol is None or symbol.kind != "buffer":
            return None
        buffer: Buffer = symbol.value
        index = self._int(module, env, expr.index, "a condition's element index")
        if buffer.dtype.kind not in "iu":
            self.sink.add(PC320, f"a device condition reads an integer, but `{name}` holds "
                          f"{buffer.dtype.name}", expr.span,
                          "keep flags and counters in an integer buffer (i32, u32, i64, u64 or u8)")
            raise Abort
        if not 0 <= index < buffer.count:
            self.sink.add(PC320, f"element {index} of `{name}` lies outside its {buffer.count} "
                          "elements", expr.span, f"element indices run from 0 to {buffer.count - 1}")
            raise Abort
        return Access(buffer, index, index + 1, Mode.READ, expr.span)

    def _device_flag_required(self, module, env, expr: ast.Expr, construct: str) -> Access:
        flag = self.device_flag(module, env, expr)
        if flag is None:
            self.sink.add(PC320, f"`{construct}` decides on the device, so its condition must be "
                          f"one element of an integer buffer, found `{expr.span.text}`", expr.span,
                          f"write the decision into a buffer and name its element: `{construct} flag[0] {{ }}`")
            raise Abort
        return flag

    def _control(self, span) -> tuple[int, Buffer]:
        index = len(self.control_buffers)
        name = f"{CONTROL_PREFIX}{index}"
        buffer = Buffer(name, DTYPES["u32"], (2,), False, (), Init("zeros"), span)
        self.control_buffers[name] = buffer
        return index, buffer

    def _no_parallel(self, stmt, group) -> None:
        if group is not None:
            self.sink.add(PC320, "device control flow cannot be a member of a `parallel` block",
                          stmt.span, "move it out of the block, or into a graph the block uses")
            raise Abort

    def _decide(self, body: GraphBody, construct: str, role: str, index: int, control: Buffer,
                flag: Access | None, operand: int, span) -> None:
        control_mode = Mode.WRITE if role in ("flag", "repeat-start") else Mode.READ_WRITE
        stop = 1 if role == "flag" else 2
        node = DecideNode(self._node_name(body, f"decide:{construct}"), role, index, flag, control,
                          operand, span)
        node.accesses = ((flag,) if flag is not None else ()) + (Access(control, 0, stop, control_mode, span),)
        body.items.append(node)

    def _conditional(self, body, construct: str, kind: str, flag, role: str, operand: int,
                     blocks: list[tuple[str, ast.Block | None]], module, env, stmt, group, stack,
                     reason: str | None = None) -> None:
        self._no_parallel(stmt, group)
        index, control = self._control(stmt.span)
        self._decide(body, construct, role, index, control, flag, operand, stmt.span)
        name = self._node_name(body, construct)
        bodies = []
        # A flag may hold different values on different ranks unless it is declared replicated.
        if flag is not None and not flag.buffer.replicated:
            reason = f"`{flag.buffer.name}` decides on the device"
        with self.diverging(reason, stmt.span):
            for suffix, block in blocks:
                child = GraphBody(f"{name}/{suffix}", construct, (block or stmt).span)
                if block is not None:
                    self._block(module, env, block, child, None, stack)
                bodies.append(child)
        if kind == "while":  # the loop decides again at the end of every iteration
            again = "flag" if construct == "while" else "repeat-next"
            self._decide(bodies[0], construct, again, index, control, flag, operand, stmt.span)
        body.items.append(ConditionalNode(name, construct, kind, index, flag, control, bodies, stmt.span))

    def device_if(self, module, env, stmt: ast.If, flag: Access, body, group, stack) -> None:
        blocks: list[tuple[str, ast.Block | None]] = [("then", stmt.then)]
        if isinstance(stmt.orelse, ast.If):
            # `else if` nests: the second condition is decided inside the else body
            orelse = ast.Block((stmt.orelse,), stmt.orelse.span)
            blocks.append(("else", orelse))
        elif stmt.orelse is not None:
            blocks.append(("else", stmt.orelse))
        self._conditional(body, "if", "if", flag, "flag", 0, blocks, module, env, stmt, group, stack)

    def device_switch(self, module, env, stmt: ast.Switch, body, group, stack) -> None:
        flag = self._device_flag_required(module, env, stmt.flag, "switch")
        cases: dict[int, ast.Case] = {}
        for case in stmt.cases:
            value = self._int(module, env, case.value, "a case value")
            if not 0 <= value < MAX_SWITCH_CASES or value in cases:
                problem = "appears twice" if value in cases else f"lies outside 0 to {MAX_SWITCH_CASES - 1}"
                self.sink.add(PC320, f"case {value} {problem}", case.value.span,
                              "cases are distinct small non-negative integers: the node has one "
                              "body per value up to the largest")
                raise Abort
            cases[value] = case
        size = max(cases, default=-1) + 1
        blocks = [(f"case{v}", cases[v].body if v in cases else None) for v in range(size)]
        self._conditional(body, "switch", "switch", flag, "flag", 1, blocks, module, env, stmt, group, stack)

    def device_loop(self, module, env, stmt: ast.DeviceLoop, body, group, stack) -> None:
        if stmt.kind == "while":
            flag = self._device_flag_required(module, env, stmt.operand, "while")
            self._conditional(body, "while", "while", flag, "flag", 0, [("body", stmt.body)],
                              module, env, stmt, group, stack)
            return
        what = "the period of `every`" if stmt.kind == "every" else "the count of `repeat`"
        operand = self._int(module, env, stmt.operand, what, "branch")
        least = 1 if stmt.kind == "every" else 0
        if not least <= operand < 1 << 32:
            self.sink.add(PC105, f"{what} must lie between {least} and {(1 << 32) - 1}, found {operand}",
                          stmt.operand.span, "use a constant in that range")
            raise Abort
        # a period or count computed from the rank runs the body a different number of times per rank
        reason = (f"{what}, `{stmt.operand.span.text}`, reads the rank"
                  if self.reads_rank(module, env, stmt.operand) else None)
        if stmt.kind == "every":
            self._conditional(body, "every", "if", None, "every", operand, [("body", stmt.body)],
                              module, env, stmt, group, stack, reason)
        else:
            self._conditional(body, "repeat", "while", None, "repeat-start", operand,
                              [("body", stmt.body)], module, env, stmt, group, stack, reason)
